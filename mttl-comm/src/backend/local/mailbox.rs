//! The state a local job's endpoints share: one mailbox per rank and each
//! rank's standing (open, finished, lost).
//!
//! Waking without a lost wake-up: a rank checks for what it waits for
//! (a message, a peer's standing) while it holds its own mailbox's lock,
//! and parks on its condition variable, which releases that lock. Whoever
//! changes what it waits for does so first (appends a message under the
//! lock; stores a standing), then takes the lock to notify. So the waiter
//! either saw the change or was parked when notified.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::comm::{Message, Rank};

/// Where an endpoint stands in its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// In use.
    Open = 0,
    /// Left by `finish`.
    Finished = 1,
    /// Dropped without `finish`: its thread ended early or panicked.
    Lost = 2,
}

impl Standing {
    fn from_u8(v: u8) -> Standing {
        match v {
            0 => Standing::Open,
            1 => Standing::Finished,
            _ => Standing::Lost,
        }
    }
}

/// What one rank has been sent and not yet received, oldest first.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    /// Whole messages in the order they arrived (so per sender, in the
    /// order they were sent).
    pub(super) messages: VecDeque<Message>,
    /// Whether the owner is parked on the condition variable (a sender
    /// notifies only then).
    pub(super) parked: bool,
}

#[derive(Debug, Default)]
struct Mailbox {
    inbox: Mutex<Inbox>,
    wake: Condvar,
}

/// What every endpoint of one local job shares.
#[derive(Debug)]
pub(super) struct Job {
    mailboxes: Vec<Mailbox>,
    standings: Vec<AtomicU8>,
}

impl Job {
    /// A job of `size` ranks, all open, with empty mailboxes.
    pub(super) fn new(size: usize) -> Job {
        Job {
            mailboxes: (0..size).map(|_| Mailbox::default()).collect(),
            standings: (0..size).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// `rank`'s inbox, locked. The lock is never held while user code or
    /// anything that can panic runs, so a poisoned lock still holds a
    /// consistent queue.
    pub(super) fn lock(&self, rank: Rank) -> MutexGuard<'_, Inbox> {
        self.mailboxes[rank]
            .inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks the owner of `inbox` (`rank`) until notified or `timeout`
    /// passes (`None`: no limit).
    pub(super) fn park<'a>(
        &'a self,
        rank: Rank,
        mut inbox: MutexGuard<'a, Inbox>,
        timeout: Option<std::time::Duration>,
    ) -> MutexGuard<'a, Inbox> {
        let wake = &self.mailboxes[rank].wake;
        inbox.parked = true;
        let mut inbox = match timeout {
            Some(t) => {
                wake.wait_timeout(inbox, t)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => wake.wait(inbox).unwrap_or_else(PoisonError::into_inner),
        };
        inbox.parked = false;
        inbox
    }

    /// Appends `message` to `dest`'s inbox and wakes `dest` if it is parked.
    pub(super) fn deliver(&self, dest: Rank, message: Message) {
        let mut inbox = self.lock(dest);
        inbox.messages.push_back(message);
        let parked = inbox.parked;
        drop(inbox);
        if parked {
            self.mailboxes[dest].wake.notify_one();
        }
    }

    /// Where `rank` stands.
    pub(super) fn standing(&self, rank: Rank) -> Standing {
        Standing::from_u8(self.standings[rank].load(Ordering::SeqCst))
    }

    /// Records that `rank` left (finished or lost) and wakes every parked
    /// rank, so that one waiting for it learns at once.
    pub(super) fn leave(&self, rank: Rank, standing: Standing) {
        self.standings[rank].store(standing as u8, Ordering::SeqCst);
        for mailbox in &self.mailboxes {
            let _held = mailbox.inbox.lock().unwrap_or_else(PoisonError::into_inner);
            mailbox.wake.notify_all();
        }
    }
}
