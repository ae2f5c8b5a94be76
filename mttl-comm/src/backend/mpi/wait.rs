//! Spin-then-park waiting for the loops that poll MPI.
//!
//! MPI has no blocking call that waits for "a message from anyone, or a send
//! of mine completing, or a timeout", so every blocking primitive of the
//! backend polls. [`Backoff`] paces that polling:
//!
//! 1. For the first `MTTL_SPIN_US` it polls back to back, so a message that
//!    arrives soon is seen within one poll (the fast path of a ping-pong
//!    never leaves this phase).
//! 2. After that it parks: it sleeps 20 µs before the next poll, doubling the
//!    nap up to 1 ms, so an idle rank costs little CPU on an oversubscribed
//!    machine (CI runs 4 ranks on 2 cores).
//! 3. It never sleeps past the caller's deadline and says when it has passed.
//!
//! Between 1 and 2, a wait may spin on for a *learned* time, yielding the
//! CPU at every poll ([`LearnedSpin`]): a rank whose messages keep coming a
//! little after its spin is over (a stream paced by its sender, the next
//! window of a bandwidth test, the reply to a large message) learns how
//! long those waits last and spins through them, where a nap would make it
//! see each message up to a nap late. Yielding leaves the CPU to any other
//! process that wants it (CI runs 4 ranks on 2 cores), and a wait that
//! lasts longer than [`MAX_LEARNED_SPIN`] (an idle rank) unlearns it.
//!
//! A large send waits for the receiver to copy the message, not for an
//! event that may never come, so its spin is stretched by the time the copy
//! should take ([`transfer_time`]): napping mid-copy would delay whatever
//! the receiver does next (often its reply).
//!
//! The clock is read lazily and, while spinning, only every few polls,
//! because a clock read costs about as much as a poll.
//!
//! # Why the spin must outlast a nap
//!
//! A nap costs more than asked: timer slack plus waking an idle virtual CPU
//! can make a short sleep take several times its length. If a wait spins
//! for less than a nap really takes, a ping-pong that dozes once stays slow
//! for good: each reply reaches a peer that has already stopped spinning,
//! whose late answer in turn finds this rank parked, and round trips stay
//! thousands of times slower than with a spin long enough. So unless
//! `MTTL_SPIN_US` is set explicitly, [`spin_time`] raises the default spin
//! to twice the shortest nap measured at start-up.

use std::time::{Duration, Instant};

/// The first nap once spinning is over.
const FIRST_NAP: Duration = Duration::from_micros(20);
/// The longest nap: an idle rank polls at least this often.
const MAX_NAP: Duration = Duration::from_millis(1);
/// The most [`spin_time`] raises the spin to, however slow naps are.
const MAX_SPIN_FLOOR: Duration = Duration::from_millis(1);
/// The longest a wait spins on, yielding, past the configured spin.
///
/// A stream of very large messages (several MiB each, a few per window of a
/// bandwidth test) has its receiver wait some milliseconds between
/// windows; a limit below that makes it unlearn and nap, and see each
/// window up to a nap late. A limit this long keeps such streams spinning
/// without slowing oversubscribed jobs (more ranks than cores).
pub(super) const MAX_LEARNED_SPIN: Duration = Duration::from_millis(20);
/// While spinning, the clock is read once per this many polls.
const POLLS_PER_CLOCK_READ: u32 = 16;
/// A bandwidth every transport mttl runs on should reach (shared memory
/// copies many times faster): [`transfer_time`] estimates from it.
const ASSUMED_BANDWIDTH: u64 = 1 << 30;

/// The spin time for this process: `configured`, raised to twice the real
/// duration of the shortest of a few first naps unless `explicit` (the user
/// set `MTTL_SPIN_US`), and never above [`MAX_SPIN_FLOOR`] by that raise.
pub(super) fn spin_time(configured: Duration, explicit: bool) -> Duration {
    if explicit {
        return configured;
    }
    let shortest_nap = (0..5)
        .map(|_| {
            let start = Instant::now();
            std::thread::sleep(FIRST_NAP);
            start.elapsed()
        })
        .min()
        .unwrap_or(FIRST_NAP);
    configured.max((shortest_nap * 2).min(MAX_SPIN_FLOOR))
}

/// How long a send of `len` bytes should take at [`ASSUMED_BANDWIDTH`]: a
/// sender waiting on a transfer in progress spins about this long more
/// before it parks, so its naps do not stall the exchange.
pub(super) fn transfer_time(len: usize) -> Duration {
    Duration::from_nanos((len as u64).saturating_mul(1_000_000_000) / ASSUMED_BANDWIDTH)
}

/// How long this rank's waits have lately lasted, past the configured spin:
/// how long the next one spins on, yielding, before it parks.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LearnedSpin(Duration);

