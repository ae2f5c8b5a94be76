//! The results file a worker job's rank 0 writes and the orchestrator reads:
//! one JSON object per run.
//!
//! ```json
//! {"config": "tcp", "backend": "tcp", "spin_us": 50,
//!  "sizes": [{"size": 8, "rtt_warmup": 200, "rtt_iters": 2000, "window": 64,
//!             "windows": 200, "rtt_us": [9.8, ...], "bw_bytes_per_s": [...]}]}
//! ```
//!
//! A `mpi-vs-raw` run also has `"reference"`: raw rsmpi's samples from the
//! same job, in the same form as `"sizes"`.

use serde_json::{json, Value};

use super::measure::{Plan, SizeSamples};
use crate::bench::results_file::{self, ResultsFile};

/// One run of one configuration: rank 0's samples for every size.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunResult {
    /// The backend the worker actually ran on (`tcp`, `mpi`, or `rsmpi`).
    pub(super) backend: String,
    /// The sizes, in the order measured.
    pub(super) sizes: Vec<SizeSamples>,
    /// Raw rsmpi's samples from the same job (`mpi-vs-raw`), else empty.
    pub(super) reference: Vec<SizeSamples>,
    /// Other processes kept CPUs busy while it ran (set by the
    /// orchestrator; not in the file).
    pub(super) disturbed: bool,
    /// The sweep it ran in, from 0 (set by the orchestrator; not in the
    /// file).
    pub(super) sweep: usize,
}

impl ResultsFile for RunResult {
    /// The file's JSON text for `config`.
    fn to_json(&self, config: &str) -> Value {
        let mut doc =
            results_file::run_json(config, &self.backend, "sizes", sizes_json(&self.sizes));
        if !self.reference.is_empty() {
            doc["reference"] = sizes_json(&self.reference);
        }
        doc
    }

    /// Parses the file's JSON, checking it names `config`.
    fn from_json(config: &str, value: &Value) -> Result<RunResult, String> {
        let backend = results_file::run_backend(config, value)?;
        let entries = value["sizes"].as_array().ok_or("it has no sizes")?;
        let sizes = sizes_from_json(entries)?;
        let reference = match &value["reference"] {
            Value::Null => Vec::new(),
            other => sizes_from_json(other.as_array().ok_or("its reference is not a list")?)?,
        };
        Ok(RunResult {
            backend,
            sizes,
            reference,
            disturbed: false,
            sweep: 0,
        })
    }
}

/// The JSON list of `sizes`.
fn sizes_json(sizes: &[SizeSamples]) -> Value {
    sizes
        .iter()
        .map(|s| {
            json!({
                "size": s.plan.size,
                "rtt_warmup": s.plan.rtt_warmup,
                "rtt_iters": s.plan.rtt_iters,
                "window": s.plan.window,
                "windows": s.plan.windows,
                "rtt_us": s.rtt_us,
                "bw_bytes_per_s": s.bw_bytes_per_s,
            })
        })
        .collect()
}

/// Parses a list written by [`sizes_json`].
fn sizes_from_json(entries: &[Value]) -> Result<Vec<SizeSamples>, String> {
    let mut sizes = Vec::with_capacity(entries.len());
    for entry in entries {
        let count = |field: &str| results_file::count(entry, field);
        let figures = |field: &str| results_file::figures(entry, field);
        sizes.push(SizeSamples {
            plan: Plan {
                size: count("size")?,
                rtt_warmup: count("rtt_warmup")?,
                rtt_iters: count("rtt_iters")?,
                window: count("window")?,
                windows: count("windows")?,
            },
            rtt_us: figures("rtt_us")?,
            bw_bytes_per_s: figures("bw_bytes_per_s")?,
        });
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_through_json() {
        let run = RunResult {
            backend: "tcp".into(),
            sizes: vec![SizeSamples {
                plan: Plan::for_size(64),
                rtt_us: vec![9.5, 10.25],
                bw_bytes_per_s: vec![1e8, 2e8],
            }],
            reference: Vec::new(),
            disturbed: false,
            sweep: 0,
        };
        let value = run.to_json("tcp");
        assert_eq!(
            value.get("reference"),
            None,
            "only mpi-vs-raw runs have one"
        );
        assert_eq!(RunResult::from_json("tcp", &value), Ok(run.clone()));
        assert!(RunResult::from_json("mpi", &value).is_err());

        let both = RunResult {
            backend: "mpi".into(),
            reference: vec![SizeSamples {
                plan: Plan::for_size(4096),
                rtt_us: vec![3.5],
                bw_bytes_per_s: vec![3e9],
            }],
            ..run
        };
        let value = both.to_json("mpi-vs-raw");
        assert_eq!(RunResult::from_json("mpi-vs-raw", &value), Ok(both));
    }
}
