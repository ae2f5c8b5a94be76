//! NPB CG on the in-process driver: the official verification at 1, 2 and 4
//! virtual ranks, and NPB-MPI's printed traces of the first timed iteration.
//!
//! Class W runs only in optimised builds: unoptimised each process count
//! takes 4-5 s (`cargo test --release -p benches-npb --test npb_cg` runs all
//! eight tests in half a second).

use benches_npb::npb::cg::{self, CgRun};
use benches_npb::npb::{sim, Class};

fn run(class: Class, nprocs: usize) -> Vec<CgRun> {
    sim::run(nprocs, |c| {
        let me = c.rank();
        cg::run_benchmark(c, class.cg(), nprocs, me).expect("a power-of-two grid")
    })
}

/// Runs `class` on `nprocs` ranks and checks every rank verifies with the
/// same zeta; returns rank 0's run.
fn verify(class: Class, nprocs: usize) -> CgRun {
    let params = class.cg();
    let runs = run(class, nprocs);
    for (me, r) in runs.iter().enumerate() {
        assert_eq!(r.iterations.len(), params.niter);
        assert!(
            params.verify(r.zeta()),
            "class {class} on {nprocs} ranks, rank {me}: zeta {:.13e} is off by {:.3e} (official {:.13e})",
            r.zeta(),
            params.error(r.zeta()),
            params.zeta_verify
        );
        assert_eq!(
            r.zeta().to_bits(),
            runs[0].zeta().to_bits(),
            "rank {me} disagrees with rank 0"
        );
    }
    runs.into_iter().next().expect("one run per rank")
}

/// Checks the first timed iteration and the final zeta against NPB-MPI's
/// printout (`e21.14` for ‖r‖, `f20.13` for zeta): the same printed digits.
fn assert_trace(run: &CgRun, rnorm: &str, zeta: &str, final_zeta: &str) {
    let first = run.iterations[0];
    assert_eq!(format!("{:.13e}", first.rnorm), rnorm, "‖r‖ at it=1");
    assert_eq!(format!("{:.13}", first.zeta), zeta, "zeta at it=1");
    assert_eq!(format!("{:.13}", run.zeta()), final_zeta, "final zeta");
}

#[test]
fn class_s_one_rank_matches_npb_mpi_trace() {
    let r = verify(Class::S, 1);
    assert_trace(
        &r,
        "1.3805568625814e-13",
        "9.9986441579140",
        "8.5971775078648",
    );
}

#[test]
fn class_s_two_ranks_matches_npb_mpi_trace() {
    // Two ranks sum the row reduction in another order: ‖r‖ changes in the
    // second digit, exactly as NPB-MPI's does; zeta does not.
    let r = verify(Class::S, 2);
    assert_trace(
        &r,
        "1.4006707615843e-13",
        "9.9986441579140",
        "8.5971775078648",
    );
}

#[test]
fn class_s_four_ranks_verifies() {
    verify(Class::S, 4);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "class W takes 4-5 s unoptimised; run with --release"
)]
fn class_w_one_rank_matches_npb_mpi_trace() {
    let r = verify(Class::W, 1);
    assert_trace(
        &r,
        "1.7557786639079e-13",
        "11.9997003727381",
        "10.3625950871240",
    );
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "class W takes 4-5 s unoptimised; run with --release"
)]
fn class_w_two_ranks_verifies() {
    verify(Class::W, 2);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "class W takes 4-5 s unoptimised; run with --release"
)]
fn class_w_four_ranks_verifies() {
    verify(Class::W, 4);
}

#[test]
fn eight_ranks_use_a_two_by_four_grid_and_still_verify() {
    // The non-square grid with a reduce-scatter step and a real transpose
    // partner (a 1 × 2 grid transposes to itself).
    verify(Class::S, 8);
}

#[test]
fn a_non_power_of_two_job_is_refused() {
    let err = sim::run(3, |c| {
        let me = c.rank();
        cg::run_benchmark(c, Class::S.cg(), 3, me).map(|_| ())
    });
    assert!(err.iter().all(|e| e.as_ref().unwrap_err().to_string()
        == "CG needs a power-of-two number of processes, got 3"));
}
