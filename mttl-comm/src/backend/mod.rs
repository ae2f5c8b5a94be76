//! The backends, and [`AnyComm`]: the one chosen at start-up.
//!
//! Each backend lives in its own folder and implements [`Comm`] and
//! [`CommTuning`] (the latter optional: `local` takes its provided
//! versions); the portable code never reaches into one. All pass the same
//! conformance suite (`mttl-comm/tests/conformance.rs`).

use std::time::Duration;

use crate::comm::{Comm, Envelope, Message, Rank, Received, SendHandle, Tag};
use crate::env::Launch;
use crate::error::CommError;
#[cfg(not(feature = "mpi"))]
use crate::error::{ErrorKind, Op};
use crate::tuning::CommTuning;

pub mod local;
pub(crate) mod malloc;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod tcp;

/// The backend this process runs on, chosen from its launch environment
/// ([`Launch::from_env`]): TCP under `mttlrun` or when started bare, MPI under
/// `mpirun`/`srun` or `mttlrun --backend mpi`; `local` for ranks that are
/// threads of one process (`MTTL_BACKEND=local`, endpoints made by
/// [`local::LocalComm::job`]).
// A rank holds one, made once and never moved on a hot path: boxing the
// TCP variant would only add an indirection to every primitive. (Without
// the `mpi` feature the MPI variant is empty, which makes TCP's the large
// one by the lint's measure.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum AnyComm {
    /// The TCP backend (also the single-process case).
    Tcp(tcp::TcpComm),
    /// The MPI backend.
    #[cfg(feature = "mpi")]
    Mpi(mpi::MpiComm),
    /// The local backend: every rank a thread of this process.
    Local(local::LocalComm),
}

macro_rules! dispatch {
    ($self:expr, $c:ident => $body:expr) => {
        match $self {
            AnyComm::Tcp($c) => $body,
            #[cfg(feature = "mpi")]
            AnyComm::Mpi($c) => $body,
            AnyComm::Local($c) => $body,
        }
    };
}

impl Comm for AnyComm {
    fn init() -> Result<Self, CommError> {
        match Launch::from_env()? {
            Launch::Single => Ok(AnyComm::Tcp(tcp::TcpComm::single()?)),
            Launch::Tcp(launch) => Ok(AnyComm::Tcp(tcp::TcpComm::connect(&launch)?)),
            Launch::Local => Ok(AnyComm::Local(local::LocalComm::init()?)),
            #[cfg(feature = "mpi")]
            Launch::Mpi => Ok(AnyComm::Mpi(mpi::MpiComm::init()?)),
            #[cfg(not(feature = "mpi"))]
            Launch::Mpi => {
                let why = match crate::env::mpi_launcher_var() {
                    Some((name, value)) => format!("started by an MPI launcher ({name}={value})"),
                    None => format!("{}=mpi", crate::env::BACKEND),
                };
                Err(CommError::new(
                    None,
                    Op::Init,
                    ErrorKind::Environment(format!(
                        "{why}, but this program was built without the `mpi` feature; \
                         rebuild with `--features mpi` or launch with mttlrun (TCP)"
                    )),
                ))
            }
        }
    }

    fn rank(&self) -> Rank {
        dispatch!(self, c => c.rank())
    }

    fn size(&self) -> usize {
        dispatch!(self, c => c.size())
    }

    fn backend_name(&self) -> &'static str {
        dispatch!(self, c => c.backend_name())
    }

    fn max_message_len(&self) -> usize {
        dispatch!(self, c => c.max_message_len())
    }

    fn finish(self) -> Result<(), CommError> {
        dispatch!(self, c => c.finish())
    }

    #[inline]
    fn probe(&mut self) -> Result<Option<Envelope>, CommError> {
        dispatch!(self, c => c.probe())
    }

    #[inline]
    fn send(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        dispatch!(self, c => c.send(dest, tag, data))
    }

    #[inline]
    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        dispatch!(self, c => c.nsend(dest, tag, data))
    }

    #[inline]
    fn send_done(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        dispatch!(self, c => c.send_done(handle))
    }

    #[inline]
    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        dispatch!(self, c => c.recv_from(source, timeout))
    }

    #[inline]
    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError> {
        dispatch!(self, c => c.recv_any(timeout))
    }
}

impl CommTuning for AnyComm {
    #[inline]
    fn batch_len(&self) -> usize {
        dispatch!(self, c => c.batch_len())
    }

    #[inline]
    fn combine_len(&self) -> usize {
        dispatch!(self, c => c.combine_len())
    }

    #[inline]
    fn holds_received(&mut self) -> bool {
        dispatch!(self, c => c.holds_received())
    }

    #[inline]
    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        dispatch!(self, c => c.send_bulk(dest, tag, data))
    }

    #[inline]
    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        dispatch!(self, c => c.nsend_bulk(dest, tag, data))
    }

    #[inline]
    unsafe fn nsend_borrowed(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        // SAFETY: the caller's contract, passed on.
        dispatch!(self, c => unsafe { c.nsend_borrowed(dest, tag, data) })
    }

    #[inline]
    fn send_headed_bulk(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<(), CommError> {
        dispatch!(self, c => c.send_headed_bulk(dest, head, tag, data))
    }

    #[inline]
    unsafe fn nsend_headed_borrowed(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        // SAFETY: the caller's contract, passed on.
        dispatch!(self, c => unsafe { c.nsend_headed_borrowed(dest, head, tag, data) })
    }

    #[inline]
    fn send_finished(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        dispatch!(self, c => c.send_finished(handle))
    }

    #[inline]
    fn recv_from_into(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Received>, CommError> {
        dispatch!(self, c => c.recv_from_into(source, timeout, buf, accept))
    }
}
