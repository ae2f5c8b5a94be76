//! The learner on given slack vectors, and on slacks modelled from the
//! tree and given arrival times (the paper's Fig. 6 case among them).

use super::*;

fn is_permutation(t: &Table) -> bool {
    let n = t.size();
    let mut seen = vec![false; n];
    for &v in t.virtual_ranks() {
        if v >= n || seen[v] {
            return false;
        }
        seen[v] = true;
    }
    (0..n).all(|r| t.to_real[t.to_virtual[r]] == r)
}

/// The slacks of a broadcast on `table` when rank `r` enters it at
/// `arrival[r]` and every message costs its sender `send` (a parent sends
/// to its children one after the other, largest subtree first): the data's
/// arrival minus the rank's, negative for a late rank.
fn modelled_slacks(table: &Table, arrival: &[f64], send: f64) -> Vec<f64> {
    let n = table.size();
    let mut data = vec![0.0; n];
    let mut slacks = vec![0.0; n];
    for v in 0..n {
        let r = table.to_real[v];
        let ready = if v == 0 { arrival[r] } else { data[r] };
        if v != 0 {
            slacks[r] = ready - arrival[r];
        }
        let start = ready.max(arrival[r]);
        for (k, c) in table.children(r).enumerate() {
            data[c] = start + (k + 1) as f64 * send;
        }
    }
    slacks
}

fn total_wait(slacks: &[f64]) -> f64 {
    slacks.iter().map(|s| s.max(0.0)).sum()
}

/// Runs `broadcasts` broadcasts of one site: each rank measures its slack
/// from `slacks(table, b)`, reports as the protocol says, and the root's
/// learner runs. Returns the phases that changed the table and the tables
/// used by each broadcast.
fn drive(
    table: &mut Table,
    broadcasts: usize,
    slacks: impl FnMut(&Table, usize) -> Vec<f64>,
) -> (usize, Vec<Table>, Learner) {
    drive_measured(table, broadcasts, None, slacks)
}

/// As [`drive`], the learner also taking a measured hop of `hop` at each
/// broadcast (as a job's round trips give it).
fn drive_measured(
    table: &mut Table,
    broadcasts: usize,
    hop: Option<f64>,
    mut slacks: impl FnMut(&Table, usize) -> Vec<f64>,
) -> (usize, Vec<Table>, Learner) {
    let n = table.size();
    let mut learner = Learner::new(n);
    let mut evals = vec![Evaluation::default(); n];
    let mut changes = 0;
    let mut used = Vec::new();
    for b in 0..broadcasts {
        used.push(table.clone());
        let s = slacks(table, b);
        if let Some(h) = hop {
            learner.hop_sample(h);
        }
        let swaps = learner.after_broadcast(table);
        let threshold = learner.report_threshold();
        for (r, e) in evals.iter_mut().enumerate() {
            if r == table.root() {
                continue;
            }
            if let Some(v) = e.record(s[r], threshold) {
                learner.report(r, v);
            }
            if !swaps.is_empty() {
                e.restart();
            }
        }
        changes += usize::from(!swaps.is_empty());
        assert!(is_permutation(table), "{table:?}");
        assert_eq!(table.virtual_of(table.root), 0);
    }
    (changes, used, learner)
}

#[test]
fn new_table_is_the_binomial_one_and_swaps_keep_a_permutation() {
    let mut t = Table::new(6, 2);
    assert_eq!(t.virtual_ranks(), &[4, 5, 0, 1, 2, 3]);
    assert_eq!(t.parent(2), None);
    assert_eq!(t.children(2).collect::<Vec<_>>(), vec![0, 4, 3]);
    t.swap(3, 0).unwrap();
    assert!(is_permutation(&t));
    assert_eq!(t.children(2).collect::<Vec<_>>(), vec![3, 4, 0]);
    assert_eq!(t.parent(1), Some(3));
    assert_eq!(t.swap(2, 1), Err(TableError::Root(2)));
    assert_eq!(t.swap(1, 1), Err(TableError::SelfSwap(1)));
    assert_eq!(
        t.swap(1, 6),
        Err(TableError::OutOfRange { rank: 6, size: 6 })
    );
    let before = t.clone();
    assert!(t.apply(&[(1, 4), (2, 5)]).is_err());
    assert_eq!(t, before, "a rejected change leaves the table as it was");
}

