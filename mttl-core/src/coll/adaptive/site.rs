//! Sites: what names one adaptive broadcast's table on every rank. A call
//! of `broadcast` is keyed by its caller's location; an
//! [`AdaptiveBroadcast`] by where it was made and how many were made there
//! before it on this rank, which is the same on every rank when, as the
//! rules of collectives ask, every rank runs the same code.

use std::fmt;
use std::panic::Location;

use mttl_comm::Rank;

use super::super::broadcast::{broadcast_slice_with, broadcast_with, How};
use super::LearningProgress;

/// One site: a source location and an instance number there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site {
    at: &'static Location<'static>,
    instance: u32,
    id: u64,
}

impl Site {
    pub(crate) fn new(at: &'static Location<'static>, instance: u32) -> Site {
        // FNV-1a over the location and the instance: the same on every
        // rank of one binary.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(at.file().as_bytes());
        eat(&at.line().to_le_bytes());
        eat(&at.column().to_le_bytes());
        eat(&instance.to_le_bytes());
        Site {
            at,
            instance,
            id: h,
        }
    }

    /// The id every rank computes alike for this site.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance == 0 {
            write!(f, "the broadcast at {}", self.at)
        } else {
            write!(
                f,
                "AdaptiveBroadcast #{} made at {}",
                self.instance, self.at
            )
        }
    }
}

/// A broadcast that learns its ranks' arrival pattern, whatever
/// `MTTL_BCAST` says: a program keeps one per broadcast whose imbalance is
/// its own (e.g. one per phase of an iteration), so that two patterns do
/// not fight over one table. Make it on every rank in the same order (as
/// any collective's rules ask); each root gets a table of its own.
///
/// ```
/// let code = mttl_core::start(|| {
///     let step = mttl_core::AdaptiveBroadcast::new();
///     for i in 0..10u64 {
///         let x = step.broadcast(0, if mttl_core::rank() == 0 { i } else { 0 });
///         assert_eq!(x, i);
///     }
/// });
/// assert_eq!(code, 0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveBroadcast {
    site: Site,
}

impl AdaptiveBroadcast {
    /// A broadcast with tables of its own, named by where it is made and
    /// how many were made there before on this rank.
    #[track_caller]
    #[allow(clippy::new_without_default)]
    pub fn new() -> AdaptiveBroadcast {
        let at = Location::caller();
        let instance = super::next_instance(at);
        AdaptiveBroadcast {
            site: Site::new(at, instance),
        }
    }

    /// As [`broadcast`](crate::broadcast), down this value's learned tree.
    pub fn broadcast<T: crate::codec::Encode + crate::codec::Decode<()>>(
        &self,
        root: Rank,
        value: T,
    ) -> T {
        broadcast_with(root, value, How::Adaptive(self.site))
    }

    /// As [`broadcast_slice`](crate::broadcast_slice), down this value's
    /// learned tree.
    pub fn broadcast_slice<T: bytemuck::Pod>(&self, root: Rank, values: &mut [T]) {
        broadcast_slice_with(root, values, How::Adaptive(self.site));
    }

    /// A broadcast down the fixed table `to_virtual` (the virtual rank of
    /// each real rank, `root` at 0) that never learns: e.g. the best table
    /// for a known pattern, found offline, to compare the learned one
    /// with. Make it on every rank with the same table. An error names
    /// what is wrong if the table is not a permutation of the job's ranks
    /// with `root` at 0.
    #[track_caller]
    pub fn with_table(root: Rank, to_virtual: &[Rank]) -> Result<AdaptiveBroadcast, String> {
        let at = Location::caller();
        let site = Site::new(at, super::next_instance(at));
        super::fix_table(site, root, crate::context::size(), to_virtual)
            .map_err(|e| format!("AdaptiveBroadcast::with_table at {at}: {e}"))?;
        Ok(AdaptiveBroadcast { site })
    }

    /// On `root`: how far this broadcast's learning went for `root`
    /// (broadcasts, phases, changes); `None` on the other ranks, before
    /// the first broadcast, and for a fixed table.
    pub fn progress(&self, root: Rank) -> Option<LearningProgress> {
        super::progress_of(self.site, root)
    }

    /// This rank's current table for `root`: the virtual rank of each real
    /// rank, or `None` before its first broadcast from `root`.
    pub fn table(&self, root: Rank) -> Option<Vec<Rank>> {
        super::table_of(self.site, root)
    }
}

/// This rank's adaptive broadcast tables, for tests and diagnostics: (the
/// site, its root, the virtual rank of each real rank), sorted.
#[doc(hidden)]
pub fn adaptive_tables() -> Vec<(String, Rank, Vec<Rank>)> {
    super::tables()
}
