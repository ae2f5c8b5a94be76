//! `--params-from`: LogGOPS parameters fitted to a `mttl-bench comm --json`
//! result.
//!
//! The document has, per configuration (`results.tcp`, `results.mpi`, …),
//! rows of `size` (bytes), `rtt_us` (round trip of a blocking ping-pong) and
//! `bw_bytes_per_s` (a window of non-blocking sends). Under LogGOPS with
//! O = 0 (the steps are also in `docs/simulator.md`):
//! 1. Streaming, a message of s bytes leaves every `max(g, o) + (s-1)·G`:
//!    `s / bw(s)` is a straight line in `s - 1`. G is its slope, fitted by
//!    least squares over the rows (with one row, the line through the
//!    origin: G = 1/bw), and `g = o =` its intercept (the sender's CPU and
//!    NIC are taken to pace small messages alike, the only split the data
//!    allows).
//! 2. One way of the ping-pong costs `o + L + o + (s-1)·G` (send overhead,
//!    latency, the receiver's overhead and per-byte cost): at the smallest
//!    size, `L = rtt/2 - 2o - (s-1)·G`. When that comes out below zero (the
//!    stream's intercept overstates o), o is lowered to share the one-way
//!    time: `o = g = (rtt/2 - (s-1)·G) / 3`, `L = o`.
//! 3. S is left as given (the data says nothing of the protocol switch).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::params::{ns_to_ps, Params};

/// Why a result file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// The file could not be read.
    #[error("cannot read {file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not JSON, or not the shape of a `mttl-bench comm --json` result.
    #[error("{file}: {message}")]
    Format {
        /// The file.
        file: PathBuf,
        /// What is wrong and where, as a sentence.
        message: String,
    },
}

/// One measured row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// Message size, bytes.
    pub size: f64,
    /// Round trip, µs (if measured).
    pub rtt_us: Option<f64>,
    /// Streaming bandwidth, bytes per second (if measured).
    pub bw: Option<f64>,
}

/// The fitted parameters and what they were fitted from.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The parameters (S from `base`).
    pub params: Params,
    /// The configuration used.
    pub config: String,
}

/// Reads `file` and fits the rows of `config` (which may be omitted when
/// the file holds one configuration); `base` gives S.
pub fn from_file(file: &Path, config: Option<&str>, base: Params) -> Result<Fit, FitError> {
    let text = std::fs::read(file).map_err(|source| FitError::Io {
        file: file.to_path_buf(),
        source,
    })?;
    let bad = |message: String| FitError::Format {
        file: file.to_path_buf(),
        message,
    };
    let doc: Value = serde_json::from_slice(&text).map_err(|e| {
        bad(format!(
            "line {}, column {}: not JSON ({e})",
            e.line(),
            e.column()
        ))
    })?;
    let results = doc
        .get("results")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            bad("no `results` object: expected a `mttl-bench comm --json` result".into())
        })?;
    let names: Vec<&str> = results.keys().map(String::as_str).collect();
    let name = match config {
        Some(c) if results.contains_key(c) => c.to_string(),
        Some(c) => {
            return Err(bad(format!(
                "no configuration `{c}` in `results` (it has: {})",
                names.join(", ")
            )))
        }
        None if names.len() == 1 => names[0].to_string(),
        None => {
            return Err(bad(format!(
                "`results` has {} configurations ({}): choose one with --params-config",
                names.len(),
                names.join(", ")
            )))
        }
    };
    let rows = results[&name]
        .as_array()
        .ok_or_else(|| bad(format!("`results.{name}` is not a list of rows")))?;
    let mut parsed = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let num = |key: &str| row.get(key).and_then(Value::as_f64);
        let size = num("size")
            .filter(|&s| s >= 1.0)
            .ok_or_else(|| bad(format!("`results.{name}[{i}]` has no `size` of at least 1")))?;
        parsed.push(Row {
            size,
            rtt_us: num("rtt_us").filter(|v| *v > 0.0),
            bw: num("bw_bytes_per_s").filter(|v| *v > 0.0),
        });
    }
    let params = fit(&parsed, base).map_err(|m| bad(format!("`results.{name}`: {m}")))?;
    Ok(Fit {
        params,
        config: name,
    })
}

