//! The results file every `mttl-bench` worker job writes and its
//! orchestrator reads: one JSON document, written and read the same way by
//! every subcommand. A run's document names its configuration and the
//! backend the worker ran on ([`run_json`], [`run_backend`]); each
//! subcommand owns what else it holds, from the pieces here ([`count`],
//! [`figures`], [`numbers`]).

use std::path::Path;

use serde_json::Value;

use crate::bench::error::BenchError;

/// A worker's results, as the file holds them: each subcommand says how
/// its run becomes JSON and back; writing and reading are the same for all.
pub(crate) trait ResultsFile: Sized {
    /// The document for a run of configuration `config`.
    fn to_json(&self, config: &str) -> Value;

    /// Parses a document, checking it names `config`.
    fn from_json(config: &str, value: &Value) -> Result<Self, String>;

    /// Writes the file at `path`.
    fn write(&self, config: &str, path: &Path) -> Result<(), BenchError> {
        write(&self.to_json(config), path)
    }

    /// Reads the file `config`'s worker wrote at `path`.
    fn read(config: &'static str, path: &Path) -> Result<Self, BenchError> {
        read(config, path, |value| Self::from_json(config, value))
    }
}

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

/// The document of one run: `{"config": …, "backend": …, key: body}`, the
/// shape every subcommand's worker writes.
pub(crate) fn run_json(config: &str, backend: &str, key: &str, body: Value) -> Value {
    let mut doc = serde_json::Map::new();
    doc.insert("config".into(), config.into());
    doc.insert("backend".into(), backend.into());
    doc.insert(key.into(), body);
    Value::Object(doc)
}

/// Checks that the document of one run names `config`, and returns the
/// backend it names.
pub(crate) fn run_backend(config: &str, value: &Value) -> Result<String, String> {
    let named = value["config"].as_str().unwrap_or_default();
    if named != config {
        return Err(format!("it names configuration {named:?}"));
    }
    Ok(value["backend"]
        .as_str()
        .ok_or("it names no backend")?
        .to_owned())
}

/// The count `field` of a size's entry.
pub(crate) fn count<T: TryFrom<u64>>(entry: &Value, field: &str) -> Result<T, String> {
    entry[field]
        .as_u64()
        .and_then(|n| T::try_from(n).ok())
        .ok_or(format!("a size lacks a valid {field:?}"))
}

/// The samples `field` of a size's entry.
pub(crate) fn figures(entry: &Value, field: &str) -> Result<Vec<f64>, String> {
    numbers(&entry[field], field)
        .ok_or(format!("a size lacks {field:?}"))
        .and_then(|n| n)
}

/// The numbers of the list `list`, which the file calls `name`; `None`
/// if it is not a list.
pub(crate) fn numbers(list: &Value, name: &str) -> Option<Result<Vec<f64>, String>> {
    Some(
        list.as_array()?
            .iter()
            .map(|v| v.as_f64().ok_or(format!("{name:?} holds a non-number")))
            .collect(),
    )
}