#[test]
fn swaps_between_two_tables_turn_one_into_the_other() {
    let from = Table::new(9, 3);
    let to = Table::from_virtual(9, 3, &[5, 8, 1, 0, 2, 7, 3, 6, 4]).unwrap();
    let swaps = swaps_between(&from, &to);
    assert!(swaps.iter().all(|&(a, b)| a != 3 && b != 3 && a != b));
    let mut t = from.clone();
    t.apply(&swaps).unwrap();
    assert_eq!(t, to);
    assert!(swaps_between(&to, &to).is_empty());
}

#[test]
fn places_are_sorted_by_when_they_get_the_data() {
    // 8 ranks: virtual 4 gets it after 1 send, 2 and 6 after 2, 1, 5 and
    // 3 after 3... (4 sends to 6 then 5; 2 to 3).
    let unit = Costs { hop: 1.0, gap: 1.0 };
    assert_eq!(places_by_time(8, unit), vec![4, 2, 6, 1, 3, 5, 7]);
    // A hop three times the gap: the root's third child (1) before 6.
    let slow = Costs { hop: 3.0, gap: 1.0 };
    assert_eq!(places_by_time(8, slow), vec![4, 2, 1, 6, 3, 5, 7]);
    let p = places_by_time(1000, unit);
    let mut sorted = p.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..1000).collect::<Vec<_>>());
}

#[test]
fn evaluation_is_the_weighted_average_and_reports_only_big_changes() {
    let t = 0.0008;
    let mut e = Evaluation::default();
    assert_eq!(
        e.record(0.004, t),
        Some(0.004),
        "the first is always reported"
    );
    // (1 * 0.004 + 0.003) / 2 = 0.0035: 0.5 ms from 0.004, not reported.
    assert_eq!(e.record(0.003, t), None);
    assert!((e.value - 0.0035).abs() < 1e-12);
    // (3 * 0.0035 + 0.0025) / 4 = 0.00325: 0.75 ms from 0.004.
    assert_eq!(e.record(0.0025, t), None);
    assert!((e.value - 0.00325).abs() < 1e-12);
    // (3 * 0.00325 + 0.002) / 4 = 0.0029375: more than 0.8 ms.
    let v = e
        .record(0.002, t)
        .expect("moved by more than the threshold");
    assert!((v - 0.0029375).abs() < 1e-12);
    // A slack far from the average (by over 4 thresholds and half of it)
    // restarts it: the rank's pattern changed. A late rank's slack is
    // negative.
    assert_eq!(e.record(-0.0045, t), Some(-0.0045));
    assert_eq!(e.record(-0.004, t), None, "(-0.0045 - 0.004) / 2");
    e.restart();
    assert_eq!(
        e.record(-0.004, t),
        Some(-0.004),
        "a restart takes the new slack and reports it"
    );
}

#[test]
fn noise_below_the_threshold_is_never_reported() {
    let t = 20e-6;
    let mut e = Evaluation::default();
    assert!(e.record(0.0, t).is_some());
    for k in 0..1000 {
        let slack = t * 0.9 * (f64::from(k % 7) / 3.0 - 1.0);
        assert_eq!(e.record(slack, t), None, "slack {slack}");
    }
}

#[test]
fn the_estimate_gives_back_the_arrivals_and_the_completion() {
    let hop = DEFAULT_HOP;
    let arrival = [0.0, 3e-5, 1e-4, 0.0, 7e-5, 1e-5, 0.0, 2.5e-4, 4e-5, 0.0];
    let table = Table::from_virtual(10, 0, &[0, 9, 8, 7, 6, 5, 4, 3, 2, 1]).unwrap();
    let mut learner = Learner::new(10);
    for (r, s) in modelled_slacks(&table, &arrival, hop)
        .into_iter()
        .enumerate()
    {
        learner.report(r, s);
    }
    let est = learner.estimate(&table);
    for (r, (got, want)) in est.arrival.iter().zip(arrival).enumerate() {
        assert!((got - want).abs() < 1e-12, "rank {r}");
    }
    let c = model_completion(&table, &arrival, hop);
    assert!((est.completion - c).abs() < 1e-12);
    // Rank 7 (virtual 3, a leaf) is the last: 250 µs.
    assert!((c - 2.5e-4).abs() < 1e-12, "{c}");
}

