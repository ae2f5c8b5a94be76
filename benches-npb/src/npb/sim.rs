//! The in-process reference driver: `P` virtual ranks as threads of one
//! process, exchanging owned buffers over channels.
//!
//! [`run`] gives each rank a [`SimComm`] and runs the same closure on every
//! rank (rank 0 on the calling thread when `P = 1`, otherwise one scoped
//! thread per rank), so the numerical core can be verified at any process
//! count without MPI or networking. [`SimComm`] implements [`CgComm`] and
//! [`IsComm`] with point-to-point messages matched by (source, tag) in FIFO
//! order, like MPI; a send never blocks, so no call pattern deadlocks that
//! would not deadlock under MPI with unlimited buffering.
//!
//! Data a rank sends to itself is copied directly. The allreduce adds
//! contributions in rank order; the barrier gathers at rank 0 and releases
//! everyone.
//!
//! If one rank panics, the others notice within [`POLL`] while waiting for a
//! message and stop too; [`run`] then re-raises the first rank's own panic.

use std::any::Any;
use std::collections::VecDeque;
use std::panic;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use super::cg::{CgComm, Exchange};
use super::is::IsComm;

/// How often a waiting rank checks whether another rank has panicked.
pub const POLL: Duration = Duration::from_millis(50);

const TAG_ALLREDUCE: i32 = 1000;
const TAG_ALLTOALL: i32 = 1001;
const TAG_ALLTOALLV: i32 = 1002;
const TAG_SHIFT: i32 = 1003;
const TAG_BARRIER_IN: i32 = 1004;
const TAG_BARRIER_OUT: i32 = 1005;

#[derive(Debug)]
enum Payload {
    F64(Vec<f64>),
    I32(Vec<i32>),
    Signal,
}

#[derive(Debug)]
struct Envelope {
    src: usize,
    tag: i32,
    payload: Payload,
}

/// The panic payload of a rank that stopped because another rank panicked.
#[derive(Debug)]
struct PeerPanicked;

/// Sets the shared abort flag if its thread unwinds.
struct AbortOnPanic(Arc<AtomicBool>);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// One virtual rank's endpoint.
#[derive(Debug)]
pub struct SimComm {
    rank: usize,
    size: usize,
    inbox: Receiver<Envelope>,
    peers: Vec<Sender<Envelope>>,
    unmatched: VecDeque<Envelope>,
    aborted: Arc<AtomicBool>,
    keys: Vec<i32>,
    keys_len: usize,
}

/// Runs `f` on `nprocs` virtual ranks and returns their results in rank
/// order.
///
/// # Panics
///
/// If any rank panics, with that rank's panic.
pub fn run<R, F>(nprocs: usize, f: F) -> Vec<R>
where
    F: Fn(&mut SimComm) -> R + Sync,
    R: Send,
{
    assert!(nprocs > 0, "a simulated job needs at least one rank");
    let (senders, inboxes): (Vec<_>, Vec<_>) = (0..nprocs).map(|_| channel()).unzip();
    let aborted = Arc::new(AtomicBool::new(false));
    let mut comms: Vec<SimComm> = inboxes
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| SimComm {
            rank,
            size: nprocs,
            inbox,
            peers: senders.clone(),
            unmatched: VecDeque::new(),
            aborted: Arc::clone(&aborted),
            keys: Vec::new(),
            keys_len: 0,
        })
        .collect();
    drop(senders);

    if nprocs == 1 {
        let mut comm = comms.remove(0);
        return vec![f(&mut comm)];
    }

    let outcomes: Vec<Result<R, Box<dyn Any + Send>>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|mut comm| {
                let f = &f;
                let guard = AbortOnPanic(Arc::clone(&aborted));
                s.spawn(move || {
                    let _guard = guard;
                    f(&mut comm)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });

    let mut results = Vec::with_capacity(nprocs);
    let mut first_panic = None;
    for outcome in outcomes {
        match outcome {
            Ok(r) => results.push(r),
            Err(e) => {
                let original = !e.is::<PeerPanicked>();
                if first_panic
                    .as_ref()
                    .is_none_or(|(was_original, _)| original && !was_original)
                {
                    first_panic = Some((original, e));
                }
            }
        }
    }
    if let Some((_, e)) = first_panic {
        panic::resume_unwind(e);
    }
    results
}

impl SimComm {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    fn send(&self, dst: usize, tag: i32, payload: Payload) {
        let envelope = Envelope {
            src: self.rank,
            tag,
            payload,
        };
        if self.peers[dst].send(envelope).is_err() {
            panic!(
                "rank {}: rank {dst} has already finished; the ranks made different calls",
                self.rank
            );
        }
    }

