//! CG's process grid: which block of the matrix a process owns and whom it
//! exchanges with. It lives in `mttl-kernels`, so that `mttl-trace`'s CG
//! skeleton computes its partners and lengths with this very code.

pub use mttl_kernels::cg_grid::*;
