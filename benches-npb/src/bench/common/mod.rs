//! What every `mttl-bench` subcommand's orchestrator does the same way:
//! picking the configurations and launching their worker jobs
//! ([`jobs`]), waiting for a quiet machine and telling disturbed runs
//! ([`cpu_load`]), the sweeps with their retries and the notes about them
//! ([`sweep`]), the small pieces of the reports ([`report`]), the raw
//! MPI baseline's start ([`raw_mpi`]) and writing a figure as SVG and PNG
//! ([`plot`]).
//!
//! Each subcommand still owns what it measures, its configurations, its
//! results file's shape and its tables; this module owns only the
//! machinery they share. `cpu_load` and `plot` are public: `npb-sweep`
//! uses them too.

pub mod cpu_load;
pub(crate) mod jobs;
pub mod plot;
#[cfg(feature = "mpi")]
pub(crate) mod raw_mpi;
pub(crate) mod report;
pub(crate) mod sweep;
