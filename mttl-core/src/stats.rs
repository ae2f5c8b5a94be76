//! Communication statistics: the paper's per-node breakdown (tables 5-8).
//!
//! Every call the runtime makes into the comm layer is counted here. With
//! `MTTL_STATS=1` each rank prints its line at exit:
//!
//! ```text
//! mttl stats rank 1: send 120 nsend 40 recv 160 probe 0 test 52 | msgs 160 avg 4.10 KB total 0.66 MB
//! ```

use std::fmt;

/// Counts of each primitive and bytes sent by one rank.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Blocking sends (`send`, `_pmttl_asend`).
    pub send: u64,
    /// Non-blocking sends (`nsend`).
    pub nsend: u64,
    /// Receives (`recv_any` and `recv_from` that returned a message).
    pub recv: u64,
    /// Probes.
    pub probe: u64,
    /// Completion tests of non-blocking sends (`send_done`).
    pub test: u64,
    /// Bytes sent (payloads, including the runtime's headers).
    pub bytes_sent: u64,
}

impl Stats {
    pub(crate) fn sent(&mut self, blocking: bool, len: usize) {
        if blocking {
            self.send += 1;
        } else {
            self.nsend += 1;
        }
        self.bytes_sent += len as u64;
    }

    /// Messages sent.
    pub fn messages(&self) -> u64 {
        self.send + self.nsend
    }

    /// Average message size in bytes.
    pub fn average_size(&self) -> f64 {
        if self.messages() == 0 {
            0.0
        } else {
            self.bytes_sent as f64 / self.messages() as f64
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "send {} nsend {} recv {} probe {} test {} | msgs {} avg {:.2} KB total {:.2} MB",
            self.send,
            self.nsend,
            self.recv,
            self.probe,
            self.test,
            self.messages(),
            self.average_size() / 1024.0,
            self.bytes_sent as f64 / (1024.0 * 1024.0)
        )
    }
}

/// Whether `MTTL_STATS` asks for the report.
pub(crate) fn enabled() -> bool {
    std::env::var("MTTL_STATS").is_ok_and(|v| !v.is_empty() && v != "0")
}
