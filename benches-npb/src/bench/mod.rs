//! mttl's micro-benchmarks: the logic behind the `mttl-bench` binary's
//! subcommands, one module per subcommand, all on one sweep engine
//! ([`sweep`]).
//!
//! A benchmark is a program that prints figures, not a timed test: each
//! module here measures, prints a table (or JSON with `--json`), and states
//! how it measured. Each subcommand owns its arguments (a `clap::Args`
//! struct), its configurations, what its workers measure and its tables;
//! the sweeps, the best-of and paired figures, the notes, the targets'
//! verdicts, the results files and the plots are the engine's.

pub mod bcast;
pub mod comm;
mod error;
pub mod load;
pub mod runtime;
pub mod rwrite;
pub mod sweep;
pub mod trace;

pub use error::BenchError;
pub use sweep::{cpu_load, plot};
