//! The adaptive broadcast (Soga, Kurihara, Nanri, Kurokawa, Murakami,
//! "Dynamic optimization of load balance in MPI broadcast"): a binomial
//! tree whose places are given to ranks by a real-to-virtual table that the
//! ranks' measured waits change, one table per call site and root. A rank
//! that arrives late high in the tree delays its whole subtree; moving it
//! down, and an early rank up, lets the data flow past it.
//!
//! It runs when `MTTL_BCAST=adaptive` (for every [`broadcast`] and
//! [`broadcast_slice`], keyed by their caller's location), or for an
//! [`AdaptiveBroadcast`] a program keeps. `MTTL_BCAST=binomial` (the
//! default) leaves the plain binomial broadcast untouched; `arrival` picks
//! the within-call baseline of [`super::arrival`].
//!
//! [`broadcast`]: crate::broadcast
//! [`broadcast_slice`]: crate::broadcast_slice
//!
//! # Protocol (one call site and root; [`learner`] holds the rules)
//!
//! 1. Every rank keeps the site's table (starting as the binomial one:
//!    virtual = rank relative to the root; virtual 0 is always the root)
//!    and its version, starting at 0.
//! 2. The root computes this broadcast's tree from the table, then runs
//!    its learner ([`learner`]'s steps): every K-th broadcast of the site
//!    (K starts at 1, doubles after each phase that changed nothing, is 1
//!    again after a change) a phase rebuilds the last broadcasts from the
//!    reported slacks (every rank's arrival, the observed completion), and
//!    either judges the last change (undoing it when the completion got
//!    worse by more than half a hop and the noise) or puts the ranks,
//!    sorted by arrival, onto the places sorted by when they get the data,
//!    if the model says that shortens the completion by at least half a
//!    hop. A settled site whose completion moves by more than a hop and
//!    the noise starts again from K = 1.
//! 3. The root sends the data down the tree with a trailer: the site's id,
//!    the table version the tree was computed from, the root's clock (ns
//!    since its first broadcast of the site), the report threshold (half a
//!    hop, or twice the noise if more) and the swaps just made (usually
//!    none: 40 bytes, no extra message).
//! 4. Every other rank receives from whichever rank sent (never a fixed
//!    source, so disagreeing ranks are reported, not left hanging) and
//!    checks the trailer: the same site, the same version, and the sender
//!    its parent in its own table; anything else stops the job naming
//!    both sides. It forwards the message as it came to its children.
//! 5. Its slack (from entering the receive to the data's arrival, as
//!    the mailbox stamped it: negative when the data was there first)
//!    updates its evaluation `NewVal = ((2^i - 1) * PreVal + Slack) / 2^i`,
//!    `i` counting slacks since the table last changed (at most 2; a slack
//!    more than 4 thresholds and half the value away starts it afresh). On
//!    the first broadcast of a table, and when the value moved by more than
//!    the trailer's threshold from the value it last reported, it
//!    sends it to the root in a `COLL_REPORT` message (a child of the root
//!    adds the root's clock from the trailer and how long it has held the
//!    data: the root takes half the rest of the round trip as a measured
//!    hop); the root files it with the site's learner as it arrives and
//!    uses it at its next broadcast of the site, without waiting for it.
//! 6. Every rank, the root included, applies the trailer's swaps after the
//!    broadcast and bumps the version: the next broadcast of the site uses
//!    the new table everywhere, since every rank received the change before
//!    it could finish this broadcast.

mod learner;
mod model;
mod site;

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::time::Instant;

use mttl_comm::Rank;
use rustc_hash::FxHashMap;

pub use self::learner::LearningProgress;
use self::learner::{Evaluation, Learner, Table, TableError};
pub use self::model::AdaptiveModel;
pub(crate) use self::site::Site;
pub use self::site::{adaptive_tables, AdaptiveBroadcast};
use super::algorithm::STEP_DOWN;
use super::mailbox::Op;
use crate::context;
use crate::wire::{self, Fields, HeaderBuf};

