//! Many ranks on one host keep their links through a pause: 64 TCP ranks
//! exchange a message with every other rank, then all wait idle for longer
//! than `MTTL_LINK_TIMEOUT` (every link of the job going silent at the same
//! moment), then exchange again, and the job ends cleanly with no live
//! rank taken for gone.
//!
//! The links' keepalive probes would all fire together if their idle times
//! were equal, overflowing the loopback queue and closing healthy links
//! after three lost probes (`backend/tcp/liveness.rs`). The pause lasts
//! `MANY_RANKS_IDLE_SECS` seconds (12 by default here, past the 5 s link
//! timeout; 60 to stage a long pause); `npb --idle-secs` runs the same
//! scenario with a real kernel at full size.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mttl_comm::{AnyComm, Comm};

/// Ranks in the job.
const RANKS: usize = 64;
/// `MTTL_LINK_TIMEOUT` in the job, in seconds (the smallest allowed, so
/// that the pause outlasts it many times over).
const LINK_TIMEOUT: u64 = 5;
/// Variable holding the pause, in seconds.
const IDLE_VAR: &str = "MANY_RANKS_IDLE_SECS";
/// The pause by default.
const IDLE_SECS: u64 = 12;

#[test]
fn sixty_four_ranks_keep_their_links_through_an_idle_pause() {
    const TEST: &str = "sixty_four_ranks_keep_their_links_through_an_idle_pause";
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
        .args(["-n", &RANKS.to_string(), "--"])
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
    for rank in 0..RANKS {
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
    exchange_with_everyone(&mut comm, 1);
    // Every link falls silent at once. Rank 0 waits out the pause in a
    // receive that must time out (parked, looking at its links); the others
    // wait for its word, parked likewise.
    if me == 0 {
        let got = comm.recv_any(Some(idle)).expect("the pause");
        assert!(got.is_none(), "nothing is sent during the pause: {got:?}");
        for r in 1..comm.size() {
            comm.send(r, 2, b"go").expect("go");
        }
    } else {
        let go = comm
            .recv_from(0, Some(idle + Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("rank {me}: waiting out the pause: {e}"))
            .expect("rank 0's word after the pause");
        assert_eq!(go.tag, 2);
    }
    exchange_with_everyone(&mut comm, 3);
    println!("rank {me} kept its links");
    comm.finish()
        .unwrap_or_else(|e| panic!("rank {me}: finish: {e}"));
    std::process::exit(0);
}

/// Sends every other rank its rank number with `tag` and receives theirs.
fn exchange_with_everyone(comm: &mut AnyComm, tag: u32) {
    let (me, size) = (comm.rank(), comm.size());
    for r in (0..size).filter(|&r| r != me) {
        comm.send(r, tag, &(me as u32).to_le_bytes())
            .unwrap_or_else(|e| panic!("rank {me}: sending to {r}: {e}"));
    }
    let mut heard = vec![false; size];
    heard[me] = true;
    while !heard.iter().all(|&h| h) {
        let m = comm
            .recv_any(Some(Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("rank {me}: exchange {tag}: {e}"))
            .unwrap_or_else(|| panic!("rank {me}: exchange {tag} timed out"));
        assert_eq!(m.tag, tag, "rank {me}: from {}", m.source);
        heard[m.source] = true;
    }
}
