//! NPB problem classes: the official size and verification tables of CG and
//! IS, and the Mop/s formulas each benchmark reports.
//!
//! Every number here is NPB 3.4's (unchanged since 2.3 for these classes);
//! none is derived from this crate's own output. CG supports classes S to D,
//! IS classes S to C (class D of IS needs 64-bit keys).

use std::fmt;
use std::str::FromStr;

/// An NPB problem class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Sample size, for quick tests.
    S,
    /// Workstation size.
    W,
    /// Standard test size A.
    A,
    /// Standard test size B.
    B,
    /// Standard test size C.
    C,
    /// Large test size D (CG only).
    D,
}

impl Class {
    /// Every class, smallest first.
    pub const ALL: [Class; 6] = [Class::S, Class::W, Class::A, Class::B, Class::C, Class::D];

    /// The class letter.
    pub fn letter(self) -> char {
        match self {
            Class::S => 'S',
            Class::W => 'W',
            Class::A => 'A',
            Class::B => 'B',
            Class::C => 'C',
            Class::D => 'D',
        }
    }

    /// CG's parameters for this class.
    pub fn cg(self) -> CgParams {
        let (na, nonzer, niter, shift, zeta_verify) = match self {
            Class::S => (1400, 7, 15, 10.0, 8.597_177_507_864_8),
            Class::W => (7000, 8, 15, 12.0, 10.362_595_087_124),
            Class::A => (14_000, 11, 15, 20.0, 17.130_235_054_029),
            Class::B => (75_000, 13, 75, 60.0, 22.712_745_482_631),
            Class::C => (150_000, 15, 75, 110.0, 28.973_605_592_845),
            Class::D => (1_500_000, 21, 100, 500.0, 52.514_532_105_794),
        };
        CgParams {
            class: self,
            na,
            nonzer,
            niter,
            shift,
            rcond: 0.1,
            zeta_verify,
        }
    }

    /// IS's parameters for this class, or an error for class D.
    pub fn is(self) -> Result<IsParams, ClassError> {
        let (total_keys_log2, max_key_log2, num_buckets_log2, test_index, test_rank) = match self {
            Class::S => (
                16,
                11,
                9,
                [48_427, 17_148, 23_627, 62_548, 4_431],
                [0, 18, 346, 64_917, 65_463],
            ),
            Class::W => (
                20,
                16,
                10,
                [357_773, 934_767, 875_723, 898_999, 404_505],
                [1_249, 11_698, 1_039_987, 1_043_896, 1_048_018],
            ),
            Class::A => (
                23,
                19,
                10,
                [2_112_377, 662_041, 5_336_171, 3_642_833, 4_250_760],
                [104, 17_523, 123_928, 8_288_932, 8_388_264],
            ),
            Class::B => (
                25,
                21,
                10,
                [41_869, 812_306, 5_102_857, 18_232_239, 26_860_214],
                [33_422_937, 10_244, 59_149, 33_135_281, 99],
            ),
            Class::C => (
                27,
                23,
                10,
                [44_172_927, 72_999_161, 74_326_391, 129_606_274, 21_736_814],
                [61_147, 882_988, 266_290, 133_997_595, 133_525_895],
            ),
            Class::D => {
                return Err(ClassError::Unsupported {
                    benchmark: "IS",
                    class: self,
                })
            }
        };
        Ok(IsParams {
            class: self,
            total_keys_log2,
            max_key_log2,
            num_buckets_log2,
            test_index,
            test_rank,
        })
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

impl FromStr for Class {
    type Err = ClassError;

    /// Parses one class letter, `S`, `W`, `A`, `B`, `C` or `D` (either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "S" | "s" => Ok(Class::S),
            "W" | "w" => Ok(Class::W),
            "A" | "a" => Ok(Class::A),
            "B" | "b" => Ok(Class::B),
            "C" | "c" => Ok(Class::C),
            "D" | "d" => Ok(Class::D),
            _ => Err(ClassError::Unknown(s.to_owned())),
        }
    }
}

/// Why a class cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassError {
    /// The text is not a class letter.
    Unknown(String),
    /// The benchmark has no tables for this class.
    Unsupported {
        /// `"CG"` or `"IS"`.
        benchmark: &'static str,
        /// The class asked for.
        class: Class,
    },
}

