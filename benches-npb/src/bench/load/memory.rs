//! How much memory a rank holds, from `/proc/self/status`: the resident set
//! now (`VmRSS`) and its peak over the process's life (`VmHWM`), in KiB.
//! On a system without `/proc` both read as 0.

/// A rank's resident memory, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    /// The peak resident set size so far (`VmHWM`).
    pub(crate) peak_kib: u64,
    /// The resident set size now (`VmRSS`).
    pub(crate) rss_kib: u64,
}

impl Memory {
    /// This process's memory now.
    pub(crate) fn now() -> Memory {
        std::fs::read_to_string("/proc/self/status")
            .map(|text| Memory::parse(&text))
            .unwrap_or_default()
    }

    /// Parses the text of `/proc/PID/status`.
    fn parse(status: &str) -> Memory {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Memory {
            peak_kib: field("VmHWM:"),
            rss_kib: field("VmRSS:"),
        }
    }
}

/// `kib` in MiB, for tables.
pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_peak_and_current_resident_set() {
        let status = "Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(
            Memory::parse(status),
            Memory {
                peak_kib: 2048,
                rss_kib: 1024
            }
        );
        let here = Memory::now();
        assert!(here.peak_kib >= here.rss_kib && here.rss_kib > 0);
    }
}