impl LearnedSpin {
    /// The extra spin for the next wait.
    #[inline]
    pub(super) fn get(self) -> Duration {
        self.0
    }

    /// Learns from a wait with configured spin `spin` that lasted
    /// `waited` (`None`: too short to have read the clock): one that ended
    /// within `spin` teaches nothing; one that ended within
    /// [`MAX_LEARNED_SPIN`] sets the extra spin to cover it with a quarter
    /// to spare; a longer one (an idle rank) clears it.
    pub(super) fn learn(&mut self, spin: Duration, waited: Option<Duration>) {
        let Some(waited) = waited else {
            return;
        };
        if waited <= spin {
            return;
        }
        self.0 = if waited <= MAX_LEARNED_SPIN {
            (waited + waited / 4)
                .min(MAX_LEARNED_SPIN)
                .saturating_sub(spin)
        } else {
            Duration::ZERO
        };
    }
}

/// Paces one blocking wait: call [`idle`](Backoff::idle) after each poll that
/// found nothing, [`progressed`](Backoff::progressed) after one that found
/// something other than what the wait is for.
#[derive(Debug)]
pub(super) struct Backoff {
    spin: Duration,
    /// Spun on past `spin`, yielding the CPU at every poll.
    learned: Duration,
    timeout: Option<Duration>,
    /// When the wait began (read lazily), for the timeout.
    started: Option<Instant>,
    /// When the current spinning phase began (read lazily).
    spin_started: Option<Instant>,
    /// Zero while spinning; the next nap once parked.
    nap: Duration,
    misses: u32,
}

impl Backoff {
    /// A wait that spins for `spin`, then parks, and gives up after
    /// `timeout` (`None`: never).
    #[inline]
    pub(super) fn new(spin: Duration, timeout: Option<Duration>) -> Backoff {
        Backoff {
            spin,
            learned: Duration::ZERO,
            timeout,
            started: None,
            spin_started: None,
            nap: Duration::ZERO,
            misses: 0,
        }
    }

    /// The same wait, spinning on for `learned` past its spin, yielding the
    /// CPU at every poll, before it parks.
    #[inline]
    pub(super) fn with_learned(mut self, learned: LearnedSpin) -> Backoff {
        self.learned = learned.get();
        self
    }

    /// How long the wait has lasted, if it has read the clock (it does
    /// within its first few polls).
    pub(super) fn waited(&self) -> Option<Duration> {
        self.started.map(|started| started.elapsed())
    }

    /// Whether the spinning phase is over: the caller may do housekeeping
    /// (freeing completed sends) without slowing a fast path.
    #[inline]
    pub(super) fn parked(&self) -> bool {
        !self.nap.is_zero()
    }

    /// After a poll that found nothing: returns `false` if the timeout has
    /// passed, otherwise waits as the phase asks (not at all while spinning,
    /// a nap once parked) and returns `true`.
    pub(super) fn idle(&mut self) -> bool {
        self.misses = self.misses.wrapping_add(1);
        if self.nap.is_zero() {
            // Spinning: read the clock every few misses only, and at the
            // first miss only when a timeout needs it.
            let first_with_timeout = self.misses == 1 && self.timeout.is_some();
            if self.misses % POLLS_PER_CLOCK_READ != 0 && !first_with_timeout {
                return true;
            }
            let now = Instant::now();
            if self.timed_out(now) {
                return false;
            }
            let spun = now - *self.spin_started.get_or_insert(now);
            if spun < self.spin {
                return true;
            }
            if spun < self.spin + self.learned {
                // Spinning on: a yield per poll, and the clock read at
                // the next one (a yield costs far more than the read).
                std::thread::yield_now();
                self.misses = POLLS_PER_CLOCK_READ - 1;
                return true;
            }
            self.nap = FIRST_NAP;
        }
        let now = Instant::now();
        let mut nap = self.nap;
        if let Some(timeout) = self.timeout {
            let elapsed = now - *self.started.get_or_insert(now);
            match timeout.checked_sub(elapsed) {
                Some(left) if !left.is_zero() => nap = nap.min(left),
                _ => return false,
            }
        }
        std::thread::sleep(nap);
        self.nap = (self.nap * 2).min(MAX_NAP);
        true
    }

    /// After a poll that found traffic other than what the wait is for:
    /// spin again from now, as traffic tends to come in bursts. Returns
    /// `false` if the timeout has passed.
    pub(super) fn progressed(&mut self) -> bool {
        self.nap = Duration::ZERO;
        self.spin_started = None;
        self.misses = 0;
        self.timeout.is_none() || !self.timed_out(Instant::now())
    }