impl fmt::Display for ClassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassError::Unknown(s) => write!(
                f,
                "unknown NPB class {s:?}: expected one of S, W, A, B, C, D"
            ),
            ClassError::Unsupported { benchmark, class } => write!(
                f,
                "{benchmark} class {class} is not supported here: use S, W, A, B or C"
            ),
        }
    }
}

impl std::error::Error for ClassError {}

/// CG's size and verification parameters for one class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgParams {
    /// The class these belong to.
    pub class: Class,
    /// Order of the matrix.
    pub na: usize,
    /// Nonzeros per random sparse vector of `makea`.
    pub nonzer: usize,
    /// Timed outer (inverse power) iterations.
    pub niter: usize,
    /// Eigenvalue shift.
    pub shift: f64,
    /// Smallest eigenvalue bound (0.1 for every class).
    pub rcond: f64,
    /// The official final zeta.
    pub zeta_verify: f64,
}

/// CG's verification tolerance on the relative error of zeta.
pub const CG_EPSILON: f64 = 1e-10;

/// Inner CG iterations per outer iteration (`cgitmax`).
pub const CG_ITMAX: usize = 25;

impl CgParams {
    /// Whether `zeta` verifies: `|zeta − zeta_verify| / zeta_verify ≤ 1e-10`
    /// (a NaN never verifies).
    pub fn verify(&self, zeta: f64) -> bool {
        let err = ((zeta - self.zeta_verify) / self.zeta_verify).abs();
        err <= CG_EPSILON
    }

    /// Relative error of `zeta` against the official value.
    pub fn error(&self, zeta: f64) -> f64 {
        ((zeta - self.zeta_verify) / self.zeta_verify).abs()
    }

    /// NPB's Mop/s for a timed loop of `seconds`:
    /// `2 · niter · na · (3 + nz(nz+1) + 25 · (5 + nz(nz+1)) + 3) / t / 1e6`.
    pub fn mops(&self, seconds: f64) -> f64 {
        if seconds <= 0.0 {
            return 0.0;
        }
        let nz = self.nonzer as f64;
        let per_row = 3.0 + nz * (nz + 1.0) + 25.0 * (5.0 + nz * (nz + 1.0)) + 3.0;
        1e-6 * 2.0 * self.niter as f64 * self.na as f64 * per_row / seconds
    }
}

/// Timed ranking iterations of IS (`MAX_ITERATIONS`).
pub const IS_ITERATIONS: usize = 10;

/// Test keys checked per iteration (`TEST_ARRAY_SIZE`).
pub const IS_TEST_KEYS: usize = 5;

/// IS's size and verification parameters for one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsParams {
    /// The class these belong to.
    pub class: Class,
    /// log2 of the total number of keys.
    pub total_keys_log2: u32,
    /// log2 of the key range: keys lie in `[0, 2^max_key_log2)`.
    pub max_key_log2: u32,
    /// log2 of the number of buckets.
    pub num_buckets_log2: u32,
    /// Global positions of the keys whose ranks are checked.
    pub test_index: [i64; IS_TEST_KEYS],
    /// Their official ranks, before the per-iteration adjustment.
    pub test_rank: [i64; IS_TEST_KEYS],
}

impl IsParams {
    /// Total number of keys.
    pub fn total_keys(&self) -> usize {
        1 << self.total_keys_log2
    }

    /// Exclusive upper bound of the key values.
    pub fn max_key(&self) -> i32 {
        1 << self.max_key_log2
    }

    /// Number of buckets.
    pub fn num_buckets(&self) -> usize {
        1 << self.num_buckets_log2
    }

    /// The rank test key `entry` (0-based) must have after ranking in
    /// `iteration` (1-based): the official rank shifted as NPB's table says
    /// for this class.
    pub fn expected_rank(&self, entry: usize, iteration: usize) -> i64 {
        let it = iteration as i64;
        let base = self.test_rank[entry];
        match self.class {
            Class::S | Class::C => {
                if entry <= 2 {
                    base + it
                } else {
                    base - it
                }
            }
            Class::W => {
                if entry < 2 {
                    base + (it - 2)
                } else {
                    base - it
                }
            }
            Class::A => {
                if entry <= 2 {
                    base + (it - 1)
                } else {
                    base - (it - 1)
                }
            }
            Class::B => {
                if matches!(entry, 1 | 2 | 4) {
                    base + it
                } else {
                    base - it
                }
            }
            // `Class::is` never builds parameters for class D.
            Class::D => unreachable!("IS has no class D parameters"),
        }
    }

