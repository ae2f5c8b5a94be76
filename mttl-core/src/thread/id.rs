//! [`ThreadId`]: names a thread on its OS thread's scheduler (a slot index
//! and the slot's generation, so the id of a finished thread is stale).

use std::fmt;
use std::marker::PhantomData;

/// Identifies an mttl thread on its OS thread. Ids of finished threads are
/// stale: operations on them do nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadId {
    index: u32,
    generation: u32,
    /// Ids belong to one OS thread's scheduler.
    _not_send: PhantomData<*const ()>,
}

impl ThreadId {
    /// The id reported for code running on the native stack (never a
    /// thread's: its generation is never issued).
    pub(super) fn native() -> Self {
        Self::new(u32::MAX, u32::MAX)
    }

    #[inline]
    pub(super) fn new(index: u32, generation: u32) -> Self {
        Self {
            index,
            generation,
            _not_send: PhantomData,
        }
    }

    #[inline]
    pub(super) fn index(self) -> u32 {
        self.index
    }

    #[inline]
    pub(super) fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThreadId({}.{})", self.index, self.generation)
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.index, self.generation)
    }
}
