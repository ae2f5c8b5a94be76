//! The time-independent export, on every backend: a traced run of three
//! ranks (calls, remote writes and reads, a large write that travels as a
//! header and a body, barriers, an allreduce) exported with
//! `TiTrace::from_trace` and written as a TI directory; the simulator reads
//! that directory, runs it to the end (no deadlock: every receive finds its
//! message) and holds, per rank, as many sends, receives and computations
//! as the export, whose messages are the trace's comm primitives (a headed
//! send counting twice). A directory whose files disagree on the rank count
//! is refused.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::path::PathBuf;

use mttl::GlobalArray;
use mttl_core::trace::format::Kind;
use mttl_sim::{OpKind, Params};
use mttl_trace::TiTrace;
use runtime_support::{on_every_backend, Scenario};

on_every_backend!(an_exported_run_simulates_with_the_trace_s_operations);

thread_local! {
    static MINE: std::cell::RefCell<Option<GlobalArray<u64>>> = const { std::cell::RefCell::new(None) };
}

#[mttl::remote]
fn share() -> mttl::GlobalPtr<u64> {
    let a = GlobalArray::<u64>::new(1 << 15);
    let p = a.global_ptr();
    MINE.with(|m| *m.borrow_mut() = Some(a));
    p
}

#[mttl::remote]
fn step(round: u64) -> u64 {
    mttl::barrier();
    mttl::allreduce_sum(round)
}

/// Per iteration: a call to every rank, a small write and read, a large
/// write (above the eager limit), then a barrier and an allreduce on every
/// rank.
fn workload(iterations: u64) {
    let n = mttl::size();
    let ptrs = mttl::spmd(share, ());
    let big = vec![7u64; 1 << 14];
    for i in 0..iterations {
        let target = ptrs[(i as usize + 1) % n];
        target.write(i);
        assert_eq!(target.read(), i);
        target.nwrite_slice(&big);
        let sums = mttl::spmd(step, (i,));
        assert!(sums.iter().all(|&s| s == i * n as u64));
    }
}

fn out_dir(t: &Scenario, what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mttl-ti-{}-{what}-{}",
        t.name.replace("::", "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn an_exported_run_simulates_with_the_trace_s_operations(t: Scenario) {
    let trace_dir = out_dir(&t, "trace");
    let ti_dir = out_dir(&t, "ti");
    let t2 = t.clone().env("MTTL_TRACE", trace_dir.to_str().unwrap());
    t2.run(3, || workload(4)).assert_success();
    let trace = mttl_trace::read_dir(&trace_dir).unwrap_or_else(|e| panic!("{e}"));
    let ti = TiTrace::from_trace(&trace);
    ti.write_dir(&ti_dir).unwrap();

    // The export's messages are the trace's comm primitives (outside
    // suspensions, none under the default buffer).
    let rec = mttl_trace::reconstruct(&trace);
    for (rank, r) in rec.ranks.iter().enumerate() {
        let count = |kinds: &[Kind]| r.events.iter().filter(|e| kinds.contains(&e.kind)).count();
        let sends = count(&[Kind::Send, Kind::Nsend])
            + 2 * count(&[Kind::SendHeadedBulk, Kind::NsendHeaded]);
        let recvs = count(&[Kind::RecvAny, Kind::RecvFrom, Kind::RecvInto]);
        let (calcs, ti_sends, ti_recvs) = ti.counts()[rank];
        assert_eq!((ti_sends, ti_recvs), (sends, recvs), "rank {rank}");
        assert!(calcs > 0 && sends > 0 && recvs > 0, "rank {rank}");
    }
    let headed = rec.ranks.iter().flat_map(|r| &r.events).any(|e| {
        matches!(e.kind, Kind::SendHeadedBulk | Kind::NsendHeaded)
            || (e.kind == Kind::Send && e.a & 0x4000 != 0)
    });
    assert!(
        headed,
        "the large write should travel as a header and a body"
    );

    let sched = mttl_sim::input::load(&ti_dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sched.num_ranks(), 3);
    for (rank, &(calcs, sends, recvs)) in ti.counts().iter().enumerate() {
        let mut c = (0, 0, 0);
        for id in sched.rank_ops(rank) {
            match sched.op(id).kind {
                OpKind::Calc => c.0 += 1,
                OpKind::Send => c.1 += 1,
                OpKind::Recv => c.2 += 1,
            }
        }
        assert_eq!(c, (calcs, sends, recvs), "rank {rank}");
    }
    let report = mttl_sim::simulate(&sched, &Params::default());
    assert!(report.deadlock.is_none(), "{:?}", report.deadlock);
    assert!(report.max.0 > 0);

    // A rank file that states another rank count is refused, naming it.
    let f = ti_dir.join("rank-00001.ti");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, text.replacen("ranks 3", "ranks 4", 1)).unwrap();
    let e = mttl_sim::input::load(&ti_dir).unwrap_err().to_string();
    assert!(
        e.contains("rank-00001.ti:2") && e.contains("4 ranks"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&trace_dir);
    let _ = std::fs::remove_dir_all(&ti_dir);
}
