//! Why a thread is blocked: [`BlockReason`], and the watchdog's view of the
//! blocked threads, [`BlockedThread`].
//!
//! A reason is `Copy` and built from `'static` data only (a description, the
//! caller's source location, an optional numeric detail such as a rank), so
//! blocking never allocates. Formatting happens only when a watchdog or a
//! report asks for it.

use std::fmt;
use std::panic::Location;

use super::id::ThreadId;

/// What a blocked thread waits for, and where it started waiting.
///
/// ```
/// use mttl_core::thread::BlockReason;
/// let why = BlockReason::new("reply to invoke").with_rank(3);
/// assert_eq!(why.what(), "reply to invoke");
/// assert_eq!(why.detail(), Some(("rank", 3)));
/// assert!(why.to_string().starts_with("reply to invoke (rank 3) at "));
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BlockReason {
    what: &'static str,
    detail: Option<(&'static str, u64)>,
    location: &'static Location<'static>,
}

impl BlockReason {
    /// A reason described by `what`, located at the caller (use
    /// `#[track_caller]` on wrappers so the user's call site is recorded).
    #[track_caller]
    #[inline]
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            detail: None,
            location: Location::caller(),
        }
    }

    /// Adds a labelled number, e.g. `("cell", 12)`.
    #[inline]
    pub fn with_detail(self, label: &'static str, value: u64) -> Self {
        Self {
            detail: Some((label, value)),
            ..self
        }
    }

    /// Adds the rank (node) the thread waits on.
    #[inline]
    pub fn with_rank(self, rank: u32) -> Self {
        self.with_detail("rank", u64::from(rank))
    }

    /// The description given to [`BlockReason::new`].
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The labelled number, if any.
    pub fn detail(&self) -> Option<(&'static str, u64)> {
        self.detail
    }

    /// Where the reason was created.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)?;
        if let Some((label, value)) = self.detail {
            write!(f, " ({label} {value})")?;
        }
        write!(f, " at {}", self.location)
    }
}

impl fmt::Debug for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockReason({self})")
    }
}

/// A thread that is blocked, as reported by
/// [`blocked_threads`](super::blocked_threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedThread {
    /// The thread.
    pub id: ThreadId,
    /// The name it was spawned with.
    pub name: &'static str,
    /// What it waits for.
    pub reason: BlockReason,
}

impl fmt::Display for BlockedThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread '{}' ({}) waits for {}",
            self.name, self.id, self.reason
        )
    }
}