    fn recv(&mut self, src: usize, tag: i32) -> Payload {
        if let Some(pos) = self
            .unmatched
            .iter()
            .position(|e| e.src == src && e.tag == tag)
        {
            if let Some(e) = self.unmatched.remove(pos) {
                return e.payload;
            }
        }
        loop {
            match self.inbox.recv_timeout(POLL) {
                Ok(e) if e.src == src && e.tag == tag => return e.payload,
                Ok(e) => self.unmatched.push_back(e),
                Err(RecvTimeoutError::Timeout) => {
                    if self.aborted.load(Ordering::SeqCst) {
                        panic::panic_any(PeerPanicked);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    unreachable!("a rank holds a sender to its own inbox")
                }
            }
        }
    }

    fn recv_f64(&mut self, src: usize, tag: i32) -> Vec<f64> {
        match self.recv(src, tag) {
            Payload::F64(v) => v,
            other => panic!(
                "rank {}: expected f64 data from {src} (tag {tag}), got {other:?}",
                self.rank
            ),
        }
    }

    fn recv_i32(&mut self, src: usize, tag: i32) -> Vec<i32> {
        match self.recv(src, tag) {
            Payload::I32(v) => v,
            other => panic!(
                "rank {}: expected i32 data from {src} (tag {tag}), got {other:?}",
                self.rank
            ),
        }
    }

    /// Waits until every rank has called `barrier`.
    pub fn barrier(&mut self) {
        if self.size == 1 {
            return;
        }
        if self.rank == 0 {
            for src in 1..self.size {
                self.recv(src, TAG_BARRIER_IN);
            }
            for dst in 1..self.size {
                self.send(dst, TAG_BARRIER_OUT, Payload::Signal);
            }
        } else {
            self.send(0, TAG_BARRIER_IN, Payload::Signal);
            self.recv(0, TAG_BARRIER_OUT);
        }
    }

    /// Maximum of `value` over all ranks, on every rank (for timings).
    pub fn max_f64(&mut self, value: f64) -> f64 {
        let mut all = vec![0.0; self.size];
        for dst in (0..self.size).filter(|&d| d != self.rank) {
            self.send(dst, TAG_ALLREDUCE, Payload::F64(vec![value]));
        }
        for (src, slot) in all.iter_mut().enumerate() {
            *slot = if src == self.rank {
                value
            } else {
                self.recv_f64(src, TAG_ALLREDUCE)[0]
            };
        }
        all.into_iter().fold(f64::NEG_INFINITY, f64::max)
    }
}

impl CgComm for SimComm {
    fn exchange(&mut self, partner: usize, kind: Exchange, send: &[f64], recv: &mut [f64]) {
        if partner == self.rank {
            recv.copy_from_slice(send);
            return;
        }
        self.send(partner, kind.tag(), Payload::F64(send.to_vec()));
        let data = self.recv_f64(partner, kind.tag());
        assert_eq!(
            data.len(),
            recv.len(),
            "rank {}: {kind:?} from rank {partner} carried {} values, {} expected",
            self.rank,
            data.len(),
            recv.len()
        );
        recv.copy_from_slice(&data);
    }

    fn barrier(&mut self) {
        SimComm::barrier(self);
    }
}

impl IsComm for SimComm {
    fn allreduce_sum(&mut self, local: &[i32], total: &mut [i32]) {
        assert_eq!(local.len(), total.len());
        for dst in (0..self.size).filter(|&d| d != self.rank) {
            self.send(dst, TAG_ALLREDUCE, Payload::I32(local.to_vec()));
        }
        total.fill(0);
        for src in 0..self.size {
            let theirs;
            let part = if src == self.rank {
                local
            } else {
                theirs = self.recv_i32(src, TAG_ALLREDUCE);
                assert_eq!(theirs.len(), total.len(), "allreduce lengths differ");
                &theirs
            };
            for (t, v) in total.iter_mut().zip(part) {
                *t += v;
            }
        }
    }

    fn alltoall(&mut self, send: &[i32], recv: &mut [i32]) {
        assert!(send.len() == self.size && recv.len() == self.size);
        for dst in (0..self.size).filter(|&d| d != self.rank) {
            self.send(dst, TAG_ALLTOALL, Payload::I32(vec![send[dst]]));
        }
        for (src, slot) in recv.iter_mut().enumerate() {
            *slot = if src == self.rank {
                send[src]
            } else {
                self.recv_i32(src, TAG_ALLTOALL)[0]
            };
        }
    }

