//! The partition and partner functions of mttl's kernels, in one light crate
//! that the kernels and `mttl-trace`'s skeletons (`mttl-trace scale`) both
//! use, so that a pseudo trace's peers and sizes are computed by the code
//! that runs, and the two cannot drift apart.
//!
//! - [`class`]: NPB's classes (problem sizes, iterations), CG's and IS's;
//! - [`cg_grid`]: NPB CG's process grid and exchange schedule;
//! - [`is_buckets`]: NPB IS's keys and bucket partition (its all-to-all sizes);
//! - [`randlc`]: NPB's random number generator (IS's keys, CG's matrix);
//! - [`stencil`]: the 1-D stencil's blocks and neighbours (`examples/stencil.rs`).
//!
//! Nothing here communicates or computes a kernel: it says who owns what
//! and who talks to whom.

pub mod cg_grid;
pub mod class;
pub mod is_buckets;
pub mod randlc;
pub mod stencil;
