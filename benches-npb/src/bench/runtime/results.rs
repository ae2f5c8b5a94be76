//! The results file a worker job's rank 0 writes and the orchestrator reads:
//! one JSON object per run, every figure in seconds per operation.
//!
//! ```json
//! {"config": "tcp", "backend": "tcp",
//!  "metrics": {"switch": [6.1e-9, ...], "invoke_remote": [1.2e-5, ...]}}
//! ```

use serde_json::{json, Map, Value};

use super::measure::Metric;
use crate::bench::results_file::{self, ResultsFile};

/// One run of one configuration: rank 0's samples for every metric it
/// measures.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunResult {
    /// The backend the worker actually ran on (`tcp`, `mpi`, `rsmpi`, or
    /// `none` for the scheduler alone).
    pub(super) backend: String,
    /// Samples, seconds per operation, by metric.
    pub(super) metrics: Vec<(Metric, Vec<f64>)>,
}

impl ResultsFile for RunResult {
    /// The file's JSON text for `config`.
    fn to_json(&self, config: &str) -> Value {
        let metrics: Map<String, Value> = self
            .metrics
            .iter()
            .map(|(m, samples)| (m.key().to_owned(), json!(samples)))
            .collect();
        results_file::run_json(config, &self.backend, "metrics", metrics.into())
    }

    /// Parses the file's JSON, checking it names `config`.
    fn from_json(config: &str, value: &Value) -> Result<RunResult, String> {
        let backend = results_file::run_backend(config, value)?;
        let entries = value["metrics"].as_object().ok_or("it has no metrics")?;
        let mut metrics = Vec::with_capacity(entries.len());
        for (key, samples) in entries {
            let metric = Metric::from_key(key).ok_or(format!("unknown metric {key:?}"))?;
            let samples =
                results_file::numbers(samples, key).ok_or(format!("{key:?} is not a list"))??;
            metrics.push((metric, samples));
        }
        Ok(RunResult { backend, metrics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_through_json() {
        let run = RunResult {
            backend: "tcp".into(),
            metrics: vec![
                (Metric::Switch, vec![6e-9, 7e-9]),
                (Metric::InvokeRemote, vec![1.5e-5]),
            ],
        };
        let value = run.to_json("tcp");
        let mut back = RunResult::from_json("tcp", &value).expect("valid");
        back.metrics.sort_by_key(|(m, _)| m.key());
        let mut expected = run.clone();
        expected.metrics.sort_by_key(|(m, _)| m.key());
        assert_eq!(back, expected);
        assert!(RunResult::from_json("mpi", &value).is_err());
    }
}