#[test]
fn the_hop_is_measured_from_the_root_s_children_that_waited() {
    let mut t = Table::new(16, 0);
    let mut learner = Learner::new(16);
    assert_eq!(learner.hop(), DEFAULT_HOP);
    let hop = 30e-6;
    // Everyone arrives with the root, but rank 8 (its first child) is late.
    let mut arrival = vec![0.0; 16];
    arrival[8] = 1e-3;
    for (r, s) in modelled_slacks(&t, &arrival, hop).into_iter().enumerate() {
        learner.report(r, s);
    }
    learner.measure_hop(&t);
    assert!((learner.hop() - hop).abs() < 1e-12, "{}", learner.hop());
    // Smoothed: a second measurement of 50 µs gives the mean.
    for (r, s) in modelled_slacks(&t, &[0.0; 16], 50e-6)
        .into_iter()
        .enumerate()
    {
        learner.report(r, s);
    }
    learner.measure_hop(&t);
    assert!((learner.hop() - 40e-6).abs() < 1e-12);
    let _ = learner.after_broadcast(&mut t);
}

#[test]
fn a_measured_hop_comes_first_and_is_averaged() {
    let mut learner = Learner::new(4);
    learner.report(2, 40e-6);
    let t = Table::new(4, 0);
    learner.measure_hop(&t);
    assert!(
        (learner.hop() - 40e-6).abs() < 1e-12,
        "rank 2, sent to first"
    );
    learner.hop_sample(100e-6);
    assert_eq!(learner.hop(), 100e-6);
    learner.hop_sample(-1.0);
    learner.hop_sample(f64::NAN);
    learner.hop_sample(20e-6);
    assert!((learner.hop() - 80e-6).abs() < 1e-12);
}

#[test]
fn balanced_arrivals_make_no_change() {
    let mut t = Table::new(16, 3);
    let (changes, _, learner) = drive(&mut t, 200, |t, _| modelled_slacks(t, &[0.0; 16], 25e-6));
    assert_eq!(changes, 0);
    assert_eq!(t, Table::new(16, 3));
    assert!(learner.interval() > 32, "K grows when nothing changes");
}

#[test]
fn the_root_keeps_its_place_whatever_it_reports() {
    let mut t = Table::new(8, 5);
    let mut learner = Learner::new(8);
    for r in 0..8 {
        learner.report(r, if r == 5 { -1.0 } else { 0.0 });
    }
    learner.report(2, -0.5);
    learner.report(4, 0.5);
    for _ in 0..50 {
        let swaps = learner.after_broadcast(&mut t);
        assert!(swaps.iter().all(|&(a, b)| a != 5 && b != 5));
        assert_eq!(t.virtual_of(5), 0);
        assert!(is_permutation(&t));
    }
}

/// The paper's heavy pattern: the root's first child (the busiest
/// forwarder) is late. One change puts it at a leaf, and the completion
/// drops to what the tree costs when all arrive together, or the late
/// rank's own arrival.
#[test]
fn a_late_inner_rank_moves_to_a_leaf_in_one_change() {
    for n in [16, 64, 1024] {
        let hop = 25e-6;
        let late = n / 2;
        let mut arrival = vec![0.0; n];
        arrival[late] = 100e-6;
        let mut t = Table::new(n, 0);
        let before = model_completion(&t, &arrival, hop);
        let (changes, used, learner) = drive(&mut t, 40, |t, _| modelled_slacks(t, &arrival, hop));
        assert_eq!(changes, 1, "{n} ranks");
        assert_eq!(t.children(late).count(), 0, "{n} ranks: a leaf");
        let after = model_completion(&t, &arrival, hop);
        let depth = (n as f64).log2();
        assert!(
            after <= (depth * hop).max(100e-6 + hop) + 1e-12 && after < before,
            "{n} ranks: {before} -> {after}"
        );
        assert_eq!(used.last(), Some(&t));
        assert!((learner.hop() - hop).abs() < 1e-9, "{}", learner.hop());
        assert_eq!(learner.progress().last_change_phase, 2);
    }
}

