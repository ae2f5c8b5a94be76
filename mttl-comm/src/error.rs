//! Typed communication errors.
//!
//! Every error names the rank that saw it and the primitive that failed, and
//! reads as a sentence: `rank 1: send to rank 3: rank 3 is gone (connection
//! reset by peer)`.

use std::fmt;
use std::io;

use crate::comm::Rank;

/// The primitive (or launcher step) during which an error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `init` (`_pmttl_cominit`), including the TCP bootstrap.
    Init,
    /// `finish` (`_pmttl_comfinish`).
    Finish,
    /// `probe` (`_pmttl_prob`).
    Probe,
    /// `send` (`_pmttl_asend`) to the given rank.
    Send(Rank),
    /// `nsend` (`_pmttl_nsend`) to the given rank.
    Nsend(Rank),
    /// `send_done` (`_pmttl_senddone`) on a send to the given rank.
    SendDone(Rank),
    /// `recv_from` (`_pmttl_brecnode`) from the given rank.
    RecvFrom(Rank),
    /// `recv_any` (`_pmttl_brecany`).
    RecvAny,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Init => write!(f, "init"),
            Op::Finish => write!(f, "finish"),
            Op::Probe => write!(f, "probe"),
            Op::Send(r) => write!(f, "send to rank {r}"),
            Op::Nsend(r) => write!(f, "nsend to rank {r}"),
            Op::SendDone(r) => write!(f, "send_done on a send to rank {r}"),
            Op::RecvFrom(r) => write!(f, "recv_from rank {r}"),
            Op::RecvAny => write!(f, "recv_any"),
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// A peer's connection ended: it exited, crashed or was killed.
    #[error("rank {peer} is gone ({detail})")]
    PeerLost {
        /// The rank that disappeared.
        peer: Rank,
        /// What the transport reported.
        detail: String,
    },
    /// A rank outside `0..size` was named.
    #[error("rank {peer} does not exist (the job has {size} ranks)")]
    NoSuchRank {
        /// The rank asked for.
        peer: Rank,
        /// The job's size.
        size: usize,
    },
    /// A message longer than the backend carries.
    #[error("a message of {len} bytes exceeds the maximum of {max} bytes (MTTL_MAX_MESSAGE)")]
    MessageTooLarge {
        /// The message's length.
        len: usize,
        /// The backend's maximum.
        max: usize,
    },
    /// A peer sent bytes that are not a valid frame.
    #[error("malformed frame from rank {peer}: {detail}")]
    MalformedFrame {
        /// The sender of the bad frame.
        peer: Rank,
        /// What was wrong with it.
        detail: String,
    },
    /// The launch environment is missing or inconsistent.
    #[error("bad launch environment: {0}")]
    Environment(String),
    /// Joining the job failed (rendezvous, connection set-up, authentication).
    #[error("bootstrap failed: {0}")]
    Bootstrap(String),
    /// An I/O error not attributable to one peer.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The MPI library reported an error.
    #[error("MPI error: {0}")]
    Mpi(String),
}

/// An error from a communication primitive: which rank, which operation, what.
#[derive(Debug)]
pub struct CommError {
    /// The rank that saw the error (`None` before the rank is known).
    pub rank: Option<Rank>,
    /// The primitive that failed.
    pub op: Op,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl CommError {
    /// An error seen by `rank` during `op`.
    pub fn new(rank: Option<Rank>, op: Op, kind: ErrorKind) -> Self {
        CommError { rank, op, kind }
    }

    /// The rank this error says is gone, if it is a lost-peer error.
    pub fn lost_peer(&self) -> Option<Rank> {
        match self.kind {
            ErrorKind::PeerLost { peer, .. } => Some(peer),
            _ => None,
        }
    }
}

impl fmt::Display for CommError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rank {
            Some(r) => write!(f, "rank {r}: {}: {}", self.op, self.kind),
            None => write!(f, "{}: {}", self.op, self.kind),
        }
    }
}

impl std::error::Error for CommError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.kind.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reads_as_a_sentence() {
        let e = CommError::new(
            Some(1),
            Op::Send(3),
            ErrorKind::PeerLost {
                peer: 3,
                detail: "connection reset by peer".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "rank 1: send to rank 3: rank 3 is gone (connection reset by peer)"
        );
        assert_eq!(e.lost_peer(), Some(3));
    }
}
