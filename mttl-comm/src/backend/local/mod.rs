//! The `local` backend: every rank is an OS thread of one process, and a
//! message is a `Vec<u8>` moved from the sender's thread into the
//! receiver's mailbox.
//!
//! Algorithm: each rank owns a mailbox, a mutex-guarded FIFO of whole
//! messages in arrival order with a condition variable
//! ([`mailbox`]). A send appends to the receiver's FIFO under
//! its lock and wakes the receiver if it is parked; `recv_any` takes the
//! oldest message, `recv_from` the oldest from its source; a blocked
//! receive spins (yielding the core) for `MTTL_SPIN_US`, then parks on the
//! condition variable until a message, a peer's departure or its timeout.
//! Mailboxes are unbounded, so a send never waits and `nsend` is complete
//! when it returns.
//!
//! It is written against [`Comm`] alone: `impl CommTuning for LocalComm {}`
//! takes every provided version of the optional extension. That makes it
//! the reference for what a new backend must do, and a quick one for tests
//! and for debugging a whole job in one process (one debugger, one core
//! dump, every rank's stack in one backtrace).
//!
//! # Use
//!
//! - [`LocalComm::job`]`(n)` makes the `n` endpoints of a job; hand one to
//!   each thread.
//! - `MTTL_BACKEND=local MTTL_NP=N ./prog` runs an mttl program's `N` ranks
//!   as `N` threads of this one process (`mttl_core::start` does it: rank 0
//!   on the calling thread, the others on threads of their own, each with
//!   its own runtime) instead of launching `N` processes. Without
//!   `MTTL_NP` the job has one rank. The ranks share the process's
//!   standard streams (`MTTL_TAG_OUTPUT` does not apply), and a rank that
//!   stops the job on a failure ends the whole process with its exit code.
//! - [`Comm::init`] alone cannot join a job of several ranks (the ranks'
//!   endpoints are made together, by `job`): it gives a job of one rank,
//!   and refuses `MTTL_NP` above 1.
//!
//! # The contract, as kept here
//!
//! 1. **Ordering**: a sender appends under the receiver's lock, so its
//!    messages queue in the order of its calls; receives take the oldest.
//! 2. **Whole messages**: a message moves as one vector.
//! 3. **Progress**: a send never waits, so no two ranks can block each
//!    other by sending.
//! 4. **Blocking**: a receive spins, then parks, up to its timeout. An
//!    endpoint that leaves — `finish`ed, or dropped without it (its thread
//!    ended early or panicked: *lost*) — wakes every parked rank. What it
//!    sent before still arrives, in order; after that, `recv_from` it fails
//!    with [`ErrorKind::PeerLost`]; `probe` and `recv_any` with nothing to
//!    take report a lost peer at once, and fail too once every other rank
//!    has left; a send to it fails.
//! 5. **Self-sends** go to the sender's own mailbox.
//! 6. **Errors** name the rank and the operation.
//!
//! Messages still in a rank's mailbox when it finishes are discarded, as
//! on TCP.

mod mailbox;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::mailbox::{Inbox, Job, Standing};
use crate::comm::{Comm, Envelope, Message, Rank, SendHandle, Tag};
use crate::env;
use crate::error::{CommError, ErrorKind, Op};
use crate::tuning::CommTuning;

/// One rank's endpoint in a job whose ranks are threads of this process.
#[derive(Debug)]
pub struct LocalComm {
    job: Arc<Job>,
    rank: Rank,
    size: usize,
    max_len: usize,
    spin: Duration,
    /// The next sequence number of a send to each rank.
    next_seq: Vec<u64>,
    /// Whether `finish` has run (a drop without it loses the endpoint).
    finished: bool,
}

impl LocalComm {
    /// The endpoints of a job of `size` ranks, in rank order: hand each to
    /// the thread that is to be that rank. The largest message comes from
    /// `MTTL_MAX_MESSAGE` and the spin time from `MTTL_SPIN_US`, as for the
    /// other backends.
    pub fn job(size: usize) -> Result<Vec<LocalComm>, CommError> {
        LocalComm::job_with_max_message(size, env::max_message()?)
    }

