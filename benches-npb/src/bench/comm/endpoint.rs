//! One side of a two-rank benchmark: the few operations the measurement
//! loops need, implemented on mttl's [`Comm`] (any backend) and on raw rsmpi
//! (cargo feature `mpi`), so both run the very same loops.
//!
//! Each implementation uses its API the way a program would: rsmpi receives
//! into one reused buffer and `Isend`s from buffers it reuses; mttl's
//! `nsend` takes owned buffers, and mttl receives a message of up to
//! [`PLACE_MAX`] bytes into one reused buffer too (`recv_from_into`), and
//! a larger one, which does not fit there, as the `Vec` the backend hands
//! over, which both backends fill straight from the transport.
//! Receiving small messages into fresh `Vec`s instead would cost an
//! allocation and a free per message that rsmpi does not pay; copying large
//! ones out of the `Vec` would cost a copy.
//!
//! The mttl side drops each handed-over message before receiving the next,
//! as a program handling one message at a time does, so `malloc` hands the
//! same memory back for the next one. Keeping the last message until the
//! next has arrived would make two buffers alternate where rsmpi reuses
//! one, doubling the receiving side's working set for large messages.
//!
//! Both stream freshly written data: before each bandwidth window (outside
//! the timer) mttl fills a new buffer per message and rsmpi rewrites one
//! reused buffer per message. Resending one unchanged buffer instead would
//! let the receiving core keep the payload in its cache from one message to
//! the next (Open MPI's shared-memory transport copies straight out of the
//! sender's buffer), a gain no API that hands over owned buffers can have.

use std::path::Path;

use mttl::bincode::Encode;
use mttl_comm::{AnyComm, Comm, CommTuning, Rank, Received, SendHandle, Tag};

use crate::bench::error::BenchError;
use crate::bench::sweep::jobs;

/// The tag of every benchmark message.
const TAG: Tag = 7;

/// The largest message the mttl endpoint receives into its own buffer; see
/// the module documentation. The MPI backend copies messages up to this
/// size out of the buffer MPI received them into anyway, and hands larger
/// ones over.
pub(super) const PLACE_MAX: usize = 4 << 10;

/// One of the two ranks of a benchmark job.
pub(in crate::bench) trait Endpoint {
    /// This process's rank, 0 or 1.
    fn rank(&self) -> usize;

    /// The other rank.
    fn peer(&self) -> usize {
        1 - self.rank()
    }

    /// Sends `data` to the peer and returns when `data` may be reused.
    fn send(&mut self, data: &[u8]) -> Result<(), BenchError>;

    /// Receives the peer's next message, keeps it, and returns its length.
    fn recv(&mut self) -> Result<usize, BenchError>;

    /// The message last received.
    fn last(&self) -> &[u8];

    /// Sends the message last received back to the peer.
    fn reply(&mut self) -> Result<(), BenchError>;

    /// Readies `count` copies of `data` for [`send_window`](Self::send_window)
    /// (outside the timed region: mttl's `nsend` consumes owned buffers).
    fn prepare_window(&mut self, data: &[u8], count: usize);

    /// Starts `count` non-blocking sends of `data` (of the buffers readied by
    /// [`prepare_window`](Self::prepare_window)) and waits until all complete.
    fn send_window(&mut self, data: &[u8], count: usize) -> Result<(), BenchError>;
}

/// An endpoint on mttl's communication layer.
#[derive(Debug)]
pub(in crate::bench) struct MttlEndpoint {
    comm: AnyComm,
    /// The last message: in `buffer`, or handed over.
    last: Last,
    /// Where messages of up to [`PLACE_MAX`] bytes are received.
    buffer: Vec<u8>,
    window: Vec<Vec<u8>>,
    handles: Vec<SendHandle>,
}

/// Where the last message received is.
#[derive(Debug)]
enum Last {
    /// The first this many bytes of the endpoint's buffer.
    Placed(usize),
    /// Handed over by the backend.
    Owned(Vec<u8>),
}

impl MttlEndpoint {
    /// Wraps a joined communicator of a two-rank job.
    pub(in crate::bench) fn new(comm: AnyComm) -> MttlEndpoint {
        MttlEndpoint {
            comm,
            last: Last::Placed(0),
            buffer: vec![0; PLACE_MAX],
            window: Vec::new(),
            handles: Vec::new(),
        }
    }
}

impl Endpoint for MttlEndpoint {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn send(&mut self, data: &[u8]) -> Result<(), BenchError> {
        let peer: Rank = self.peer();
        Ok(self.comm.send(peer, TAG, data)?)
    }

    fn recv(&mut self) -> Result<usize, BenchError> {
        let peer = self.peer();
        // Done with the last message: drop it first (see the module doc).
        self.last = Last::Placed(0);
        // The buffer holds PLACE_MAX bytes: what fits, lands there.
        match self
            .comm
            .recv_from_into(peer, None, &mut self.buffer, &|_| true)?
        {
            Some(Received::Placed(envelope)) => {
                self.last = Last::Placed(envelope.len);
                Ok(envelope.len)
            }
            Some(Received::Owned(message)) => {
                let len = message.data.len();
                self.last = Last::Owned(message.data);
                Ok(len)
            }
            None => Err(BenchError::Protocol {
                rank: self.rank(),
                detail: "a receive without a timeout returned no message".into(),
            }),
        }
    }

    fn last(&self) -> &[u8] {
        match &self.last {
            Last::Placed(len) => &self.buffer[..*len],
            Last::Owned(data) => data,
        }
    }

