//! Many ranks on one host keep their links through a pause: 128 TCP ranks
//! (`MANY_RANKS_N`) exchange a message with every other rank, then all
//! stay silent on most links for longer than `MTTL_LINK_TIMEOUT` (every
//! link going quiet at the same moment) while each polls without parking
//! and keeps traffic on its log2 N partners' links (as a kernel's exchanges
//! do: cores saturated, the loopback queue busy), then exchange again, and
//! the job ends cleanly with no live rank taken for gone.
//!
//! The pause lasts `MANY_RANKS_IDLE_SECS` seconds (12 by default, past the
//! 5 s link timeout: the keepalive and silence checks would run several
//! times over; 60 to stage a long pause); `npb --idle-secs` runs the same
//! scenario with a real kernel at full size. Keepalive probes on every link
//! with only the per-link jitter failed this test (a link "silent for
//! 5 s"); links within one host are now not probed at all
//! (`backend/tcp/liveness.rs`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mttl_comm::{AnyComm, Comm};

/// Ranks in the job.
const RANKS: usize = 128;
/// `MTTL_LINK_TIMEOUT` in the job, in seconds (the smallest allowed, so
/// that the pause outlasts it many times over).
const LINK_TIMEOUT: u64 = 5;
/// Variable holding the pause, in seconds.
const IDLE_VAR: &str = "MANY_RANKS_IDLE_SECS";
/// The tag of the traffic during the pause, which the exchanges skip.
const TRAFFIC: u32 = 9;
/// The pause by default.
const IDLE_SECS: u64 = 12;

#[test]
fn many_ranks_keep_their_links_through_an_idle_pause() {
    const TEST: &str = "many_ranks_keep_their_links_through_an_idle_pause";
    if std::env::var_os("MTTL_RANK").is_some() {
        rank_side();
    }
    let idle = std::env::var(IDLE_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(IDLE_SECS);
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_mttlrun"))
        .env("MTTL_LINK_TIMEOUT", LINK_TIMEOUT.to_string())
        .env(IDLE_VAR, idle.to_string())
        .env_remove("MTTL_NP")
        .args(["-n", &ranks().to_string(), "--"])
        .arg(std::env::current_exe().expect("the test binary"))
        .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("mttlrun starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(out.status.success(), "{}\n{text}", out.status);
    for rank in 0..ranks() {
        assert!(
            stdout.contains(&format!("rank {rank} kept its links\n")),
            "rank {rank}\n{text}"
        );
    }
    assert!(!text.contains("gone"), "{text}");
    assert!(
        start.elapsed() >= Duration::from_secs(idle),
        "the pause did not happen"
    );
}

/// One rank's part; never returns.
fn rank_side() -> ! {
    let idle = Duration::from_secs(
        std::env::var(IDLE_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(IDLE_SECS),
    );
    let mut comm = AnyComm::init().unwrap_or_else(|e| panic!("init: {e}"));
    let me = comm.rank();
    exchange_with_everyone(&mut comm, 1, Vec::new());
    // Every link falls silent at once but those to a few partners, which
    // carry traffic through the pause (as a kernel's exchanges do, with
    // log2 N partners), while every rank polls without parking: the cores
    // are saturated and the loopback queue busy, as in a real run. Rank 0
    // gives the word to stop when the pause is over.
    let deadline = Instant::now() + idle;
    let partners: Vec<usize> = (0..comm.size().trailing_zeros())
        .map(|k| me ^ (1 << k))
        .collect();
    let mut sent = 0usize;
    // What ranks already past the pause sent for the next exchange.
    let mut early = Vec::new();
    loop {
        if me == 0 && Instant::now() >= deadline {
            for r in 1..comm.size() {
                comm.send(r, 2, b"go").expect("go");
            }
            break;
        }
        let p = partners[sent % partners.len()];
        comm.send(p, TRAFFIC, &[0; 1024])
            .unwrap_or_else(|e| panic!("rank {me}: traffic to {p}: {e}"));
        sent += 1;
        let mut go = false;
        while let Some(env) = comm
            .probe()
            .unwrap_or_else(|e| panic!("rank {me}: during the pause: {e}"))
        {
            let m = comm
                .recv_from(env.source, None)
                .expect("probed")
                .expect("it");
            match m.tag {
                2 => go = true,
                TRAFFIC => {}
                _ => early.push(m.source),
            }
        }
        if go {
            break;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(60),
            "rank {me}: no word from rank 0"
        );
        std::thread::yield_now();
    }
    exchange_with_everyone(&mut comm, 3, early);
    println!("rank {me} kept its links");
    comm.finish()
        .unwrap_or_else(|e| panic!("rank {me}: finish: {e}"));
    std::process::exit(0);
}

/// Sends every other rank its rank number with `tag` and receives theirs,
/// those of `early` already received.
fn exchange_with_everyone(comm: &mut AnyComm, tag: u32, early: Vec<usize>) {
    let (me, size) = (comm.rank(), comm.size());
    for r in (0..size).filter(|&r| r != me) {
        comm.send(r, tag, &(me as u32).to_le_bytes())
            .unwrap_or_else(|e| panic!("rank {me}: sending to {r}: {e}"));
    }
    let mut heard = vec![false; size];
    heard[me] = true;
    for r in early {
        heard[r] = true;
    }
    while !heard.iter().all(|&h| h) {
        let m = comm
            .recv_any(Some(Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("rank {me}: exchange {tag}: {e}"))
            .unwrap_or_else(|| panic!("rank {me}: exchange {tag} timed out"));
        if m.tag == TRAFFIC {
            continue;
        }
        assert_eq!(m.tag, tag, "rank {me}: from {}", m.source);
        heard[m.source] = true;
    }
}

/// The ranks in the job: `MANY_RANKS_N`, or [`RANKS`].
fn ranks() -> usize {
    std::env::var("MANY_RANKS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RANKS)
}
