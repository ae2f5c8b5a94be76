//! The block-by-block reader ([`TraceFiles`]): its commands say what the
//! in-memory ones say, on a real trace and on a synthetic one, and the
//! events it holds at once stay bounded by the blocks, not the trace
//! (counted, not timed).

mod support;

use std::path::{Path, PathBuf};

use mttl_core::trace::format::*;
use mttl_trace::TraceFiles;
use support::push_block;

fn scratch(what: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "mttl-trace-streaming-{what}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Every command, both ways, on `dir`; the streamed timeline in runs of
/// `run` events.
fn same_both_ways(dir: &Path, run: usize, what: &str) -> TraceFiles {
    let t = mttl_trace::read_dir(dir).unwrap();
    let mut f = TraceFiles::open(dir).unwrap();
    assert_eq!(f.info(), mttl_trace::info(&t));
    assert_eq!(f.stats().unwrap(), mttl_trace::stats(&t));
    let rec = f.reconstruct().unwrap();
    assert_eq!(
        mttl_trace::reconstruction_text(&rec),
        mttl_trace::reconstruct_report(&t)
    );
    assert_eq!(
        mttl_trace::reconstruction_json(&rec),
        mttl_trace::reconstruct_json(&t)
    );
    assert_eq!(f.check().unwrap(), mttl_trace::check(&t));
    let tmp = scratch(&format!("spill-{what}-{run}"));
    let mut out = Vec::new();
    f.timeline_in_runs(&tmp, &mut out, run).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), mttl_trace::timeline(&t));
    // The spilled runs are gone.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&tmp);
    f
}

#[test]
fn a_real_trace_reads_the_same_streamed_and_whole() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/heavy-threads");
    for run in [7, 1000, mttl_trace::TIMELINE_RUN] {
        same_both_ways(&dir, run, "real");
    }
}

/// Writes rank `rank` of a 2-rank ping-pong of `rounds` round trips (rank 0
/// sends, rank 1 answers), `per_block` events a block, with a suspension,
/// its clock record and rank 0's offset measurement every 1000 rounds;
/// rank 1's clock runs `skew` ns behind rank 0's.
fn pingpong_rank(dir: &Path, rank: u32, rounds: u64, per_block: usize, skew: u64) {
    let start = 1_000_000 - u64::from(rank) * skew;
    let header = FileHeader {
        version: VERSION,
        status: STATUS_FINISHED,
        policy: 3,
        job_id: 7,
        rank,
        size: 2,
        mono_start: start,
        real_start: 0,
        buffer: 1 << 16,
    };
    let mut file = header.encode().to_vec();
    let mut events = Vec::new();
    let ev = |kind, peer, a, b, begin, end| Event {
        kind,
        peer,
        a,
        b,
        begin,
        end,
    };
    let mut z = 0;
    for i in 0..rounds {
        // Round i: rank 0 sends at t, rank 1 receives by t+2000 and
        // answers at t+3000, rank 0 receives by t+5000 (rank 0's time).
        let t = 1_000_000 + i * 10_000 + z;
        let here = |x: u64| x - u64::from(rank) * skew;
        if rank == 0 {
            events.push(ev(Kind::Send, Some(1), 3, 8, here(t), here(t + 500)));
            events.push(ev(
                Kind::RecvAny,
                Some(1),
                4,
                8,
                here(t + 4_000),
                here(t + 5_000),
            ));
        } else {
            events.push(ev(
                Kind::RecvAny,
                Some(0),
                3,
                8,
                here(t + 1_000),
                here(t + 2_000),
            ));
            events.push(ev(
                Kind::Send,
                Some(0),
                4,
                8,
                here(t + 3_000),
                here(t + 3_500),
            ));
        }
        if i % 1000 == 999 {
            let s = t + 6_000;
            if rank == 0 {
                events.push(ev(
                    Kind::ClockOffset,
                    Some(1),
                    zigzag(-(skew as i64)),
                    50,
                    s,
                    s,
                ));
            }
            events.push(ev(
                Kind::Suspension,
                None,
                2_000,
                100,
                here(s),
                here(s + 2_000),
            ));
            events.push(ev(
                Kind::SuspensionClock,
                None,
                1_000,
                50,
                here(s + 2_000),
                here(s + 2_000),
            ));
            z += 2_000;
        }
    }
    let mut prev = start;
    for chunk in events.chunks(per_block) {
        let base = prev;
        let mut payload = Vec::new();
        for e in chunk {
            let mut rec = [0u8; MAX_EVENT_LEN];
            let n = encode_event(&mut rec, e, prev);
            payload.extend_from_slice(&rec[..n]);
            prev = e.end;
        }
        push_block(&mut file, BLOCK_EVENTS, chunk.len() as u32, base, &payload);
    }
    let totals = EndTotals {
        events: events.len() as u64,
        dropped: 0,
        flushes: 0,
    };
    push_block(&mut file, BLOCK_END, 0, prev, &totals.encode());
    std::fs::write(dir.join(format!("rank-{rank:05}.mttltrace")), file).unwrap();
}

