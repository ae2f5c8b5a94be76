//! NPB IS on the in-process driver: every partial and the full verification
//! at 1, 2 and 4 virtual ranks, against NPB's official test tables.
//!
//! Class W takes about 0.3 s per process count unoptimised.

use benches_npb::npb::class::{IsParams, IS_ITERATIONS, IS_TEST_KEYS};
use benches_npb::npb::is::{self, IsRun};
use benches_npb::npb::{sim, Class};

fn run(params: IsParams, nprocs: usize) -> Vec<IsRun> {
    sim::run(nprocs, |c| {
        let me = c.rank();
        is::run_benchmark(c, params, nprocs, me).expect("a valid process count")
    })
}

fn verify(class: Class, nprocs: usize) {
    let params = class.is().expect("IS supports S to C");
    let runs = run(params, nprocs);
    for (me, r) in runs.iter().enumerate() {
        assert!(
            r.failures.is_empty(),
            "class {class}, rank {me} of {nprocs}: {:?}",
            r.failures
        );
        assert!(
            r.full.passed(),
            "class {class}, rank {me} of {nprocs}: {:?}",
            r.full
        );
    }
    let partial: usize = runs.iter().map(|r| r.partial_passed).sum();
    assert_eq!(
        partial,
        IS_TEST_KEYS * IS_ITERATIONS,
        "every test key is checked by exactly one rank"
    );
    let passed: usize = runs.iter().map(IsRun::passed).sum();
    assert_eq!(passed, params.passes_required(nprocs));
}

#[test]
fn class_s_one_rank_verifies() {
    verify(Class::S, 1);
}

#[test]
fn class_s_two_ranks_verify() {
    verify(Class::S, 2);
}

#[test]
fn class_s_four_ranks_verify() {
    verify(Class::S, 4);
}

#[test]
fn class_w_one_rank_verifies() {
    verify(Class::W, 1);
}

#[test]
fn class_w_two_ranks_verify() {
    verify(Class::W, 2);
}

#[test]
fn class_w_four_ranks_verify() {
    verify(Class::W, 4);
}

#[test]
fn a_wrong_official_rank_fails_partial_verification_every_iteration() {
    let mut params = Class::S.is().expect("class S");
    params.test_rank[3] += 1;
    let runs = run(params, 2);
    let failures: Vec<_> = runs.iter().flat_map(|r| r.failures.iter()).collect();
    assert_eq!(failures.len(), IS_ITERATIONS);
    for (i, f) in failures.iter().enumerate() {
        assert_eq!((f.iteration, f.entry), (i + 1, 3));
        assert_eq!(f.found, f.expected - 1);
    }
    let passed: usize = runs.iter().map(IsRun::passed).sum();
    assert_eq!(passed, params.passes_required(2) - IS_ITERATIONS);
}

#[test]
fn first_class_s_keys_are_npb_s() {
    let rank = is::IsRank::new(Class::S.is().expect("class S"), 1, 0).expect("one rank");
    assert_eq!(
        rank.keys()[..8],
        [1585, 825, 1060, 1343, 956, 437, 759, 841]
    );
}