#[test]
fn a_change_that_made_the_completion_worse_is_undone() {
    let n = 16;
    let hop = 25e-6;
    let mut arrival = vec![0.0; n];
    arrival[8] = 1e-3;
    let mut t = Table::new(n, 0);
    let (changes, used, learner) = drive(&mut t, 60, |t, _| {
        let mut s = modelled_slacks(t, &arrival, hop);
        if *t != Table::new(n, 0) {
            // On any other table, rank 8 is twice as late as the model
            // said: the change looks worse than before it.
            s[8] -= 3e-3;
            for c in t.children(8).collect::<Vec<_>>() {
                s[c] += 3e-3;
            }
        }
        s
    });
    assert_eq!(changes, 2, "the trial, then its undo");
    assert_eq!(t, Table::new(n, 0), "the old table is back");
    assert!(used.iter().any(|u| *u != Table::new(n, 0)));
    assert_eq!(learner.progress().changes, 2);
    assert!(learner.exhausted);
}

/// Every table of 8 ranks rooted at 0.
fn all_tables() -> Vec<Table> {
    fn place(t: &Table, from: usize, out: &mut Vec<Table>) {
        if from == t.size() {
            out.push(t.clone());
            return;
        }
        place(t, from + 1, out);
        for b in from + 1..t.size() {
            let mut u = t.clone();
            u.swap(from, b).expect("ranks of the job, not the root");
            place(&u, from + 1, out);
        }
    }
    let mut out = Vec::new();
    place(&Table::new(8, 0), 1, &mut out);
    out
}

/// The paper's Fig. 6 case, modelled: 8 ranks, root 0 (no work), every
/// message costing its sender `send`, and the work growing along the
/// binomial tree's order of sending, so that the ranks the binomial table
/// puts high enter last: rank `r > 0` enters at `(8 - r) * step`. The
/// learner reaches a table with no wait at all, the best completion of all
/// 5,040 tables, in one change; so too with the work growing with the
/// plain rank.
#[test]
fn fig6_reaches_zero_wait_and_the_best_completion() {
    let (step, send) = (0.001, 0.001);
    let tables = all_tables();
    for along_tree in [true, false] {
        let arrival: Vec<f64> = (0..8)
            .map(|r| match (r, along_tree) {
                (0, _) => 0.0,
                (_, true) => (8 - r) as f64 * step,
                (_, false) => r as f64 * step,
            })
            .collect();
        let mut t = Table::new(8, 0);
        assert!(total_wait(&modelled_slacks(&t, &arrival, send)) > 0.0);
        let before = model_completion(&t, &arrival, send);
        let (changes, _, _) = drive_measured(&mut t, 40, Some(send), |t, _| {
            modelled_slacks(t, &arrival, send)
        });
        assert!(model_completion(&t, &arrival, send) <= before);
        assert_eq!(
            total_wait(&modelled_slacks(&t, &arrival, send)),
            0.0,
            "{t:?}"
        );
        let best = tables
            .iter()
            .map(|u| model_completion(u, &arrival, send))
            .fold(f64::MAX, f64::min);
        assert!((model_completion(&t, &arrival, send) - best).abs() < 1e-12);
        assert_eq!(changes, 1, "along the tree: {along_tree}");
    }
}

