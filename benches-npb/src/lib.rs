//! NPB CG and IS on mttl and on plain MPI, and mttl's micro-benchmarks.

pub mod bench;
pub mod npb;