/// The variable that picks the broadcast algorithm.
const VAR: &str = "MTTL_BCAST";

/// Marks a trailer, so that a rank which reads a plain broadcast's data as
/// an adaptive one says so instead of misreading it.
const MAGIC: u32 = 0x4144_4243;

/// The fixed part of a trailer: site u64, version u64, the root's clock
/// u64 (ns since the site's first broadcast there), the report threshold
/// u64 (ns), swap count u32, magic u32.
const TRAILER_LEN: usize = 40;

/// A report's body: the root's clock from the trailer of the broadcast a
/// child of the root measured, and how long (ns) the child held the data
/// before reporting; empty when the reporting rank is not a child of the
/// root.
const ECHO_LEN: usize = 16;

/// The broadcast algorithm of [`crate::broadcast`] and
/// [`crate::broadcast_slice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Binomial,
    Adaptive,
    Arrival,
}

impl Mode {
    /// The value of `MTTL_BCAST` that chooses it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Binomial => "binomial",
            Mode::Adaptive => "adaptive",
            Mode::Arrival => "arrival",
        }
    }
}

/// One site and root as this rank knows it.
#[derive(Debug)]
struct SiteState {
    site: Site,
    table: Table,
    version: u64,
    eval: Evaluation,
    /// On the root: the optimizer.
    learner: Option<Learner>,
    /// A table given by the program, never learned.
    fixed: bool,
    /// On the root: the zero of the clock its trailers carry.
    epoch: Instant,
    /// On a child of the root: the root's clock of the last broadcast and
    /// when its data arrived here, for the next report.
    echo: Option<(u64, Instant)>,
}

