//! The results file a worker job's rank 0 writes and the orchestrator reads:
//! one JSON object per run.
//!
//! ```json
//! {"config": "mpi", "backend": "mpi",
//!  "sizes": [{"size": 512, "window": 1024, "windows": 40,
//!             "bytes_per_s": [1.2e9, ...], "issue_us": [0.4, ...],
//!             "sync_us": [12.0, ...]}]}
//! ```

use serde_json::{json, Value};

use super::measure::SizeSamples;
use crate::bench::results_file::{self, ResultsFile};

/// One run of one configuration: rank 0's samples for every size.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunResult {
    /// The backend the worker actually ran on (`tcp`, `mpi`, or `rsmpi`).
    pub(super) backend: String,
    /// The sizes, in the order measured.
    pub(super) sizes: Vec<SizeSamples>,
    /// Whether other processes kept the machine busy during the run (set
    /// by the orchestrator, not part of the file).
    pub(super) disturbed: bool,
}

impl ResultsFile for RunResult {
    /// The file's JSON text for `config`.
    fn to_json(&self, config: &str) -> Value {
        let sizes: Vec<Value> = self
            .sizes
            .iter()
            .map(|s| {
                json!({
                    "size": s.size,
                    "window": s.window,
                    "windows": s.windows,
                    "bytes_per_s": s.bytes_per_s,
                    "issue_us": s.issue_us,
                    "sync_us": s.sync_us,
                })
            })
            .collect();
        results_file::run_json(config, &self.backend, "sizes", sizes.into())
    }

    /// Parses the file's JSON, checking it names `config`.
    fn from_json(config: &str, value: &Value) -> Result<RunResult, String> {
        let backend = results_file::run_backend(config, value)?;
        let entries = value["sizes"].as_array().ok_or("it has no sizes")?;
        let mut sizes = Vec::with_capacity(entries.len());
        for entry in entries {
            let count = |field: &str| results_file::count(entry, field);
            let figures = |field: &str| results_file::figures(entry, field);
            sizes.push(SizeSamples {
                size: count("size")?,
                window: count("window")?,
                windows: count("windows")?,
                bytes_per_s: figures("bytes_per_s")?,
                issue_us: figures("issue_us")?,
                sync_us: figures("sync_us")?,
            });
        }
        Ok(RunResult {
            backend,
            sizes,
            disturbed: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_through_json() {
        let run = RunResult {
            backend: "mpi".into(),
            sizes: vec![SizeSamples {
                size: 512,
                window: 1024,
                windows: 7,
                bytes_per_s: vec![1e9, 1.5e9],
                issue_us: vec![0.25, 0.5],
                sync_us: vec![12.0, 13.5],
            }],
            disturbed: false,
        };
        let value = run.to_json("mpi");
        assert_eq!(RunResult::from_json("mpi", &value), Ok(run));
        assert!(RunResult::from_json("tcp", &value).is_err());
    }
}
