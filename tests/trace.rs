//! Tracing across a job, on every backend (`MTTL_TRACE=DIR`): every rank
//! writes its file and the reader gets its events back in order; a tiny
//! buffer under the `local` policy writes many times and records the same
//! events, in the same order, as a run that keeps all in memory; a rank
//! killed mid-run leaves a file readable up to its last complete block;
//! an unwritable directory stops the job at start; a disk that fills (here
//! a file size limit) makes each rank say so once and stop tracing, and
//! the program finishes; a tiny buffer under `equalized` suspends every
//! rank many times, for the same Z everywhere, and the reconstructed trace
//! holds the memory run's events with no clock-condition violation;
//! `MTTL_TRACE_LEVEL=threads` records every thread's spawn, runs, blocks
//! and exit, consistently; a rank killed while it waits out a suspension
//! leaves its trace readable up to the last complete block, and the job
//! ends, saying which rank, without hanging.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::path::PathBuf;

use mttl::GlobalArray;
use mttl_core::trace::format::{Event, Kind};
use mttl_trace::{Ending, RankTrace};
use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    a_traced_job_writes_one_file_per_rank,
    a_tiny_buffer_flushes_often_and_loses_nothing,
    an_unwritable_directory_is_refused_at_start,
    a_full_disk_stops_tracing_and_the_program_finishes,
    a_full_buffer_under_memory_drops_and_says_so,
    equalized_suspensions_are_equal_and_reconstruct_to_a_memory_run,
    thread_events_are_recorded_at_level_threads_and_consistent;
    not_local:
    a_killed_rank_leaves_its_complete_blocks =>
        "the rank killed is a process of its own",
    a_rank_killed_in_a_suspension_leaves_readable_traces =>
        "the rank killed is a process of its own",
);

#[mttl::remote]
fn square(x: u64) -> u64 {
    x * x
}

#[mttl::remote]
fn die() {
    std::process::abort();
}

/// Aborts this process after `ms` milliseconds, whatever it is doing then.
#[mttl::remote]
fn die_in(ms: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        std::process::abort();
    });
}

/// A fresh directory for one test's trace.
fn trace_dir(t: &Scenario) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mttl-trace-{}-{}",
        t.name.replace("::", "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The program traced: per iteration, a call to every rank, a region, a
/// remote write and read, and a barrier on every rank; then an allreduce.
fn workload(iterations: u64) {
    let n = mttl::size();
    let cells = GlobalArray::<u64>::new(n);
    let ptrs: Vec<_> = mttl::spmd(share, ());
    for i in 0..iterations {
        let _step = mttl::trace::region("step");
        for node in 0..n {
            assert_eq!(mttl::invoke(node, square, (i,)), i * i);
        }
        let target = ptrs[(i as usize) % n];
        target.write(i);
        assert_eq!(target.read(), i);
        mttl::spmd(barrier_everywhere, ());
    }
    let sum = mttl::spmd(sum_everywhere, ());
    assert!(sum.iter().all(|&s| s == n as u64));
    drop(cells);
}

thread_local! {
    static MINE: std::cell::RefCell<Option<GlobalArray<u64>>> = const { std::cell::RefCell::new(None) };
}

#[mttl::remote]
fn share() -> mttl::GlobalPtr<u64> {
    let a = GlobalArray::<u64>::new(1);
    let p = a.global_ptr();
    MINE.with(|m| *m.borrow_mut() = Some(a));
    p
}

#[mttl::remote]
fn barrier_everywhere() {
    mttl::barrier();
}

#[mttl::remote]
fn sum_everywhere() -> u64 {
    mttl::allreduce_sum(1u64)
}

/// The events of the program's own doing (calls, memory, collectives,
/// regions), as (kind, peer, name): those every run of it records alike,
/// unlike the comm primitives, whose batching follows the timing.
fn program_events(r: &RankTrace) -> Vec<(Kind, Option<u32>, String)> {
    r.events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                Kind::InvokeIssued
                    | Kind::InvokeAnswered
                    | Kind::Read
                    | Kind::Write
                    | Kind::CollEnter
                    | Kind::CollExit
                    | Kind::RegionBegin
                    | Kind::RegionEnd
            )
        })
        .map(|e| {
            let name = match e.kind {
                Kind::Read | Kind::Write => String::new(),
                _ => r.name(e.a),
            };
            (e.kind, e.peer, name)
        })
        .collect()
}