thread_local! {
    static MODE: Cell<Mode> = const { Cell::new(Mode::Binomial) };
    static SITES: RefCell<FxHashMap<(u64, Rank), SiteState>> = RefCell::new(FxHashMap::default());
    /// Per location: how many `AdaptiveBroadcast`s were made there.
    static INSTANCES: RefCell<FxHashMap<(&'static str, u32, u32), u32>> =
        RefCell::new(FxHashMap::default());
}

/// The instance number of the next `AdaptiveBroadcast` made at `at`
/// (from 1: 0 names a plain call site).
fn next_instance(at: &'static Location<'static>) -> u32 {
    INSTANCES.with(|m| {
        let mut m = m.borrow_mut();
        let k = m.entry((at.file(), at.line(), at.column())).or_insert(0);
        *k += 1;
        *k
    })
}

/// Gives `site` the fixed table `to_virtual` for `root` (a job of `n`).
fn fix_table(site: Site, root: Rank, n: usize, to_virtual: &[Rank]) -> Result<(), TableError> {
    let table = Table::from_virtual(n, root, to_virtual)?;
    SITES.with(|sites| {
        sites.borrow_mut().insert(
            (site.id(), root),
            SiteState {
                site,
                table,
                version: 0,
                eval: Evaluation::default(),
                learner: None,
                fixed: true,
                epoch: Instant::now(),
                echo: None,
            },
        )
    });
    Ok(())
}

/// The learning progress of `site` and `root`, on the root.
fn progress_of(site: Site, root: Rank) -> Option<LearningProgress> {
    SITES.with(|sites| {
        sites
            .borrow()
            .get(&(site.id(), root))
            .and_then(|st| st.learner.as_ref().map(Learner::progress))
    })
}

/// This rank's table of `site` and `root`, if it has broadcast there.
fn table_of(site: Site, root: Rank) -> Option<Vec<Rank>> {
    SITES.with(|sites| {
        sites
            .borrow()
            .get(&(site.id(), root))
            .map(|st| st.table.virtual_ranks().to_vec())
    })
}

/// Reads `MTTL_BCAST` (set-up of the collectives service).
pub(super) fn start() -> Result<(), String> {
    let mode = match std::env::var(VAR) {
        Err(_) => Mode::Binomial,
        Ok(v) => match v.as_str() {
            "" | "binomial" => Mode::Binomial,
            "adaptive" => Mode::Adaptive,
            "arrival" => Mode::Arrival,
            other => {
                return Err(format!(
                    "{VAR}={other} is not a broadcast algorithm: use binomial, adaptive or arrival"
                ))
            }
        },
    };
    MODE.with(|m| m.set(mode));
    SITES.with(|s| s.borrow_mut().clear());
    INSTANCES.with(|m| m.borrow_mut().clear());
    Ok(())
}

/// Drops every site's state (end of the job).
pub(super) fn stop() {
    let _ = SITES.try_with(|s| s.borrow_mut().clear());
    let _ = INSTANCES.try_with(|m| m.borrow_mut().clear());
}

/// The algorithm `MTTL_BCAST` chose on this rank.
pub(super) fn mode() -> Mode {
    MODE.with(Cell::get)
}

fn with_site<R>(site: Site, root: Rank, n: usize, f: impl FnOnce(&mut SiteState) -> R) -> R {
    SITES.with(|sites| {
        let mut sites = sites.borrow_mut();
        let st = sites.entry((site.id(), root)).or_insert_with(|| SiteState {
            site,
            table: Table::new(n, root),
            version: 0,
            eval: Evaluation::default(),
            learner: None,
            fixed: false,
            epoch: Instant::now(),
            echo: None,
        });
        f(st)
    })
}

/// Broadcasts down the site's tree (steps 2-6): the root passes the data
/// (to which the trailer is appended), the others get it back, trailer
/// removed.
pub(super) fn broadcast_down(
    op: &Op,
    root: Rank,
    site: Site,
    data: Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let n = op.size;
    if op.rank == root {
        let mut body = data.unwrap_or_default();
        let len = body.len();
        let children = with_site(site, root, n, |st| {
            let children: Vec<Rank> = st.table.children(root).collect();
            let (swaps, threshold) = if st.fixed {
                (Vec::new(), 0.0)
            } else {
                let learner = st.learner.get_or_insert_with(|| Learner::new(n));
                let swaps = learner.after_broadcast(&mut st.table);
                (swaps, learner.report_threshold())
            };
            let head = Head {
                site: site.id(),
                version: st.version,
                clock: st.epoch.elapsed().as_nanos() as u64,
                threshold: (threshold * 1e9) as u64,
            };
            push_trailer(&mut body, head, &swaps);
            if !swaps.is_empty() {
                st.version += 1;
            }
            children
        });
        let sending = Instant::now();
        let sends = children.len();
        for c in children {
            op.send(c, STEP_DOWN, &body);
        }
        if sends > 0 {
            // The learner's gap: this root's time per send.
            let gap = sending.elapsed().as_secs_f64() / sends as f64;
            with_site(site, root, n, |st| {
                if let Some(learner) = st.learner.as_mut() {
                    learner.gap_sample(gap);
                }
            });
        }
        body.truncate(len);
        return Some(body);
    }
    let entered = Instant::now();
    let (src, body, filed) = op.recv_any_filed(STEP_DOWN);
    let slack = if filed >= entered {
        (filed - entered).as_secs_f64()
    } else {
        -(entered - filed).as_secs_f64()
    };
    let trailer = read_trailer(&body).unwrap_or_else(|why| {
        op.fail(&format!(
            "the message from rank {src} is not an adaptive broadcast's ({why}): do all ranks set \
             {VAR} alike?"
        ))
    });
    let (children, report) = with_site(site, root, n, |st| {
        if trailer.head.site != st.site.id() {
            return Err(format!(
                "rank {src} broadcast from another call site than this rank's {}: with {VAR}=adaptive \
                 every rank must call the broadcast from the same place (or the same \
                 AdaptiveBroadcast)",
                st.site
            ));
        }
        if trailer.head.version != st.version {
            return Err(format!(
                "the root's table for {} is at version {}, this rank's at {}: the ranks disagree \
                 about the site's table",
                st.site, trailer.head.version, st.version
            ));
        }
        if st.table.parent(op.rank) != Some(src) {
            return Err(format!(
                "rank {src} sent this rank the data of {}, but its parent in the table is {:?}: \
                 the ranks disagree about the site's table",
                st.site,
                st.table.parent(op.rank)
            ));
        }
        let children: Vec<Rank> = st.table.children(op.rank).collect();
        let report = if st.fixed {
            None
        } else {
            if src == root {
                st.echo = Some((trailer.head.clock, filed));
            }
            let threshold = trailer.head.threshold as f64 * 1e-9;
            st.eval.record(slack, threshold).map(|v| (v, st.echo.take()))
        };
        if !trailer.swaps.is_empty() {
            st.table.apply(&trailer.swaps).map_err(|e| {
                format!("the root's change to the table of {} is invalid: {e}", st.site)
            })?;
            st.version += 1;
            st.eval.restart();
        }
        Ok((children, report))
    })
    .unwrap_or_else(|why| op.fail(&why));
    for c in children {
        op.send(c, STEP_DOWN, &body);
    }
    if let Some((value, echo)) = report {
        send_report(op, root, site, value, echo);
    }
    let mut body = body;
    body.truncate(trailer.data_len);
    Some(body)
}

/// Step 5: sends this rank's evaluation (seconds, signed) to the site's
/// root, in whole nanoseconds, with the echo of the root's clock when this
/// rank is a child of the root (the root measures a hop from it).
fn send_report(op: &Op, root: Rank, site: Site, value: f64, echo: Option<(u64, Instant)>) {
    let ns = (value * 1e9) as i64 as u64;
    let header = HeaderBuf::with_capacity(20)
        .u64(site.id())
        .u32(root as u32)
        .u64(ns);
    let mut body = Vec::new();
    if let Some((clock, arrived)) = echo {
        body.extend_from_slice(&clock.to_le_bytes());
        body.extend_from_slice(&(arrived.elapsed().as_nanos() as u64).to_le_bytes());
    }
    context::with(|cx| {
        if let Err(e) = cx.post(root, wire::COLL_REPORT, &header.bytes, &body) {
            cx.send_failed(
                &format!("broadcast #{}: reporting waits to rank {root}", op.seq),
                &e,
            );
        }
    });
}

/// Files a `COLL_REPORT` from `src` with the learner of its site (step 5,
/// on the root), and the hop its echo measures: half of the time from the
/// root's sending to the report's arrival, less the time the child held
/// the data. A report for a site this rank is not the root of is dropped:
/// it can only come from a job whose ranks disagree, which the broadcasts
/// themselves report. An error for a body that is not an echo.
pub(super) fn take_report(src: Rank, header: &[u8], body: &[u8]) -> Result<(), String> {
    let echo = match body.len() {
        0 => None,
        ECHO_LEN => {
            let mut f = Fields(body);
            Some((f.u64(), f.u64()))
        }
        other => {
            return Err(format!(
                "malformed adaptive broadcast report from rank {src}: a body of {other} bytes, \
                 expected 0 or {ECHO_LEN}"
            ))
        }
    };
    let mut f = Fields(header);
    let site = f.u64();
    let root = f.u32() as Rank;
    let value = f.u64() as i64 as f64 * 1e-9;
    SITES.with(|sites| {
        if let Some(st) = sites.borrow_mut().get_mut(&(site, root)) {
            if let Some(learner) = st.learner.as_mut() {
                learner.report(src, value);
                if let Some((clock, held)) = echo {
                    let now = st.epoch.elapsed().as_nanos() as u64;
                    if let Some(trip) = now.checked_sub(clock).and_then(|t| t.checked_sub(held)) {
                        learner.hop_sample(trip as f64 * 0.5e-9);
                    }
                }
            }
        }
    });
    Ok(())
}

/// The current tables of this rank's sites: (site, root, virtual rank of
/// each real rank).
fn tables() -> Vec<(String, Rank, Vec<Rank>)> {
    SITES.with(|sites| {
        let mut all: Vec<_> = sites
            .borrow()
            .iter()
            .map(|(&(_, root), st)| (st.site.to_string(), root, st.table.virtual_ranks().to_vec()))
            .collect();
        all.sort();
        all
    })
}

/// The fixed fields of a trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    site: u64,
    version: u64,
    /// The root's clock, ns since its first broadcast of the site.
    clock: u64,
    /// The report threshold, ns.
    threshold: u64,
}