    /// As [`job`](LocalComm::job), with the largest message given.
    pub fn job_with_max_message(
        size: usize,
        max_message_len: usize,
    ) -> Result<Vec<LocalComm>, CommError> {
        if size == 0 {
            return Err(CommError::new(
                None,
                Op::Init,
                ErrorKind::Environment("a local job needs at least one rank".into()),
            ));
        }
        let spin = env::spin_time()?;
        let job = Arc::new(Job::new(size));
        Ok((0..size)
            .map(|rank| LocalComm {
                job: Arc::clone(&job),
                rank,
                size,
                max_len: max_message_len,
                spin,
                next_seq: vec![0; size],
                finished: false,
            })
            .collect())
    }

    fn error(&self, op: Op, kind: ErrorKind) -> CommError {
        CommError::new(Some(self.rank), op, kind)
    }

    fn check_rank(&self, op: Op, peer: Rank) -> Result<(), CommError> {
        if peer < self.size {
            return Ok(());
        }
        Err(self.error(
            op,
            ErrorKind::NoSuchRank {
                peer,
                size: self.size,
            },
        ))
    }

    /// The error for `peer`, which has left, or `Ok` while it is open.
    fn check_open(&self, op: Op, peer: Rank) -> Result<(), CommError> {
        let detail = match self.job.standing(peer) {
            Standing::Open => return Ok(()),
            Standing::Finished => "it has finished",
            Standing::Lost => {
                "its endpoint was dropped without finish: its thread ended or panicked"
            }
        };
        Err(self.error(
            op,
            ErrorKind::PeerLost {
                peer,
                detail: detail.into(),
            },
        ))
    }

    /// The first lost peer, as an error (`probe` and `recv_any` report it
    /// once nothing is left to take).
    fn check_none_lost(&self, op: Op) -> Result<(), CommError> {
        (0..self.size)
            .filter(|&r| r != self.rank)
            .try_for_each(|r| match self.job.standing(r) {
                Standing::Lost => self.check_open(op, r),
                Standing::Open | Standing::Finished => Ok(()),
            })
    }

    fn send_message(
        &mut self,
        op: Op,
        dest: Rank,
        tag: Tag,
        data: Vec<u8>,
    ) -> Result<(), CommError> {
        self.check_rank(op, dest)?;
        if data.len() > self.max_len {
            return Err(self.error(
                op,
                ErrorKind::MessageTooLarge {
                    len: data.len(),
                    max: self.max_len,
                },
            ));
        }
        if dest != self.rank {
            self.check_open(op, dest)?;
        }
        let source = self.rank;
        self.job.deliver(dest, Message { source, tag, data });
        Ok(())
    }

    /// Waits up to `timeout` for `look` to find what it looks for in this
    /// rank's inbox (or to fail): spinning for the spin time, then parked.
    /// `look` runs with the inbox locked, which is what makes a wake-up
    /// impossible to miss (see `mailbox`).
    fn wait<T>(
        &self,
        timeout: Option<Duration>,
        mut look: impl FnMut(&Self, &mut Inbox) -> Result<Option<T>, CommError>,
    ) -> Result<Option<T>, CommError> {
        let start = Instant::now();
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let mut inbox = self.job.lock(self.rank);
        loop {
            if let Some(found) = look(self, &mut inbox)? {
                return Ok(Some(found));
            }
            let now = Instant::now();
            let left = match (timeout, deadline) {
                (Some(_), Some(d)) if now >= d => return Ok(None),
                (Some(_), Some(d)) => Some(d - now),
                _ => None,
            };
            if now - start < self.spin {
                drop(inbox);
                std::thread::yield_now();
                inbox = self.job.lock(self.rank);
            } else {
                inbox = self.job.park(self.rank, inbox, left);
            }
        }
    }
}

impl Comm for LocalComm {
    /// A job of one rank: the endpoints of a job of several are made
    /// together by [`LocalComm::job`], never joined one by one.
    fn init() -> Result<Self, CommError> {
        if let Some(np) = env::local_job_size()?.filter(|&np| np > 1) {
            return Err(CommError::new(
                None,
                Op::Init,
                ErrorKind::Environment(format!(
                    "{}=local with {}={np}: the ranks of a local job are threads of one \
                     process, made together by LocalComm::job (mttl's start does so); \
                     init alone cannot join them",
                    env::BACKEND,
                    env::NP
                )),
            ));
        }
        let mut endpoints = LocalComm::job(1)?;
        Ok(endpoints.remove(0))
    }

    fn finish(mut self) -> Result<(), CommError> {
        self.finished = true;
        self.job.leave(self.rank, Standing::Finished);
        let late = std::mem::take(&mut self.job.lock(self.rank).messages);
        if !late.is_empty() {
            tracing::debug!(
                rank = self.rank,
                discarded = late.len(),
                "finish: discarded messages that arrived after finish was called"
            );
        }
        Ok(())
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn backend_name(&self) -> &'static str {
        "local"
    }

