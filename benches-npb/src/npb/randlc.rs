//! NPB's pseudo-random number generator. It lives in `mttl-kernels`, whose
//! IS skeleton (`mttl-trace scale --skeleton is`) generates the same keys
//! as the kernel to learn its all-to-all sizes.

pub use mttl_kernels::randlc::*;