fn pingpong(what: &str, rounds: u64, per_block: usize) -> PathBuf {
    let dir = scratch(what);
    for rank in 0..2 {
        pingpong_rank(&dir, rank, rounds, per_block, 2_500);
    }
    dir
}

#[test]
fn a_synthetic_trace_reads_the_same_streamed_and_whole() {
    let dir = pingpong("same", 5_000, 300);
    let f = same_both_ways(&dir, 1_000, "synthetic");
    // The skew makes raw times disagree; the offsets correct them.
    let c = mttl_trace::check(&mttl_trace::read_dir(&dir).unwrap());
    assert_eq!(c.pairs, 10_000);
    assert!(c.violations_before > 0, "{c:?}");
    assert_eq!(c.violations_after, 0, "{c:?}");
    assert!(f.peak_retained() < 3_000, "{}", f.peak_retained());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_events_held_stay_bounded_however_long_the_trace() {
    let per_block = 1_000;
    for rounds in [20_000, 200_000] {
        let dir = pingpong(&format!("long{rounds}"), rounds, per_block);
        let mut f = TraceFiles::open(&dir).unwrap();
        let c = f.check().unwrap();
        assert_eq!(c.pairs, 2 * rounds);
        assert_eq!((c.unmatched_sends, c.unmatched_receives), (0, 0));
        assert_eq!(c.violations_after, 0, "{c:?}");
        f.stats().unwrap();
        let rec = f.reconstruct().unwrap();
        assert_eq!(rec.ranks[0].event_count as u64, 2 * rounds);
        // The clock events kept grow with the suspensions (3 per 1000
        // rounds on rank 0, 2 on rank 1), the rest is the two open blocks
        // and the messages in flight: the same bound for ten times the
        // trace.
        let clock = rounds / 1000 * 5;
        let held = f.peak_retained() as u64 - clock;
        assert!(
            held <= 2 * per_block as u64 + 4,
            "{rounds} rounds: {held} events held beside {clock} clock events"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_timeline_holds_one_run_however_long_the_trace() {
    let dir = pingpong("timeline", 50_000, 1_000);
    let mut f = TraceFiles::open(&dir).unwrap();
    let tmp = scratch("timeline-spill");
    let mut lines = 0usize;
    let mut last = -1.0f64;
    struct Lines<'a>(&'a mut usize, &'a mut f64, Vec<u8>);
    impl std::io::Write for Lines<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.2.extend_from_slice(b);
            while let Some(i) = self.2.iter().position(|&c| c == b'\n') {
                let line: Vec<u8> = self.2.drain(..=i).collect();
                let line = String::from_utf8(line).unwrap();
                if !line.starts_with('#') {
                    let begin: f64 = line.split(' ').next().unwrap().parse().unwrap();
                    assert!(begin >= *self.1, "{line} after {}", self.1);
                    *self.1 = begin;
                }
                *self.0 += 1;
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    f.timeline_in_runs(&tmp, &mut Lines(&mut lines, &mut last, Vec::new()), 4_096)
        .unwrap();
    assert_eq!(lines, 1 + 4 * 50_000 + 5 * 50);
    let clock = 5 * 50;
    assert!(
        f.peak_retained() <= 4_096 + 2 * 1_000 + clock,
        "{}",
        f.peak_retained()
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&tmp);
}