/// A decoded trailer.
#[derive(Debug)]
struct Trailer {
    data_len: usize,
    head: Head,
    swaps: Vec<(Rank, Rank)>,
}

fn push_trailer(body: &mut Vec<u8>, head: Head, swaps: &[(Rank, Rank)]) {
    for &(a, b) in swaps {
        body.extend_from_slice(&(a as u32).to_le_bytes());
        body.extend_from_slice(&(b as u32).to_le_bytes());
    }
    body.extend_from_slice(&head.site.to_le_bytes());
    body.extend_from_slice(&head.version.to_le_bytes());
    body.extend_from_slice(&head.clock.to_le_bytes());
    body.extend_from_slice(&head.threshold.to_le_bytes());
    body.extend_from_slice(&(swaps.len() as u32).to_le_bytes());
    body.extend_from_slice(&MAGIC.to_le_bytes());
}

fn read_trailer(body: &[u8]) -> Result<Trailer, String> {
    let Some(fixed_at) = body.len().checked_sub(TRAILER_LEN) else {
        return Err(format!("{} bytes, shorter than a trailer", body.len()));
    };
    let mut f = Fields(&body[fixed_at..]);
    let head = Head {
        site: f.u64(),
        version: f.u64(),
        clock: f.u64(),
        threshold: f.u64(),
    };
    let (count, magic) = (f.u32() as usize, f.u32());
    if magic != MAGIC {
        return Err("no trailer mark".to_owned());
    }
    let Some(data_len) = count
        .checked_mul(8)
        .and_then(|swaps_len| fixed_at.checked_sub(swaps_len))
    else {
        return Err(format!("{count} swaps do not fit in {} bytes", body.len()));
    };
    let mut f = Fields(&body[data_len..fixed_at]);
    let swaps = (0..count)
        .map(|_| (f.u32() as Rank, f.u32() as Rank))
        .collect();
    Ok(Trailer {
        data_len,
        head,
        swaps,
    })
}

