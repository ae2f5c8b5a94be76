//! NPB problem classes: the official size and verification tables of CG and
//! IS, and the Mop/s formulas each benchmark reports. They live in
//! `mttl-kernels`, which `mttl-trace`'s skeletons share with the kernels.

pub use mttl_kernels::class::*;