/// Against the best of all 5,040 tables, on a grid of send costs and work
/// steps in both orders: never worse than binomial, within a hop of the
/// best everywhere and the best in most.
#[test]
fn learner_finds_the_best_completion_in_most_modelled_cases() {
    let tables = all_tables();
    assert_eq!(tables.len(), 5040);
    let (mut cases, mut optimal) = (0, 0);
    for send in [0.0005, 0.001, 0.002] {
        for step in [0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003] {
            for reversed in [false, true] {
                let arrival: Vec<f64> = (0..8)
                    .map(|r| match (r, reversed) {
                        (0, _) => 0.0,
                        (_, false) => r as f64 * step,
                        (_, true) => (8 - r) as f64 * step,
                    })
                    .collect();
                let completion = |t: &Table| model_completion(t, &arrival, send);
                let best = tables.iter().map(completion).fold(f64::MAX, f64::min);
                let mut t = Table::new(8, 0);
                let first = completion(&t);
                let _ = drive_measured(&mut t, 80, Some(send), |t, _| {
                    modelled_slacks(t, &arrival, send)
                });
                let got = completion(&t);
                assert!(
                    got <= first + 1e-12,
                    "send {send} step {step}: {first} -> {got}"
                );
                assert!(
                    got <= best + send + 1e-12,
                    "send {send} step {step}: {got} vs {best}"
                );
                cases += 1;
                optimal += usize::from(got <= best + 1e-9);
            }
        }
    }
    assert!(optimal * 10 >= cases * 8, "optimal in {optimal} of {cases}");
}

/// Beyond the paper: one change moves every rank that needs it, so many
/// late ranks are handled in one phase.
#[test]
fn many_late_ranks_move_in_one_change() {
    let n = 64;
    let hop = 25e-6;
    // The 15 ranks that forward to two or more (multiples of 4) are
    // late by 300 µs and a little.
    let arrival: Vec<f64> = (0..n)
        .map(|r| {
            if r > 0 && r % 4 == 0 {
                300e-6 + 1e-6 * r as f64
            } else {
                0.0
            }
        })
        .collect();
    let mut t = Table::new(n, 0);
    let before = model_completion(&t, &arrival, hop);
    let (changes, used, _) = drive(&mut t, 30, |t, _| modelled_slacks(t, &arrival, hop));
    let moved = (1..n)
        .filter(|&r| used[0].virtual_of(r) != t.virtual_of(r))
        .count();
    assert!(moved > 8, "{moved} ranks moved");
    assert!(changes <= 2, "{changes}");
    let after = model_completion(&t, &arrival, hop);
    // The last rank (60) arrives at 360 µs: no table finishes earlier.
    assert!(
        after <= 360e-6 + 1e-12 && after < before - 90e-6,
        "{before} -> {after}"
    );
}

#[test]
fn a_changed_pattern_is_learned_again_within_two_phases() {
    let n = 32;
    let hop = 25e-6;
    let late = |ranks: &[usize]| -> Vec<f64> {
        (0..n)
            .map(|r| if ranks.contains(&r) { 2e-3 } else { 0.0 })
            .collect()
    };
    let first = late(&[16]);
    let second = late(&[4, 8]);
    let mut t = Table::new(n, 0);
    let (_, used, learner) = drive(&mut t, 400, |t, b| {
        let arrival = if b < 200 { &first } else { &second };
        modelled_slacks(t, arrival, hop)
    });
    let best = |arrival: &[f64], t: &Table| model_completion(t, arrival, hop);
    assert!(
        best(&first, &used[199]) <= 2e-3 + hop + 1e-12,
        "first pattern learned"
    );
    // Ranks 4 and 8 sit high in the first pattern's table: the change shows.
    let settled = (200..400)
        .find(|&b| best(&second, &used[b]) <= 2e-3 + hop + 1e-12)
        .expect("second pattern learned");
    assert!(
        settled < 215,
        "re-learned after {} broadcasts",
        settled - 200
    );
    let p = learner.progress();
    assert!(p.relearns >= 1, "{p:?}");
    assert!(learner.interval() > 8, "K grows again once learned");
}

#[test]
fn reports_that_are_not_numbers_are_ignored() {
    let mut learner = Learner::new(4);
    learner.report(1, f64::NAN);
    learner.report(2, f64::INFINITY);
    learner.report(9, 1.0);
    assert_eq!(learner.views, vec![0.0; 4]);
}
