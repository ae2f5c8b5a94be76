//! The tracing settings, from the environment: `MTTL_TRACE=DIR` turns
//! tracing on, `MTTL_TRACE_BUFFER` bounds each rank's buffer and
//! `MTTL_TRACE_FLUSH` picks when buffers are written; under the
//! synchronized policies `MTTL_TRACE_THRESHOLD` is the fill past which the
//! ranks write and `MTTL_TRACE_RESYNC` whether clocks are re-measured at
//! every suspension; `MTTL_TRACE_LEVEL` is `calls` (the default) or
//! `threads` (also thread spawn, run, block and exit). A bad value stops the
//! job at start with the variable and the value named.

use std::path::PathBuf;

use super::policy::Policy;

/// The variable naming the trace directory.
pub const TRACE_VAR: &str = "MTTL_TRACE";
/// The variable giving the per-rank buffer's bytes.
pub const BUFFER_VAR: &str = "MTTL_TRACE_BUFFER";
/// The variable naming the flush policy.
pub const FLUSH_VAR: &str = "MTTL_TRACE_FLUSH";

/// The variable giving the fill (bytes, or a percentage of the buffer)
/// past which the synchronized policies write at the next collective.
pub const THRESHOLD_VAR: &str = "MTTL_TRACE_THRESHOLD";
/// The variable saying when clock offsets are measured: `each` suspension
/// (default) or only at the first (`start`).
pub const RESYNC_VAR: &str = "MTTL_TRACE_RESYNC";
/// The variable saying what is recorded: `calls` (default: comm
/// primitives, calls, memory, waits, collectives, regions, the trace's own
/// work) or `threads` (also every thread spawn, switch, block and exit).
pub const LEVEL_VAR: &str = "MTTL_TRACE_LEVEL";

/// The buffer's bytes when `MTTL_TRACE_BUFFER` is unset.
pub const DEFAULT_BUFFER: usize = 64 << 20;
/// The smallest buffer: room for a few blocks of the largest records.
pub const MIN_BUFFER: usize = 4096;

/// What the environment asks of tracing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) dir: PathBuf,
    pub(crate) buffer: usize,
    pub(crate) policy: Policy,
    /// Bytes of fill past which a synchronized policy writes.
    pub(crate) threshold: usize,
    /// Whether offsets are re-measured at every suspension.
    pub(crate) resync_each: bool,
    /// Whether thread events are recorded (`MTTL_TRACE_LEVEL=threads`).
    pub(crate) threads: bool,
}

impl Config {
    /// The settings, `None` when tracing is off.
    pub(crate) fn from_env() -> Result<Option<Config>, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(dir) = var(TRACE_VAR) else {
            return Ok(None);
        };
        let buffer = match var(BUFFER_VAR) {
            Some(v) => parse_bytes(&v).map_err(|e| format!("{BUFFER_VAR}={v}: {e}"))?,
            None => DEFAULT_BUFFER,
        };
        if buffer < MIN_BUFFER {
            return Err(format!(
                "{BUFFER_VAR}={buffer}: the buffer must hold at least {MIN_BUFFER} bytes"
            ));
        }
        let policy = match var(FLUSH_VAR) {
            Some(v) => Policy::parse(&v).map_err(|e| format!("{FLUSH_VAR}={v}: {e}"))?,
            None => Policy::DEFAULT,
        };
        let threshold = match var(THRESHOLD_VAR) {
            Some(v) => {
                parse_threshold(&v, buffer).map_err(|e| format!("{THRESHOLD_VAR}={v}: {e}"))?
            }
            None => buffer / 4 * 3,
        };
        let resync_each = match var(RESYNC_VAR).as_deref() {
            None | Some("each") => true,
            Some("start") => false,
            Some(v) => return Err(format!("{RESYNC_VAR}={v}: expected each or start")),
        };
        let threads = match var(LEVEL_VAR).as_deref() {
            None | Some("calls") => false,
            Some("threads") => true,
            Some(v) => return Err(format!("{LEVEL_VAR}={v}: expected calls or threads")),
        };
        Ok(Some(Config {
            dir: PathBuf::from(dir),
            buffer,
            policy,
            threshold,
            resync_each,
            threads,
        }))
    }
}

/// Reads a byte count: digits with an optional `K`, `M` or `G` suffix
/// (powers of 1024; `KiB`, `MB` and the like too, all binary).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| "expected a byte count such as 65536, 512K, 64M or 1G".to_owned())?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        other => return Err(format!("unknown unit {other:?}: use K, M or G")),
    };
    n.checked_mul(1 << shift)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| "too large for this machine".to_owned())
}

/// Reads a threshold: a byte count or a percentage of `buffer` (`75%`),
/// above zero and below the buffer.
pub(crate) fn parse_threshold(s: &str, buffer: usize) -> Result<usize, String> {
    let bytes = match s.trim().strip_suffix('%') {
        Some(p) => {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| "expected a byte count (512K) or a percentage (75%)".to_owned())?;
            (buffer as f64 * p / 100.0) as usize
        }
        None => parse_bytes(s)?,
    };
    if bytes == 0 || bytes >= buffer {
        return Err(format!(
            "the threshold must be above 0 and below the buffer ({buffer} bytes)"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(parse_bytes("64m"), Ok(64 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("12X").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("99999999999999999999G").is_err());
    }

    #[test]
    fn thresholds_are_bytes_or_percentages_inside_the_buffer() {
        assert_eq!(parse_threshold("75%", 4096), Ok(3072));
        assert_eq!(parse_threshold("1K", 4096), Ok(1024));
        assert!(parse_threshold("4K", 4096).unwrap_err().contains("below"));
        assert!(parse_threshold("0%", 4096).is_err());
        assert!(parse_threshold("x%", 4096)
            .unwrap_err()
            .contains("percentage"));
    }
}
