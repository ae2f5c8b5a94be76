//! How many ranks each kernel runs on: one rule for `npb`, whether it
//! launches the job itself or runs inside one started by `mttlrun`,
//! `mpirun` or `srun`, and for both variants.
//!
//! Every kernel runs on a power of two of ranks (NPB's rule for CG and IS:
//! CG's process grid halves its rows and columns, IS's buckets are dealt
//! evenly), from 1 to its class's limit:
//!
//! - IS: NPB 3.4's `MAX_PROCS`, 128 for class S (its 2^16 keys) and 1024
//!   for the larger classes. Past them NPB's receive-buffer sizes
//!   (`SIZE_OF_BUFFERS`) are not validated, so a run could overflow them.
//! - CG: 1024 for every class. NPB's CG itself only needs the grid's
//!   columns to fit the matrix order (class S's 1400 allows far more); the
//!   cap is IS's largest, so that one job size runs both kernels of any
//!   class but IS class S.
//!
//! The launcher (`mttlrun`, self-launch) has no rank limit of its own: a TCP
//! job is bounded by the file descriptors its ranks may open, which it
//! checks at start.

use std::fmt;

use super::report::Kernel;
use crate::npb::Class;

/// The most ranks CG runs on, of any class.
pub const CG_MAX_RANKS: usize = 1024;

/// The rank counts a kernel of a class runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankLimit {
    /// The kernel.
    pub kernel: Kernel,
    /// The class.
    pub class: Class,
    /// The largest count (a power of two).
    pub max: usize,
}

impl RankLimit {
    /// The limit of `kernel` for `class`.
    pub fn of(kernel: Kernel, class: Class) -> RankLimit {
        let max = match (kernel, class) {
            (Kernel::Is, Class::S) => 128,
            (Kernel::Is, _) => 1024,
            (Kernel::Cg, _) => CG_MAX_RANKS,
        };
        RankLimit { kernel, class, max }
    }

    /// Why the limit is what it is, as the refusal says it.
    pub fn reason(&self) -> &'static str {
        match (self.kernel, self.class) {
            (Kernel::Is, Class::S) => "NPB's MAX_PROCS for IS class S",
            (Kernel::Is, _) => "NPB's MAX_PROCS for IS",
            (Kernel::Cg, _) => "IS's largest, so one job size runs both kernels",
        }
    }

    /// Checks that `ranks` is a power of two within the limit.
    pub fn check(&self, ranks: usize) -> Result<(), TooManyRanks> {
        if ranks.is_power_of_two() && ranks <= self.max {
            Ok(())
        } else {
            Err(TooManyRanks {
                limit: *self,
                asked: ranks,
            })
        }
    }
}

/// A job whose rank count a kernel does not run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub struct TooManyRanks {
    /// The limit broken.
    pub limit: RankLimit,
    /// The rank count asked for.
    pub asked: usize,
}

impl fmt::Display for TooManyRanks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RankLimit { kernel, class, max } = self.limit;
        let name = kernel.name().to_lowercase();
        write!(
            f,
            "npb {name} --class {class} runs on a power of two of ranks from 1 to {max} \
             ({}), not {}",
            self.limit.reason(),
            self.asked
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_runs_on_powers_of_two_up_to_its_limit() {
        for class in [Class::S, Class::W, Class::A, Class::B, Class::C] {
            for kernel in [Kernel::Cg, Kernel::Is] {
                let limit = RankLimit::of(kernel, class);
                assert!(limit.max.is_power_of_two());
                for ranks in [1, 2, 64, limit.max] {
                    assert_eq!(limit.check(ranks), Ok(()), "{kernel} {class} {ranks}");
                }
                for ranks in [0, 3, 96, 2 * limit.max] {
                    assert!(limit.check(ranks).is_err(), "{kernel} {class} {ranks}");
                }
            }
        }
        assert_eq!(RankLimit::of(Kernel::Is, Class::S).max, 128);
        assert_eq!(RankLimit::of(Kernel::Cg, Class::S).max, 1024);
    }

    #[test]
    fn a_refusal_names_the_limit_and_its_reason() {
        let e = RankLimit::of(Kernel::Is, Class::S).check(256).unwrap_err();
        assert_eq!(
            e.to_string(),
            "npb is --class S runs on a power of two of ranks from 1 to 128 \
             (NPB's MAX_PROCS for IS class S), not 256"
        );
        let e = RankLimit::of(Kernel::Cg, Class::B).check(2048).unwrap_err();
        assert!(e.to_string().contains("from 1 to 1024"), "{e}");
    }
}