/// Steps 1 and 2 on measured rows.
pub fn fit(rows: &[Row], base: Params) -> Result<Params, String> {
    // Step 1: seconds per message against bytes - 1.
    let stream: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| r.bw.map(|bw| (r.size - 1.0, r.size / bw * 1e9)))
        .collect();
    let (intercept, slope) = match stream.len() {
        0 => return Err("no row has a bandwidth (`bw_bytes_per_s`)".into()),
        1 => (0.0, stream[0].1 / (stream[0].0 + 1.0)),
        n => {
            let n = n as f64;
            let mx = stream.iter().map(|p| p.0).sum::<f64>() / n;
            let my = stream.iter().map(|p| p.1).sum::<f64>() / n;
            let sxx: f64 = stream.iter().map(|p| (p.0 - mx).powi(2)).sum();
            let sxy: f64 = stream.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            if sxx == 0.0 {
                return Err("the bandwidth rows all have the same size".into());
            }
            let slope = (sxy / sxx).max(0.0);
            (my - slope * mx, slope)
        }
    };
    let mut o = intercept.max(0.0);
    // Step 2: the smallest size with a round trip.
    let (size, rtt_us) = rows
        .iter()
        .filter_map(|r| r.rtt_us.map(|t| (r.size, t)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or("no row has a round trip (`rtt_us`)")?;
    let one_way = (rtt_us * 1e3 / 2.0 - (size - 1.0) * slope).max(0.0);
    let mut l = one_way - 2.0 * o;
    if l < 0.0 {
        o = one_way / 3.0;
        l = o;
    }
    let whole = |v: f64| v.round() as u64;
    Ok(Params {
        l: whole(l),
        o: whole(o),
        g: whole(o),
        big_g_ps: ns_to_ps(slope).ok_or("the fitted G is not a usable number")?,
        big_o_ps: 0,
        s: base.s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows made from known parameters come back as those parameters.
    #[test]
    fn recovers_the_parameters_rows_were_made_from() {
        let (l, o, g_per_byte) = (3000.0, 800.0, 0.25);
        let rows: Vec<Row> = [8.0, 1024.0, 65536.0]
            .iter()
            .map(|&s: &f64| Row {
                size: s,
                rtt_us: Some(2.0 * (2.0 * o + l + (s - 1.0) * g_per_byte) / 1e3),
                bw: Some(s / ((o + (s - 1.0) * g_per_byte) / 1e9)),
            })
            .collect();
        let p = fit(&rows, Params::default()).unwrap();
        assert_eq!((p.l, p.o, p.g, p.big_g_ps), (3000, 800, 800, 250));
        assert_eq!(p.s, Params::default().s);
    }

    #[test]
    fn a_latency_below_zero_shares_the_one_way_time() {
        // Streaming says 5 µs per small message, the round trip 6 µs.
        let rows = [
            Row {
                size: 1.0,
                rtt_us: Some(6.0),
                bw: Some(1.0 / 5e-6),
            },
            Row {
                size: 1001.0,
                rtt_us: None,
                bw: Some(1001.0 / 6e-6),
            },
        ];
        let p = fit(&rows, Params::default()).unwrap();
        assert_eq!((p.l, p.o, p.g, p.big_g_ps), (1000, 1000, 1000, 1000));
    }

    #[test]
    fn reads_a_result_file_and_names_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("mttl-sim-fit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("comm.json");
        std::fs::write(
            &file,
            r#"{"results": {"tcp": [
                {"size": 8, "rtt_us": 10.0, "bw_bytes_per_s": 4000000.0},
                {"size": 65536, "rtt_us": 100.0, "bw_bytes_per_s": 1000000000.0}]}}"#,
        )
        .unwrap();
        let f = from_file(&file, None, Params::default()).unwrap();
        assert_eq!(f.config, "tcp");
        assert!(f.params.big_g_ps > 900 && f.params.big_g_ps < 1000, "{f:?}");
        let e = from_file(&file, Some("mpi"), Params::default()).unwrap_err();
        assert!(e.to_string().contains("no configuration `mpi`"), "{e}");
        std::fs::write(&file, "{\"results\": 3").unwrap();
        let e = from_file(&file, None, Params::default()).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        std::fs::write(&file, r#"{"results": {"a": [], "b": []}}"#).unwrap();
        let e = from_file(&file, None, Params::default()).unwrap_err();
        assert!(e.to_string().contains("--params-config"), "{e}");
        std::fs::write(&file, r#"{"results": {"a": [{"size": 8}]}}"#).unwrap();
        let e = from_file(&file, None, Params::default()).unwrap_err();
        assert!(e.to_string().contains("no row has a bandwidth"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
