//! NPB's pseudo-random number generator, in the exact form verification needs.
//!
//! The generator is the linear congruential sequence
//! `x_{k+1} = a · x_k mod 2^46` with the value `x_k · 2^-46` in (0, 1),
//! multiplier `a = 5^13` ([`MULTIPLIER`]) and seed 314159265 ([`SEED`]).
//! NPB computes it in double precision by splitting operands into 23-bit
//! halves (`randlc`, `vranlc` in `common/randdp.f`); the same sequence in
//! integers is a wrapping 64-bit multiply masked to 46 bits, and because every
//! state is below 2^46 its conversion to `f64` is exact. The two forms are
//! therefore bit-identical; [`Randlc`] uses integers, [`randlc`] and
//! [`vranlc`] keep NPB's floating-point signature for code that wants it.
//!
//! Invariants: a state is always in `[0, 2^46)` and, for the sequences NPB
//! uses (odd seed, odd multiplier), odd; the multiplier is below 2^46.
//!
//! Jumping ahead by `n` draws multiplies the state by `a^n mod 2^46`
//! ([`pow_mod46`]); [`find_my_seed`] uses that for IS, where each process
//! starts at its own offset in one global sequence.

/// NPB's multiplier, 5^13.
pub const MULTIPLIER: u64 = 1_220_703_125;

/// NPB's seed for CG and IS.
pub const SEED: u64 = 314_159_265;

/// 2^46 − 1: states live modulo 2^46.
const MASK46: u64 = (1 << 46) - 1;

/// 2^-46, exact in `f64`.
const R46: f64 = 1.0 / (1u64 << 46) as f64;

/// `a · b mod 2^46`.
///
/// The wrapping product is `a · b mod 2^64`, and 2^46 divides 2^64, so masking
/// it gives the product modulo 2^46 for any operands.
#[inline(always)]
pub fn mul_mod46(a: u64, b: u64) -> u64 {
    a.wrapping_mul(b) & MASK46
}

/// `a^n mod 2^46` by binary powering.
pub fn pow_mod46(a: u64, mut n: u64) -> u64 {
    let mut base = a & MASK46;
    let mut acc = 1;
    while n > 0 {
        if n & 1 == 1 {
            acc = mul_mod46(acc, base);
        }
        base = mul_mod46(base, base);
        n >>= 1;
    }
    acc
}

/// One NPB random stream: a state and a multiplier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Randlc {
    state: u64,
    mult: u64,
}

impl Randlc {
    /// A stream starting at `seed` with NPB's multiplier.
    pub fn new(seed: u64) -> Self {
        Self::with_multiplier(seed, MULTIPLIER)
    }

    /// A stream starting at `seed` with multiplier `mult` (both taken mod 2^46).
    pub fn with_multiplier(seed: u64, mult: u64) -> Self {
        Self {
            state: seed & MASK46,
            mult: mult & MASK46,
        }
    }

    /// The current state `x_k` (the integer behind the last value drawn).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// Advances once and returns the new state.
    #[inline(always)]
    pub fn next_state(&mut self) -> u64 {
        self.state = mul_mod46(self.state, self.mult);
        self.state
    }

    /// Advances once and returns `x · 2^-46` (NPB's `randlc`).
    #[inline(always)]
    pub fn next_f64(&mut self) -> f64 {
        self.next_state() as f64 * R46
    }

    /// Fills `out` with the next `out.len()` values (NPB's `vranlc`).
    pub fn fill(&mut self, out: &mut [f64]) {
        for y in out {
            *y = self.next_f64();
        }
    }

    /// Jumps ahead by `n` draws in O(log n) multiplications.
    pub fn skip(&mut self, n: u64) {
        self.state = mul_mod46(self.state, pow_mod46(self.mult, n));
    }
}

/// NPB's double-precision `randlc`: advances `*x` once with multiplier `a`
/// and returns the new value in (0, 1).
///
/// `*x` and `a` must be integers in `[1, 2^46)` held in `f64`. This is the
/// 23-bit-split arithmetic of the reference, written out so tests can show
/// that [`Randlc`] reproduces it bit for bit.
pub fn randlc(x: &mut f64, a: f64) -> f64 {
    const T23: f64 = (1u64 << 23) as f64;
    const R23: f64 = 1.0 / T23;
    const T46: f64 = T23 * T23;

    // a = 2^23 · a1 + a2 and x = 2^23 · x1 + x2.
    let a1 = (R23 * a).trunc();
    let a2 = a - T23 * a1;
    let x1 = (R23 * *x).trunc();
    let x2 = *x - T23 * x1;

    // z = a1 · x2 + a2 · x1 (mod 2^23), then x = 2^23 · z + a2 · x2 (mod 2^46).
    let t1 = a1 * x2 + a2 * x1;
    let t2 = (R23 * t1).trunc();
    let z = t1 - T23 * t2;
    let t3 = T23 * z + a2 * x2;
    let t4 = (R46 * t3).trunc();
    *x = t3 - T46 * t4;
    R46 * *x
}

/// NPB's `vranlc`: fills `y` with the next `y.len()` values of the stream in
/// `*x` (multiplier `a`), leaving `*x` at the last state.
pub fn vranlc(x: &mut f64, a: f64, y: &mut [f64]) {
    for v in y {
        *v = randlc(x, a);
    }
}

