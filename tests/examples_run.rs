//! The examples of a new user's first programs, run as jobs of four ranks
//! on every backend at a reduced size, each checked by the verification
//! line it prints: `sample_sort`, `word_count`, `task_farm` and
//! `spmv_bcast` (tests `tcp::sample_sort`, `local::sample_sort`,
//! `mpi::sample_sort`, ...; the MPI ones need the cargo feature `mpi`).
//!
//! `cargo test` builds the examples beside the test binaries
//! (`target/<profile>/examples/`), with the same features, and this test
//! runs those binaries: with `MTTL_NP=4` on TCP, with `MTTL_BACKEND=local`
//! as well for the local backend, and with `MTTL_BACKEND=mpi` for MPI,
//! where the self-launch starts the ranks with `mpirun` (adding
//! `--allow-run-as-root --oversubscribe` for Open MPI). A test run with
//! `--test examples_run` alone does not build the examples: run
//! `cargo build --examples` (with the same features) first.

// This file runs example binaries, not scenarios of its own.
#[allow(unused_macros, unused_imports)]
mod runtime_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mttl::comm::env as launch_env;
use runtime_support::Backend;

/// How long one example's job may take.
const DEADLINE: Duration = Duration::from_secs(120);

/// Ranks in each job.
const RANKS: usize = 4;

/// An example, the arguments that size it down, and the words its
/// verification line holds.
struct Example {
    name: &'static str,
    args: &'static [&'static str],
    verified: &'static [&'static str],
}

const SAMPLE_SORT: Example = Example {
    name: "sample_sort",
    args: &["200000"],
    verified: &["sample_sort: 200000 keys on 4 nodes", "sorted: OK"],
};

const WORD_COUNT: Example = Example {
    name: "word_count",
    args: &["20000"],
    verified: &["word_count: 80000 words", "on 4 nodes", "counts match: OK"],
};

const TASK_FARM: Example = Example {
    name: "task_farm",
    args: &["2000"],
    verified: &["task_farm: 2000 tasks on 4 nodes", "each done once: OK"],
};

const SPMV_BCAST: Example = Example {
    name: "spmv_bcast",
    args: &["4000", "10", "20"],
    verified: &["spmv_bcast: 4000 rows", "on 4 nodes", "check: OK"],
};

/// The example binary `name`, built by cargo beside this test binary
/// (`target/<profile>/deps/` holds the tests, `target/<profile>/examples/`
/// the examples).
fn example_binary(name: &str) -> PathBuf {
    runtime_support::built_binary(
        "examples",
        name,
        "run `cargo test` (which builds the examples), or \
         `cargo build --examples` with this test's features, first",
    )
}

/// Runs `example` as a job of [`RANKS`] ranks on `backend` and checks its
/// verification line.
fn run(backend: Backend, example: &Example) {
    let mut cmd = Command::new(example_binary(example.name));
    cmd.args(example.args).env("RUST_BACKTRACE", "0");
    for var in [
        launch_env::RANK,
        launch_env::SIZE,
        launch_env::ROOT,
        launch_env::SECRET,
        launch_env::TAG_OUTPUT,
    ] {
        cmd.env_remove(var);
    }
    cmd.env(launch_env::NP, RANKS.to_string())
        .env(launch_env::BACKEND, backend.name());
    let what = format!("{} on {} ({RANKS} ranks)", example.name, backend.name());
    let out = runtime_support::run_captured(&what, cmd, DEADLINE);
    out.assert_success().stdout_line(example.verified);
}

/// The tests of one backend, named `BACKEND::EXAMPLE`.
macro_rules! examples_on {
    ($module:ident, $backend:ident) => {
        mod $module {
            use super::*;

            #[test]
            fn sample_sort() {
                run(Backend::$backend, &SAMPLE_SORT);
            }

            #[test]
            fn word_count() {
                run(Backend::$backend, &WORD_COUNT);
            }

            #[test]
            fn task_farm() {
                run(Backend::$backend, &TASK_FARM);
            }

            #[test]
            fn spmv_bcast() {
                run(Backend::$backend, &SPMV_BCAST);
            }
        }
    };
}

examples_on!(tcp, Tcp);
examples_on!(local, Local);
#[cfg(feature = "mpi")]
examples_on!(mpi, Mpi);