    fn reply(&mut self) -> Result<(), BenchError> {
        let peer = self.peer();
        let data = match &self.last {
            Last::Placed(len) => &self.buffer[..*len],
            Last::Owned(data) => data,
        };
        Ok(self.comm.send(peer, TAG, data)?)
    }

    fn prepare_window(&mut self, data: &[u8], count: usize) {
        self.window.clear();
        self.window.extend((0..count).map(|_| data.to_vec()));
    }

    fn send_window(&mut self, _data: &[u8], count: usize) -> Result<(), BenchError> {
        let peer = self.peer();
        if self.window.len() != count {
            return Err(BenchError::Protocol {
                rank: self.rank(),
                detail: format!(
                    "a window of {count} sends was started with {} buffers ready",
                    self.window.len()
                ),
            });
        }
        self.handles.clear();
        for buffer in self.window.drain(..) {
            self.handles.push(self.comm.nsend(peer, TAG, buffer)?);
        }
        // Sends to one peer complete in order: wait for each in turn.
        for &handle in &self.handles {
            while !self.comm.send_done(handle)? {}
        }
        Ok(())
    }
}

/// A worker of a two-rank job of mttl's comm layer on `backend`: runs
/// `measure` on both ranks' endpoints, and on rank 0 writes what it returns
/// to `out`.
pub(in crate::bench) fn mttl_comm_worker<R: Encode>(
    config: &'static str,
    backend: &str,
    out: &Path,
    measure: impl FnOnce(&mut MttlEndpoint) -> Result<R, BenchError>,
) -> Result<(), BenchError> {
    let mut ep = MttlEndpoint::new(jobs::join_comm(config, backend)?);
    let results = measure(&mut ep)?;
    if ep.rank() == 0 {
        jobs::write_results(config, backend, &results, out)?;
    }
    Ok(ep.comm.finish()?)
}

#[cfg(feature = "mpi")]
pub(in crate::bench) use raw::RawMpiEndpoint;

#[cfg(feature = "mpi")]
mod raw {
    //! The baseline: plain rsmpi on `MPI_COMM_WORLD`, no mttl.

    use mpi::datatype::Equivalence;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Communicator, SimpleCommunicator};

    use super::{BenchError, Endpoint};

    /// An endpoint on raw rsmpi `Send` / `Recv` / `Isend`.
    pub(in crate::bench) struct RawMpiEndpoint {
        world: SimpleCommunicator,
        buffer: Vec<u8>,
        len: usize,
        /// One send buffer per message of a bandwidth window, rewritten
        /// before each window.
        window: Vec<Vec<u8>>,
    }

    impl std::fmt::Debug for RawMpiEndpoint {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("RawMpiEndpoint")
                .field("rank", &self.world.rank())
                .field("buffer_len", &self.buffer.len())
                .field("len", &self.len)
                .field("window", &self.window.len())
                .finish()
        }
    }

    impl RawMpiEndpoint {
        /// An endpoint on `world` able to receive messages of `max_len` bytes.
        pub(in crate::bench) fn new(world: SimpleCommunicator, max_len: usize) -> RawMpiEndpoint {
            RawMpiEndpoint {
                world,
                buffer: vec![0; max_len],
                len: 0,
                window: Vec::new(),
            }
        }
    }

    impl Endpoint for RawMpiEndpoint {
        fn rank(&self) -> usize {
            // A rank is never negative.
            self.world.rank().unsigned_abs() as usize
        }

        fn send(&mut self, data: &[u8]) -> Result<(), BenchError> {
            self.world.process_at_rank(self.peer_mpi()).send(data);
            Ok(())
        }

        fn recv(&mut self) -> Result<usize, BenchError> {
            let peer = self.peer_mpi();
            let status = self
                .world
                .process_at_rank(peer)
                .receive_into(&mut self.buffer[..]);
            let count = status.count(u8::equivalent_datatype());
            self.len = usize::try_from(count).map_err(|_| BenchError::Protocol {
                rank: self.rank(),
                detail: format!("MPI reported a message of {count} elements"),
            })?;
            Ok(self.len)
        }

        fn last(&self) -> &[u8] {
            &self.buffer[..self.len]
        }

        fn reply(&mut self) -> Result<(), BenchError> {
            let peer = self.peer_mpi();
            self.world
                .process_at_rank(peer)
                .send(&self.buffer[..self.len]);
            Ok(())
        }

        fn prepare_window(&mut self, data: &[u8], count: usize) {
            self.window.resize_with(count, Vec::new);
            for buffer in &mut self.window {
                buffer.clear();
                buffer.extend_from_slice(data);
            }
        }

        fn send_window(&mut self, _data: &[u8], count: usize) -> Result<(), BenchError> {
            if self.window.len() != count {
                return Err(BenchError::Protocol {
                    rank: self.rank(),
                    detail: format!(
                        "a window of {count} sends was started with {} buffers ready",
                        self.window.len()
                    ),
                });
            }
            let peer = self.world.process_at_rank(self.peer_mpi());
            let window = &self.window;
            mpi::request::multiple_scope(count, |scope, requests| {
                for buffer in window {
                    requests.add(peer.immediate_send(scope, &buffer[..]));
                }
                let mut done = Vec::with_capacity(count);
                requests.wait_all(&mut done);
            });
            Ok(())
        }
    }

    impl RawMpiEndpoint {
        fn peer_mpi(&self) -> mpi::Rank {
            1 - self.world.rank()
        }
    }
}