    /// NPB's Mop/s for a timed loop of `seconds`: `10 · total_keys / t / 1e6`.
    pub fn mops(&self, seconds: f64) -> f64 {
        if seconds <= 0.0 {
            return 0.0;
        }
        IS_ITERATIONS as f64 * self.total_keys() as f64 / seconds / 1e6
    }

    /// The number of passed tests a successful run counts over all `nprocs`
    /// processes: 5 per iteration plus one full verification per process.
    pub fn passes_required(&self, nprocs: usize) -> usize {
        IS_TEST_KEYS * IS_ITERATIONS + nprocs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_letter_in_either_case() {
        for c in Class::ALL {
            assert_eq!(c.letter().to_string().parse::<Class>(), Ok(c));
            assert_eq!(
                c.letter().to_ascii_lowercase().to_string().parse::<Class>(),
                Ok(c)
            );
        }
    }

    #[test]
    fn rejects_other_text_with_a_readable_error() {
        for bad in ["", "E", "AA", "1", "class A"] {
            let err = bad.parse::<Class>().unwrap_err();
            assert_eq!(err, ClassError::Unknown(bad.to_owned()));
            assert!(err.to_string().contains("expected one of S, W, A, B, C, D"));
        }
        let err = Class::D.is().unwrap_err();
        assert_eq!(
            err.to_string(),
            "IS class D is not supported here: use S, W, A, B or C"
        );
    }

    #[test]
    fn cg_tables_are_npb_3_4() {
        let a = Class::A.cg();
        assert_eq!((a.na, a.nonzer, a.niter, a.shift), (14_000, 11, 15, 20.0));
        assert_eq!(a.zeta_verify, 17.130235054029);
        assert!(a.verify(17.130235054029 * (1.0 + 0.9e-10)));
        assert!(!a.verify(17.130235054029 * (1.0 + 1.1e-10)));
        assert!(!a.verify(f64::NAN));
        let d = Class::D.cg();
        assert_eq!(
            (d.na, d.nonzer, d.niter, d.shift),
            (1_500_000, 21, 100, 500.0)
        );
    }

    #[test]
    fn cg_mops_is_npb_formula() {
        // Class A: per-row operation count 3 + 132 + 25 * 137 + 3 = 3563.
        let a = Class::A.cg();
        let expected = 2.0 * 15.0 * 14_000.0 * 3563.0 / 2.0 / 1e6;
        assert!((a.mops(2.0) - expected).abs() < 1e-9);
        assert_eq!(a.mops(0.0), 0.0);
    }

    #[test]
    fn is_tables_and_rank_adjustments_are_npb_3_4() {
        let s = Class::S.is().unwrap();
        assert_eq!(
            (s.total_keys(), s.max_key(), s.num_buckets()),
            (65_536, 2048, 512)
        );
        assert_eq!(
            (0..5).map(|e| s.expected_rank(e, 3)).collect::<Vec<_>>(),
            [3, 21, 349, 64_914, 65_460]
        );
        let w = Class::W.is().unwrap();
        assert_eq!(w.expected_rank(0, 1), 1248);
        assert_eq!(w.expected_rank(2, 1), 1_039_986);
        let a = Class::A.is().unwrap();
        assert_eq!(a.expected_rank(0, 1), 104);
        assert_eq!(a.expected_rank(3, 10), 8_288_923);
        let b = Class::B.is().unwrap();
        assert_eq!(
            (0..5).map(|e| b.expected_rank(e, 2)).collect::<Vec<_>>(),
            [33_422_935, 10_246, 59_151, 33_135_279, 101]
        );
        let c = Class::C.is().unwrap();
        assert_eq!(c.total_keys(), 1 << 27);
        assert_eq!(c.expected_rank(4, 1), 133_525_894);
        assert_eq!(s.mops(1.0), 0.65536);
        assert_eq!(s.passes_required(4), 54);
    }
}
