//! The results file every `mttl-bench` worker job writes and its
//! orchestrator reads: one JSON document, written and read the same way by
//! every subcommand; each subcommand owns the document's shape.

use std::path::Path;

use serde_json::Value;

use crate::bench::error::BenchError;

/// Writes `value` to `path`.
pub(crate) fn write(value: &Value, path: &Path) -> Result<(), BenchError> {
    std::fs::write(path, value.to_string()).map_err(|source| BenchError::Io {
        what: "write the results file",
        path: path.to_owned(),
        source,
    })
}

/// Reads the file `config`'s worker wrote at `path` and hands its JSON to
/// `parse`; a parse failure names the configuration and the file.
pub(crate) fn read<T>(
    config: &'static str,
    path: &Path,
    parse: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<T, BenchError> {
    let bad = |detail: String| BenchError::BadResults {
        config,
        path: path.to_owned(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        what: "read the results file",
        path: path.to_owned(),
        source,
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    parse(&value).map_err(bad)
}