fn ends_in_order(events: &[Event]) -> bool {
    events
        .windows(2)
        .all(|w| w[0].end <= w[1].end && w[0].begin <= w[0].end)
}

fn a_traced_job_writes_one_file_per_rank(t: Scenario) {
    let dir = trace_dir(&t);
    let t = t.env("MTTL_TRACE", dir.to_str().unwrap());
    t.run(3, || workload(5)).assert_success();
    let trace = mttl_trace::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(trace.ranks.len(), 3);
    for r in &trace.ranks {
        assert!(
            matches!(r.ending, Ending::Complete(tot) if tot.dropped == 0),
            "{:?}",
            r.ending
        );
        assert!(
            ends_in_order(&r.events),
            "rank {} out of order",
            r.header.rank
        );
        let count = |k| r.events.iter().filter(|e| e.kind == k).count();
        // 5 barriers and the allreduce, each entered and left.
        assert_eq!(count(Kind::CollEnter), 6, "rank {}", r.header.rank);
        assert_eq!(count(Kind::CollExit), 6);
        assert!(count(Kind::RecvAny) > 0 && count(Kind::Send) > 0);
        // Each rank but 0 serves a square per iteration.
        let served: Vec<_> = r
            .events
            .iter()
            .filter(|e| e.kind == Kind::InvokeServed)
            .map(|e| r.name(e.a))
            .collect();
        if r.header.rank != 0 {
            assert_eq!(served.iter().filter(|n| n.ends_with("square")).count(), 5);
        }
    }
    let r0 = &trace.ranks[0];
    let issued: Vec<_> = r0
        .events
        .iter()
        .filter(|e| e.kind == Kind::InvokeIssued && r0.name(e.a).ends_with("square"))
        .map(|e| e.peer)
        .collect();
    // Calls to rank 0 itself run locally: only the remote ones are sent.
    assert_eq!(
        issued,
        [1, 2].repeat(5).into_iter().map(Some).collect::<Vec<_>>()
    );
    let regions = program_events(r0)
        .into_iter()
        .filter(|e| e.2 == "step")
        .count();
    assert_eq!(regions, 10);
    let text = mttl_trace::stats(&trace);
    assert!(text.contains("barrier") && text.contains("step"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_tiny_buffer_flushes_often_and_loses_nothing(t: Scenario) {
    let iterations = 400;
    let memory_dir = trace_dir(&t).with_extension("memory");
    let local_dir = trace_dir(&t).with_extension("local");
    let _ = std::fs::remove_dir_all(&memory_dir);
    let _ = std::fs::remove_dir_all(&local_dir);
    t.clone()
        .env("MTTL_TRACE", memory_dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "memory")
        .run(2, move || workload(iterations))
        .assert_success();
    t.env("MTTL_TRACE", local_dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "local")
        .env("MTTL_TRACE_BUFFER", "4K")
        .run(2, move || workload(iterations))
        .assert_success();
    let memory = mttl_trace::read_dir(&memory_dir).unwrap_or_else(|e| panic!("{e}"));
    let local = mttl_trace::read_dir(&local_dir).unwrap_or_else(|e| panic!("{e}"));
    for (m, l) in memory.ranks.iter().zip(&local.ranks) {
        let (Ending::Complete(mt), Ending::Complete(lt)) = (&m.ending, &l.ending) else {
            panic!("incomplete: {:?} {:?}", m.ending, l.ending);
        };
        assert_eq!((mt.flushes, mt.dropped), (0, 0));
        assert!(lt.flushes >= 5, "rank {}: {lt:?}", l.header.rank);
        let flushes = l.events.iter().filter(|e| e.kind == Kind::Flush).count();
        assert_eq!(flushes as u64, lt.flushes);
        assert!(ends_in_order(&l.events));
        let (pm, pl) = (program_events(m), program_events(l));
        assert!(pm.len() > 200, "{}", pm.len());
        assert_eq!(pm, pl, "rank {}", m.header.rank);
    }
    let _ = std::fs::remove_dir_all(&memory_dir);
    let _ = std::fs::remove_dir_all(&local_dir);
}

fn a_killed_rank_leaves_its_complete_blocks(t: Scenario) {
    let dir = trace_dir(&t);
    let out = t
        .env("MTTL_TRACE", dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "local")
        .env("MTTL_TRACE_BUFFER", "4K")
        .run(2, || {
            workload(40);
            mttl::invoke(1, die, ());
        });
    assert!(!out.status.success(), "the job should fail");
    let r1 = mttl_trace::read_file(&dir.join(mttl_core::trace::file_name(1)))
        .unwrap_or_else(|e| panic!("{e}"));
    let Ending::Truncated { offset } = r1.ending else {
        panic!("rank 1's trace should be cut: {:?}", r1.ending);
    };
    assert!(r1.blocks >= 3, "{} blocks", r1.blocks);
    let len = std::fs::metadata(dir.join(mttl_core::trace::file_name(1)))
        .unwrap()
        .len();
    assert_eq!(
        offset, len,
        "a rank killed between writes leaves whole blocks"
    );
    assert!(ends_in_order(&r1.events));
    let served = r1
        .events
        .iter()
        .filter(|e| e.kind == Kind::InvokeServed)
        .count();
    assert!(served > 10, "{served} calls served before the last write");
    let _ = std::fs::remove_dir_all(&dir);
}

fn an_unwritable_directory_is_refused_at_start(t: Scenario) {
    let file = trace_dir(&t).with_extension("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let dir = file.join("traces");
    let out = t
        .env("MTTL_TRACE", dir.to_str().unwrap())
        .run(2, || workload(1));
    out.assert_failure();
    out.stderr_line(&["cannot create the trace directory", "MTTL_TRACE"]);
    let _ = std::fs::remove_file(&file);
}

/// Makes this rank's files fail to grow past `bytes` (EFBIG, as a full
/// disk fails a write), the signal that would otherwise kill it ignored.
#[mttl::remote]
fn limit_file_size(bytes: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to fill; SIG_IGN is a valid
    // disposition for SIGXFSZ; setrlimit reads the struct it is given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim), 0);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        lim.rlim_cur = bytes;
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

fn a_full_disk_stops_tracing_and_the_program_finishes(t: Scenario) {
    let dir = trace_dir(&t);
    let limit = 16 << 10;
    let out = t
        .env("MTTL_TRACE", dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "local")
        .env("MTTL_TRACE_BUFFER", "4K")
        .run(2, move || {
            mttl::spmd(limit_file_size, (limit,));
            workload(200);
        });
    out.assert_success();
    for rank in 0..2u32 {
        let said = out
            .stderr
            .lines()
            .filter(|l| l.contains(&format!("rank {rank}: writing the trace to")))
            .count();
        assert_eq!(said, 1, "rank {rank} should say so once:\n{}", out.stderr);
        let path = dir.join(mttl_core::trace::file_name(rank));
        let r = mttl_trace::read_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(r.ending, Ending::WriteFailed { offset } if offset <= limit),
            "{:?}",
            r.ending
        );
        assert!(!r.events.is_empty() && ends_in_order(&r.events));
        let text = mttl_trace::info(&mttl_trace::Trace {
            dir: dir.clone(),
            ranks: vec![r],
        });
        assert!(text.contains("a write failed"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_full_buffer_under_memory_drops_and_says_so(t: Scenario) {
    let dir = trace_dir(&t);
    let out = t
        .env("MTTL_TRACE", dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "memory")
        .env("MTTL_TRACE_BUFFER", "4K")
        .run(2, || workload(200));
    out.assert_success();
    let trace = mttl_trace::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    for r in &trace.ranks {
        let Ending::Complete(totals) = r.ending else {
            panic!("{:?}", r.ending);
        };
        assert!(totals.dropped > 0 && totals.flushes == 0, "{totals:?}");
        assert_eq!(totals.events, r.events.len() as u64);
        let size = std::fs::metadata(&r.path).unwrap().len();
        assert!(size <= 4096 + 64 + 52, "{size} bytes from a 4 KiB buffer");
        out.stderr_line(&[
            &format!("rank {}: ", r.header.rank),
            "trace events were dropped",
            "MTTL_TRACE_BUFFER",
        ]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn equalized_suspensions_are_equal_and_reconstruct_to_a_memory_run(t: Scenario) {
    let iterations = 100;
    let memory_dir = trace_dir(&t).with_extension("memory");
    let eq_dir = trace_dir(&t).with_extension("equalized");
    let _ = std::fs::remove_dir_all(&memory_dir);
    let _ = std::fs::remove_dir_all(&eq_dir);
    t.clone()
        .env("MTTL_TRACE", memory_dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "memory")
        .run(3, move || workload(iterations))
        .assert_success();
    t.env("MTTL_TRACE", eq_dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "equalized")
        .env("MTTL_TRACE_BUFFER", "4K")
        .run(3, move || workload(iterations))
        .assert_success();
    let memory = mttl_trace::read_dir(&memory_dir).unwrap_or_else(|e| panic!("{e}"));
    let eq = mttl_trace::read_dir(&eq_dir).unwrap_or_else(|e| panic!("{e}"));
    let zs: Vec<Vec<u64>> = eq
        .ranks
        .iter()
        .map(|r| {
            assert!(matches!(r.ending, Ending::Complete(tot) if tot.dropped == 0));
            assert!(ends_in_order(&r.events));
            r.events
                .iter()
                .filter(|e| e.kind == Kind::Suspension)
                .map(|e| {
                    assert!(e.end - e.begin >= e.a, "waited less than Z: {e:?}");
                    e.a
                })
                .collect()
        })
        .collect();
    assert!(zs[0].len() >= 5, "{} suspensions", zs[0].len());
    assert!(zs.iter().all(|z| *z == zs[0]), "{zs:?}");
    let offsets = eq.ranks[0]
        .events
        .iter()
        .filter(|e| e.kind == Kind::ClockOffset)
        .count();
    assert_eq!(
        offsets,
        2 * zs[0].len(),
        "one per other rank and suspension"
    );
    let rec = mttl_trace::reconstruct(&eq);
    for ((m, e), r) in memory.ranks.iter().zip(&eq.ranks).zip(&rec.ranks) {
        assert_eq!(r.suspensions, zs[0].len());
        assert!(r.span < r.traced_span);
        let mut rebuilt = e.clone();
        rebuilt.events = r.events.clone();
        assert!(ends_in_order(&rebuilt.events), "rank {}", e.header.rank);
        let (pm, pr) = (program_events(m), program_events(&rebuilt));
        assert!(pm.len() > 100, "{}", pm.len());
        assert_eq!(pm, pr, "rank {}", m.header.rank);
    }
    let check = mttl_trace::check(&eq);
    assert!(check.pairs > 1000, "{check:?}");
    assert!(!check.failed(), "{check:?}");
    let stats = mttl_trace::stats(&eq);
    let line = format!("suspensions: {} (Z mean ", zs[0].len());
    assert_eq!(stats.matches(&line).count(), eq.ranks.len(), "{stats}");
    let _ = std::fs::remove_dir_all(&memory_dir);
    let _ = std::fs::remove_dir_all(&eq_dir);
}

fn thread_events_are_recorded_at_level_threads_and_consistent(t: Scenario) {
    use mttl_core::trace::format::LOOP_THREAD;
    let dir = trace_dir(&t);
    let calls_dir = trace_dir(&t).with_extension("calls");
    let _ = std::fs::remove_dir_all(&calls_dir);
    t.clone()
        .env("MTTL_TRACE", calls_dir.to_str().unwrap())
        .run(2, || workload(20))
        .assert_success();
    t.env("MTTL_TRACE", dir.to_str().unwrap())
        .env("MTTL_TRACE_LEVEL", "threads")
        .run(2, || workload(20))
        .assert_success();
    let calls = mttl_trace::read_dir(&calls_dir).unwrap_or_else(|e| panic!("{e}"));
    for r in &calls.ranks {
        assert!(
            !r.events.iter().any(|e| e.kind.is_thread()),
            "the default level records no thread event"
        );
    }
    let trace = mttl_trace::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    for r in &trace.ranks {
        let rank = r.header.rank;
        let count = |k| r.events.iter().filter(|e| e.kind == k).count();
        let served = count(Kind::InvokeServed);
        // Every call served runs in a thread of its own.
        assert!(count(Kind::ThreadSpawn) >= served, "rank {rank}");
        assert!(
            count(Kind::ThreadRun) > count(Kind::ThreadSpawn),
            "rank {rank}"
        );
        let mut spawned = std::collections::HashSet::new();
        let mut exited = std::collections::HashSet::new();
        let mut running: Option<u64> = None;
        for e in &r.events {
            match e.kind {
                Kind::ThreadSpawn => {
                    assert!(
                        spawned.insert(e.b),
                        "rank {rank}: id {:#x} spawned twice",
                        e.b
                    );
                    assert!(!r.name(e.a).is_empty());
                }
                Kind::ThreadRun => {
                    assert!(
                        e.b == LOOP_THREAD || spawned.contains(&e.b),
                        "rank {rank}: ran {:#x}, never spawned",
                        e.b
                    );
                    assert!(
                        !exited.contains(&e.b),
                        "rank {rank}: ran {:#x} after its exit",
                        e.b
                    );
                    running = Some(e.b);
                }
                Kind::ThreadBlock | Kind::ThreadExit => {
                    assert_eq!(
                        running,
                        Some(e.b),
                        "rank {rank}: {} of a thread not running",
                        e.kind.name()
                    );
                    assert_ne!(e.b, LOOP_THREAD);
                    if e.kind == Kind::ThreadBlock {
                        assert!(!r.name(e.a).is_empty());
                    } else {
                        exited.insert(e.b);
                    }
                }
                Kind::SyncWait | Kind::InvokeServed => assert!(
                    running.is_some_and(|id| id != LOOP_THREAD),
                    "rank {rank}: {} outside a thread",
                    e.kind.name()
                ),
                _ => {}
            }
        }
        // Every call served finished: its thread exited.
        assert!(
            exited.len() >= served,
            "rank {rank}: {} exits",
            exited.len()
        );
    }
    let info = mttl_trace::info(&trace);
    assert!(
        info.contains("threads spawned") && info.contains("switches"),
        "{info}"
    );
    let stats = mttl_trace::stats(&trace);
    assert!(stats.contains("thread blocks by reason"), "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&calls_dir);
}

fn a_rank_killed_in_a_suspension_leaves_readable_traces(t: Scenario) {
    let dir = trace_dir(&t);
    // Every collective is followed by a 3 s suspension with a write; rank 1
    // dies 1 s into the first one after its timer starts.
    let out = t
        .env("MTTL_TRACE", dir.to_str().unwrap())
        .env("MTTL_TRACE_FLUSH", "static:3s,3s")
        .env("MTTL_TRACE_BUFFER", "4K")
        .env("MTTL_TRACE_THRESHOLD", "1")
        .run(2, || {
            workload(2);
            mttl::invoke(1, die_in, (1000u64,));
            mttl::spmd(barrier_everywhere, ());
        });
    assert!(!out.status.success(), "the job should fail");
    assert!(
        out.elapsed < std::time::Duration::from_secs(50),
        "the job took {:?}",
        out.elapsed
    );
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("rank 1") || l.contains("rank 0"))
        .collect();
    assert!(
        !lines.is_empty(),
        "no rank says what happened:\n{}",
        out.stderr
    );
    let path = dir.join(mttl_core::trace::file_name(1));
    let r1 = mttl_trace::read_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let Ending::Truncated { offset } = r1.ending else {
        panic!("rank 1's trace should be cut: {:?}", r1.ending);
    };
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(
        offset, len,
        "killed in a wait, not in a write: whole blocks"
    );
    assert!(ends_in_order(&r1.events));
    // The suspensions before the kill were written: their waits are there.
    let suspensions = r1
        .events
        .iter()
        .filter(|e| e.kind == Kind::Suspension)
        .count();
    assert!(suspensions >= 2, "{suspensions} suspensions written");
    // Rank 0's file reads too, to its last complete block at least.
    let r0 = mttl_trace::read_file(&dir.join(mttl_core::trace::file_name(0)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r0.blocks >= 1 && ends_in_order(&r0.events));
    let _ = std::fs::remove_dir_all(&dir);
}