/// The location of a call site, for [`Site`]s keyed by where
/// `broadcast` is called.
pub(super) fn call_site(at: &'static Location<'static>) -> Site {
    Site::new(at, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_round_trip_and_reject_garbage() {
        let mut body = b"data".to_vec();
        let head = Head {
            site: 7,
            version: 3,
            clock: 99,
            threshold: 15_000,
        };
        push_trailer(&mut body, head, &[(1, 2), (5, 4)]);
        let t = read_trailer(&body).unwrap();
        assert_eq!((t.data_len, t.head), (4, head));
        assert_eq!(t.swaps, vec![(1, 2), (5, 4)]);
        let mut empty = Vec::new();
        push_trailer(&mut empty, head, &[]);
        assert_eq!(empty.len(), TRAILER_LEN);
        assert_eq!(read_trailer(&empty).unwrap().data_len, 0);
        assert!(read_trailer(b"short").is_err());
        assert!(read_trailer(&[0; 48]).unwrap_err().contains("mark"));
        assert!(take_report(1, &[0; 20], &[0; 5])
            .unwrap_err()
            .contains("5 bytes"));
        assert_eq!(take_report(1, &[0; 20], &[0; ECHO_LEN]), Ok(()));
        let mut lying = Vec::new();
        push_trailer(&mut lying, head, &[]);
        lying[32..36].copy_from_slice(&1000u32.to_le_bytes());
        assert!(read_trailer(&lying).unwrap_err().contains("do not fit"));
    }
}