    fn alltoallv(
        &mut self,
        send: &[i32],
        send_counts: &[i32],
        send_displs: &[i32],
        recv_counts: &[i32],
        recv_displs: &[i32],
    ) {
        let segment = |counts: &[i32], displs: &[i32], r: usize| {
            let start = displs[r] as usize;
            start..start + counts[r] as usize
        };
        for dst in (0..self.size).filter(|&d| d != self.rank) {
            let data = send[segment(send_counts, send_displs, dst)].to_vec();
            self.send(dst, TAG_ALLTOALLV, Payload::I32(data));
        }
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        if self.keys.len() < total {
            self.keys.resize(total, 0);
        }
        self.keys_len = total;
        let me = self.rank;
        self.keys[segment(recv_counts, recv_displs, me)]
            .copy_from_slice(&send[segment(send_counts, send_displs, me)]);
        for src in (0..self.size).filter(|&s| s != me) {
            let data = self.recv_i32(src, TAG_ALLTOALLV);
            self.keys[segment(recv_counts, recv_displs, src)].copy_from_slice(&data);
        }
    }

    fn received_keys(&self) -> &[i32] {
        &self.keys[..self.keys_len]
    }

    fn shift_right(&mut self, value: i32) -> Option<i32> {
        if self.rank + 1 < self.size {
            self.send(self.rank + 1, TAG_SHIFT, Payload::I32(vec![value]));
        }
        if self.rank > 0 {
            Some(self.recv_i32(self.rank - 1, TAG_SHIFT)[0])
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_by_source_and_tag_in_order() {
        let got = run(3, |c| {
            let me = c.rank();
            let mut v = [0.0; 2];
            let partner = (me + 1) % 3;
            let from = (me + 2) % 3;
            // Out-of-order delivery: send two tags, receive them reversed.
            c.send(partner, 7, Payload::F64(vec![1.0, me as f64]));
            c.send(partner, 8, Payload::F64(vec![2.0, me as f64]));
            let b = c.recv_f64(from, 8);
            let a = c.recv_f64(from, 7);
            v[0] = a[1];
            v[1] = b[1];
            c.barrier();
            v
        });
        for (me, v) in got.iter().enumerate() {
            assert_eq!(*v, [((me + 2) % 3) as f64; 2]);
        }
    }

    #[test]
    fn a_butterfly_row_sum_leaves_the_total_everywhere() {
        let got = run(4, |c| {
            let me = c.rank();
            let mut v = [me as f64, 1.0];
            c.row_sum(&[me ^ 2, me ^ 1], &mut v);
            v
        });
        assert_eq!(got, vec![[6.0, 4.0]; 4]);
    }

    #[test]
    fn collectives_agree_with_their_definitions() {
        let n = 4;
        let got = run(n, |c| {
            let me = c.rank() as i32;
            let mut total = [0; 2];
            c.allreduce_sum(&[me, 1], &mut total);
            let counts: Vec<i32> = (0..n as i32).map(|d| (me + d) % 3).collect();
            let mut recv = vec![0; n];
            c.alltoall(&counts, &mut recv);
            let displs: Vec<i32> = counts
                .iter()
                .scan(0, |a, &x| {
                    let d = *a;
                    *a += x;
                    Some(d)
                })
                .collect();
            let send: Vec<i32> = (0..counts.iter().sum()).map(|i| me * 100 + i).collect();
            let rdispls: Vec<i32> = recv
                .iter()
                .scan(0, |a, &x| {
                    let d = *a;
                    *a += x;
                    Some(d)
                })
                .collect();
            c.alltoallv(&send, &counts, &displs, &recv, &rdispls);
            let keys = c.received_keys().to_vec();
            let left = c.shift_right(me);
            let t = c.max_f64(me as f64);
            (total, recv, keys, left, t)
        });
        for (me, (total, recv, keys, left, t)) in got.into_iter().enumerate() {
            assert_eq!(total, [6, 4]);
            let me = me as i32;
            assert_eq!(
                recv,
                (0..n as i32).map(|s| (s + me) % 3).collect::<Vec<_>>()
            );
            assert_eq!(keys.len(), recv.iter().sum::<i32>() as usize);
            assert_eq!(left, if me == 0 { None } else { Some(me - 1) });
            assert_eq!(t, 3.0);
        }
    }

    #[test]
    fn a_panicking_rank_stops_the_others() {
        let outcome = std::panic::catch_unwind(|| {
            run(3, |c| {
                if c.rank() == 1 {
                    panic!("rank one fails");
                }
                c.barrier();
            })
        });
        let err = outcome.unwrap_err();
        assert_eq!(err.downcast_ref::<&str>(), Some(&"rank one fails"));
    }
}