    /// Whether the timeout has passed at `now` (which starts the clock if
    /// this is the first reading).
    #[inline]
    fn timed_out(&mut self, now: Instant) -> bool {
        let started = *self.started.get_or_insert(now);
        self.timeout.is_some_and(|t| now - started >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long any wait of these tests may take (they ask for at most
    /// tens of milliseconds): a wait past it never ends.
    const DEADLINE: Duration = Duration::from_secs(5);

    fn before_deadline(start: Instant, what: &str) {
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: still going after {DEADLINE:?}"
        );
    }

    #[test]
    fn zero_timeout_gives_up_at_the_first_miss() {
        let mut backoff = Backoff::new(Duration::from_micros(50), Some(Duration::ZERO));
        assert!(!backoff.idle());
    }

    #[test]
    fn spins_then_parks_then_times_out() {
        let mut backoff = Backoff::new(Duration::from_micros(200), Some(Duration::from_millis(20)));
        let start = Instant::now();
        let mut misses = 0u32;
        while backoff.idle() {
            before_deadline(start, "timing out");
            misses += 1;
        }
        let took = start.elapsed();
        assert!(backoff.parked());
        assert!(
            took >= Duration::from_millis(20),
            "gave up early, after {took:?}"
        );
        assert!(took < Duration::from_millis(500), "overslept: {took:?}");
        // Parked waits nap, so far fewer polls happen than in 20 ms of spinning.
        assert!(misses > POLLS_PER_CLOCK_READ, "never spun: {misses} polls");
    }

    #[test]
    fn spin_outlasts_a_nap_unless_set_explicitly() {
        let configured = Duration::from_micros(1);
        assert_eq!(spin_time(configured, true), configured);
        let raised = spin_time(configured, false);
        assert!(
            raised >= FIRST_NAP * 2 && raised <= MAX_SPIN_FLOOR,
            "{raised:?}"
        );
    }

    #[test]
    fn progress_restarts_the_spin_but_not_the_timeout() {
        // A timeout far past the spin, so that a loaded machine's pauses
        // between two looks do not carry the wait past it before parking.
        let mut backoff = Backoff::new(Duration::from_millis(2), Some(Duration::from_millis(500)));
        let start = Instant::now();
        while !backoff.parked() {
            before_deadline(start, "parking");
            assert!(backoff.idle());
        }
        assert!(backoff.progressed());
        assert!(!backoff.parked(), "progress must restart the spin");
        while backoff.idle() {
            before_deadline(start, "timing out");
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(500),
            "gave up early, after {took:?}"
        );
        assert!(!backoff.progressed(), "the timeout outlives progress");
    }

    #[test]
    fn transfer_time_follows_the_assumed_bandwidth() {
        assert_eq!(transfer_time(0), Duration::ZERO);
        assert_eq!(transfer_time(1 << 30), Duration::from_secs(1));
        assert_eq!(transfer_time(1 << 20), Duration::from_nanos(976_562));
    }

    #[test]
    fn learned_spin_covers_short_waits_and_forgets_long_ones() {
        let spin = Duration::from_micros(100);
        let mut learned = LearnedSpin::default();
        learned.learn(spin, None);
        learned.learn(spin, Some(Duration::from_micros(80)));
        assert_eq!(learned.get(), Duration::ZERO, "short waits teach nothing");
        learned.learn(spin, Some(Duration::from_micros(800)));
        assert_eq!(learned.get(), Duration::from_micros(900));
        learned.learn(spin, Some(Duration::from_micros(50)));
        assert_eq!(
            learned.get(),
            Duration::from_micros(900),
            "kept across fast waits"
        );
        learned.learn(spin, Some(MAX_LEARNED_SPIN - Duration::from_micros(1)));
        assert_eq!(learned.get(), MAX_LEARNED_SPIN - spin);
        learned.learn(spin, Some(MAX_LEARNED_SPIN * 3));
        assert_eq!(learned.get(), Duration::ZERO, "an idle rank unlearns");
    }

    #[test]
    fn learned_spin_delays_the_first_nap() {
        let learned = {
            let mut l = LearnedSpin::default();
            l.learn(Duration::ZERO, Some(Duration::from_millis(2)));
            l
        };
        let mut backoff = Backoff::new(Duration::ZERO, None).with_learned(learned);
        let start = Instant::now();
        while !backoff.parked() {
            before_deadline(start, "parking");
            assert!(backoff.idle());
        }
        assert!(
            start.elapsed() >= learned.get(),
            "parked after {:?}, before the learned {:?}",
            start.elapsed(),
            learned.get()
        );
        assert!(backoff.waited().is_some());
    }

    #[test]
    fn without_timeout_never_gives_up() {
        let mut backoff = Backoff::new(Duration::ZERO, None);
        for _ in 0..POLLS_PER_CLOCK_READ + 10 {
            assert!(backoff.idle());
        }
        assert_eq!(backoff.nap, MAX_NAP);
    }
}
