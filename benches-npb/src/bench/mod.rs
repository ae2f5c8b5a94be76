//! mttl's micro-benchmarks: the logic behind the `mttl-bench` binary's
//! subcommands, one module per subcommand.
//!
//! A benchmark is a program that prints figures, not a timed test: each
//! module here measures, prints a table (or JSON with `--json`), and states
//! how it measured. Each subcommand owns its arguments (a `clap::Args`
//! struct) and an entry point, so the binary only dispatches.

pub mod comm;
mod common;
pub use common::{cpu_load, plot};
mod error;
pub mod load;
mod results_file;
pub mod runtime;
pub mod rwrite;