    fn max_message_len(&self) -> usize {
        self.max_len
    }

    fn probe(&mut self) -> Result<Option<Envelope>, CommError> {
        if let Some(m) = self.job.lock(self.rank).messages.front() {
            return Ok(Some(m.envelope()));
        }
        self.check_none_lost(Op::Probe)?;
        Ok(None)
    }

    fn send(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send_message(Op::Send(dest), dest, tag, data.to_vec())
    }

    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.send_message(Op::Nsend(dest), dest, tag, data)?;
        let seq = self.next_seq[dest];
        self.next_seq[dest] += 1;
        Ok(SendHandle { dest, seq })
    }

    /// Always `true`: the message was in its receiver's mailbox when
    /// `nsend` returned.
    fn send_done(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        self.check_rank(Op::SendDone(handle.dest), handle.dest)?;
        Ok(true)
    }

    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        let op = Op::RecvFrom(source);
        self.check_rank(op, source)?;
        self.wait(timeout, |c, inbox| {
            if let Some(i) = inbox.messages.iter().position(|m| m.source == source) {
                return Ok(inbox.messages.remove(i));
            }
            if source != c.rank {
                c.check_open(op, source)?;
            }
            Ok(None)
        })
    }

    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError> {
        let op = Op::RecvAny;
        self.wait(timeout, |c, inbox| {
            // Messages already sent go first, even a lost rank's last ones.
            if let Some(m) = inbox.messages.pop_front() {
                return Ok(Some(m));
            }
            c.check_none_lost(op)?;
            let anyone_left =
                (0..c.size).any(|r| r != c.rank && c.job.standing(r) == Standing::Open);
            if c.size > 1 && !anyone_left {
                return Err(c.error(
                    op,
                    ErrorKind::PeerLost {
                        peer: c.rank,
                        detail: "every other rank has finished: nothing can arrive".into(),
                    },
                ));
            }
            Ok(None)
        })
    }
}

/// Every provided version: correct, as every backend's must be.
impl CommTuning for LocalComm {}

impl Drop for LocalComm {
    fn drop(&mut self) {
        if !self.finished {
            self.job.leave(self.rank, Standing::Lost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_has_at_least_one_rank() {
        let e = LocalComm::job_with_max_message(0, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("at least one rank"), "{e}");
    }

    /// A receive without a timeout, parked, is woken by its peer's
    /// departure: by `finish` for `recv_from`, by a drop for `recv_any`.
    #[test]
    fn a_parked_receive_wakes_when_its_peer_leaves() {
        for finish in [true, false] {
            let mut job = LocalComm::job_with_max_message(2, 1 << 20).unwrap();
            let peer = job.pop().unwrap();
            let mut me = job.pop().unwrap();
            let leaver = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                if finish {
                    peer.finish().unwrap();
                } else {
                    drop(peer);
                }
            });
            let e = if finish {
                me.recv_from(1, None).unwrap_err()
            } else {
                me.recv_any(None).unwrap_err()
            };
            leaver.join().unwrap();
            assert!(matches!(e.kind, ErrorKind::PeerLost { peer: 1, .. }), "{e}");
            let expected = if finish {
                "recv_from rank 1"
            } else {
                "recv_any"
            };
            assert!(
                e.to_string()
                    .starts_with(&format!("rank 0: {expected}: rank 1 is gone")),
                "{e}"
            );
            let e = me.send(1, 0, b"late").unwrap_err();
            assert!(matches!(e.kind, ErrorKind::PeerLost { peer: 1, .. }), "{e}");
        }
    }

    /// What a rank sent before it left still arrives, in order, before the
    /// loss is reported.
    #[test]
    fn messages_sent_before_leaving_arrive_first() {
        let mut job = LocalComm::job_with_max_message(2, 1 << 20).unwrap();
        let mut peer = job.pop().unwrap();
        let mut me = job.pop().unwrap();
        peer.send(0, 1, b"one").unwrap();
        peer.nsend(0, 2, b"two".to_vec()).unwrap();
        drop(peer);
        assert_eq!(me.recv_any(None).unwrap().unwrap().data, b"one");
        assert_eq!(me.recv_from(1, None).unwrap().unwrap().data, b"two");
        assert!(me.probe().is_err());
    }
}