/// The starting state of process `rank` of `nprocs` when `total_draws` draws
/// of one sequence (seed `seed`, multiplier `mult`) are split evenly between
/// the processes in rank order (IS's `find_my_seed`).
///
/// The reference raises `mult` to `2^m`, where `m = floor(log2(total_draws /
/// nprocs))`, then to the power `rank`; for the power-of-two sizes IS uses that
/// is the jump `rank · total_draws / nprocs`.
pub fn find_my_seed(rank: u64, nprocs: u64, total_draws: u64, seed: u64, mult: u64) -> u64 {
    let per_rank = total_draws / nprocs.max(1);
    let log2 = if per_rank > 1 { per_rank.ilog2() } else { 0 };
    let an = (0..log2).fold(mult & MASK46, |t, _| mul_mod46(t, t));
    mul_mod46(seed, pow_mod46(an, rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FACTS.md: the k-th state from seed 314159265.
    const STATES: [(u64, u64); 9] = [
        (1, 55_909_509_111_989),
        (2, 61_155_031_930_969),
        (3, 45_573_031_421_645),
        (4, 55_279_057_169_489),
        (5, 1_250_169_187_877),
        (10, 34_383_163_428_281),
        (100, 54_040_635_609_297),
        (1_000_000, 50_447_193_586_593),
        (2_000_000, 3_692_534_875_809),
    ];

    /// FACTS.md: the k-th value from seed 314159265.
    #[expect(
        clippy::excessive_precision,
        reason = "the digits as the reference prints them"
    )]
    const VALUES: [(u64, f64); 5] = [
        (1, 0.794_521_911_188_738_27),
        (2, 0.869_065_273_874_539_91),
        (3, 0.647_631_728_464_332_92),
        (4, 0.785_562_650_228_953_88),
        (5, 0.017_765_972_698_342_125),
    ];

    #[test]
    fn sequential_states_match_the_reference_vectors() {
        let mut g = Randlc::new(SEED);
        let mut k = 0;
        for &(target, state) in &STATES {
            while k < target {
                g.next_state();
                k += 1;
            }
            assert_eq!(g.state(), state, "state after {k} draws");
        }
    }

    #[test]
    fn values_match_the_reference_vectors() {
        let mut g = Randlc::new(SEED);
        for &(k, value) in &VALUES {
            assert_eq!(g.next_f64(), value, "value {k}");
        }
    }

    #[test]
    fn skipping_matches_drawing_for_every_reference_vector() {
        for &(k, state) in &STATES {
            let mut g = Randlc::new(SEED);
            g.skip(k);
            assert_eq!(g.state(), state, "skip({k})");
            assert_eq!(mul_mod46(SEED, pow_mod46(MULTIPLIER, k)), state);
        }
    }

    #[test]
    fn floating_point_randlc_matches_the_reference_vectors() {
        let mut x = SEED as f64;
        for k in 1..=5u64 {
            let v = randlc(&mut x, MULTIPLIER as f64);
            assert_eq!(v, VALUES[k as usize - 1].1);
            assert_eq!(x as u64, STATES[k as usize - 1].1);
        }
        let mut x = SEED as f64;
        let mut y = vec![0.0; 100];
        vranlc(&mut x, MULTIPLIER as f64, &mut y);
        assert_eq!(x as u64, 54_040_635_609_297);
        assert_eq!(y[9], 34_383_163_428_281.0 * R46);
    }

    #[test]
    fn integer_and_floating_point_forms_are_bit_identical() {
        // Several seeds and multipliers, including the squared multipliers
        // find_my_seed builds.
        let mults = [
            MULTIPLIER,
            pow_mod46(MULTIPLIER, 2),
            pow_mod46(MULTIPLIER, 1 << 20),
        ];
        for &mult in &mults {
            for &seed in &[SEED, 1, 12_345_678_901, (1 << 46) - 1] {
                let mut g = Randlc::with_multiplier(seed, mult);
                let mut x = seed as f64;
                for _ in 0..20_000 {
                    let vf = randlc(&mut x, mult as f64);
                    let vi = g.next_f64();
                    assert_eq!(vf.to_bits(), vi.to_bits());
                    assert_eq!(x as u64, g.state());
                }
            }
        }
    }

    #[test]
    fn fill_is_vranlc() {
        let mut g = Randlc::new(SEED);
        let mut a = vec![0.0; 1000];
        g.fill(&mut a);
        let mut x = SEED as f64;
        let mut b = vec![0.0; 1000];
        vranlc(&mut x, MULTIPLIER as f64, &mut b);
        assert_eq!(a, b);
        assert_eq!(g.state(), x as u64);
    }

    #[test]
    fn find_my_seed_starts_each_rank_at_its_share_of_the_sequence() {
        let total = 4 * (1u64 << 16);
        for nprocs in [1u64, 2, 4, 8] {
            for rank in 0..nprocs {
                let seed = find_my_seed(rank, nprocs, total, SEED, MULTIPLIER);
                let mut g = Randlc::new(SEED);
                g.skip(rank * total / nprocs);
                assert_eq!(seed, g.state(), "rank {rank} of {nprocs}");
            }
        }
        assert_eq!(find_my_seed(0, 4, total, SEED, MULTIPLIER), SEED);
    }
}
