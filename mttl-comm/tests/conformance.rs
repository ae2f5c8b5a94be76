//! The conformance suite: every backend passes the same scenarios, under the
//! same test names (`tcp::ping_pong`, `mpi::ping_pong`, `local::ping_pong`,
//! ...).
//!
//! On `tcp` and `mpi` each test is its own multi-process job. The test
//! function, run by the test harness, launches `mttlrun -n N --backend B` on
//! this very test binary, asking it to run only itself (`--exact
//! tcp::ping_pong`); in those child processes the launch environment is set,
//! so the same function runs the scenario on its rank instead of launching.
//! The parent checks that the job exits 0 within a time limit and shows
//! every rank's output otherwise.
//!
//! On `local` the job runs inside the test: one thread per rank, each with
//! its endpoint of [`LocalComm::job`]; the test fails if a rank panics or
//! the job outlives the time limit.
//!
//! The suite checks the contract of `Comm` on every backend, and each method
//! of `CommTuning` for what every version of it must do, the provided ones
//! included (`local` takes them all).

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mttl_comm::backend::local::LocalComm;
use mttl_comm::{AnyComm, Comm, CommTuning, Envelope, ErrorKind, Message, Rank, Received, Tag};

/// How long one job may take before the test fails (and the job is killed).
const JOB_TIMEOUT: Duration = Duration::from_secs(180);

fn in_job() -> bool {
    std::env::var_os("MTTL_RANK").is_some() || mttl_comm::env::mpi_launcher_var().is_some()
}

/// What a rank of a local job throws to end its thread without finishing
/// (see [`leave_without_finish`]).
struct LeftWithoutFinish;

/// Ends this rank without `finish`: its process exits (TCP, MPI), or its
/// thread unwinds, dropping its endpoint (`local`).
fn leave_without_finish(c: &AnyComm) -> ! {
    if c.backend_name() == "local" {
        std::panic::resume_unwind(Box::new(LeftWithoutFinish));
    }
    std::process::exit(0);
}

/// Runs `scenario` on every rank of an `np`-rank job on `backend`.
fn run_job(backend: &str, np: usize, test: &str, env: &[(&str, &str)], scenario: fn(&mut AnyComm)) {
    if backend == "local" {
        return run_local_job(np, test, env, scenario);
    }
    if in_job() {
        let mut comm = AnyComm::init().unwrap_or_else(|e| panic!("init failed: {e}"));
        assert_eq!(comm.size(), np, "job size");
        assert_eq!(comm.backend_name(), backend);
        scenario(&mut comm);
        comm.finish()
            .unwrap_or_else(|e| panic!("finish failed: {e}"));
        // A rank is one job: leave now, whatever the caller does next.
        std::process::exit(0);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mttlrun"));
    cmd.arg("-n")
        .arg(np.to_string())
        .arg("--backend")
        .arg(backend)
        .arg("--tag-output")
        .arg("--")
        .arg(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("cannot start mttlrun");
    let pid = child.id();
    let start = Instant::now();
    let watchdog = std::thread::spawn(move || {
        while start.elapsed() < JOB_TIMEOUT {
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: kill(pid, 0) only checks for existence.
            if unsafe { libc::kill(pid as i32, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: sending SIGTERM to our own child; mttlrun stops its ranks.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        true
    });
    let out = child.wait_with_output().expect("waiting for mttlrun");
    let timed_out = watchdog.join().unwrap_or(false);
    let text = format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !timed_out,
        "{test} on {backend} did not finish within {JOB_TIMEOUT:?}\n{text}"
    );
    assert!(
        out.status.success(),
        "{test} on {backend} failed: {}\n{text}",
        out.status
    );
}

/// [`run_job`] on the local backend: rank `r` runs on a thread of its own
/// with endpoint `r`. The only variable of `env` it knows is
/// `MTTL_MAX_MESSAGE` (the environment is the whole test binary's).
fn run_local_job(np: usize, test: &str, env: &[(&str, &str)], scenario: fn(&mut AnyComm)) {
    let endpoints = match env.iter().find(|(k, _)| *k == "MTTL_MAX_MESSAGE") {
        Some((_, max)) => LocalComm::job_with_max_message(np, max.parse().expect("a size")),
        None => LocalComm::job(np),
    }
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    assert!(
        env.iter().all(|(k, _)| *k == "MTTL_MAX_MESSAGE"),
        "{test}: the local job cannot set {env:?}"
    );
    let (done, finished) = mpsc::channel();
    for endpoint in endpoints {
        let done = done.clone();
        let rank = endpoint.rank();
        std::thread::Builder::new()
            .name(format!("{test} rank {rank}"))
            .spawn(move || {
                let outcome = std::panic::catch_unwind(move || {
                    let mut comm = AnyComm::Local(endpoint);
                    assert_eq!(comm.size(), np, "job size");
                    assert_eq!(comm.backend_name(), "local");
                    scenario(&mut comm);
                    comm.finish()
                        .unwrap_or_else(|e| panic!("finish failed: {e}"));
                });
                let verdict = match outcome {
                    Ok(()) => Ok(()),
                    Err(payload) if payload.is::<LeftWithoutFinish>() => Ok(()),
                    Err(payload) => Err(payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "a panic".to_owned())),
                };
                let _ = done.send((rank, verdict));
            })
            .expect("a thread for a rank");
    }
    drop(done);
    let start = Instant::now();
    let mut failures = Vec::new();
    for _ in 0..np {
        let left = JOB_TIMEOUT.saturating_sub(start.elapsed());
        match finished.recv_timeout(left) {
            Ok((_, Ok(()))) => {}
            Ok((rank, Err(why))) => failures.push(format!("rank {rank} panicked: {why}")),
            Err(_) => panic!("{test} on local did not finish within {JOB_TIMEOUT:?}; {failures:?}"),
        }
    }
    assert!(
        failures.is_empty(),
        "{test} on local failed:\n{}",
        failures.join("\n")
    );
}

/// Deterministic content for a message: depends on everything that names it.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn recv_from(c: &mut AnyComm, src: Rank) -> Message {
    c.recv_from(src, Some(Duration::from_secs(60)))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("rank {}: nothing from rank {src} within 60 s", c.rank()))
}

fn recv_any(c: &mut AnyComm) -> Message {
    c.recv_any(Some(Duration::from_secs(60)))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("rank {}: nothing received within 60 s", c.rank()))
}

fn wait_all_sends(c: &mut AnyComm, handles: &[mttl_comm::SendHandle]) {
    let start = Instant::now();
    for h in handles {
        while !c.send_done(*h).unwrap_or_else(|e| panic!("{e}")) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "send {h:?} never completed"
            );
            // Drain anything coming in so the peer can make progress too.
            let _ = c.probe().unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

const PING_SIZES: &[usize] = &[
    0,
    1,
    8,
    15,
    16,
    17,
    100,
    1024,
    4096,
    4097,
    65_535,
    65_536,
    65_537,
    1 << 20,
    (1 << 20) + 3,
    4 << 20,
    16 << 20,
];

/// Rank 0 sends each size to rank 1 (alternating `send` and `nsend`); rank 1
/// echoes it back; both check every byte.
fn ping_pong(c: &mut AnyComm) {
    for (i, &len) in PING_SIZES.iter().enumerate() {
        let tag = i as Tag + 1;
        if c.rank() == 0 {
            let data = pattern(len as u64 ^ 0xabc, len);
            if i % 2 == 0 {
                c.send(1, tag, &data).unwrap();
            } else {
                let h = c.nsend(1, tag, data.clone()).unwrap();
                wait_all_sends(c, &[h]);
            }
            let back = recv_from(c, 1);
            assert_eq!((back.source, back.tag, back.data.len()), (1, tag, len));
            assert!(back.data == data, "echo of {len} bytes differs");
        } else if c.rank() == 1 {
            let m = recv_from(c, 0);
            assert_eq!((m.source, m.tag, m.data.len()), (0, tag, len));
            assert!(
                m.data == pattern(len as u64 ^ 0xabc, len),
                "{len} bytes arrived corrupted"
            );
            c.send(0, tag, &m.data).unwrap();
        }
    }
}

/// Every rank sends 2000 numbered messages to every other rank, mixing
/// `send` and `nsend` and sizes; every receiver sees each sender's sequence
/// in order.
fn per_pair_ordering(c: &mut AnyComm) {
    const N: u32 = 2000;
    let (me, size) = (c.rank(), c.size());
    let mut handles = Vec::new();
    let mut next = vec![0u32; size];
    let expected = N as usize * (size - 1);
    let mut got = 0;
    for i in 0..N {
        for d in (0..size).filter(|&d| d != me) {
            let mut data = i.to_le_bytes().to_vec();
            data.extend(pattern(u64::from(i), (i as usize * 37) % 3000));
            if i % 3 == 0 {
                c.send(d, 7, &data).unwrap();
            } else {
                handles.push(c.nsend(d, 7, data).unwrap());
            }
        }
        while let Some(env) = c.probe().unwrap() {
            let m = recv_any(c);
            assert_eq!(env, m.envelope(), "probe and receive disagree");
            check_seq(&m, &mut next);
            got += 1;
        }
    }
    while got < expected {
        let m = recv_any(c);
        check_seq(&m, &mut next);
        got += 1;
    }
    wait_all_sends(c, &handles);
}

fn check_seq(m: &Message, next: &mut [u32]) {
    let seq = u32::from_le_bytes(m.data[..4].try_into().unwrap());
    assert_eq!(seq, next[m.source], "out of order from rank {}", m.source);
    assert!(
        m.data[4..] == pattern(u64::from(seq), m.data.len() - 4),
        "corrupted message"
    );
    next[m.source] += 1;
}

/// Ranks 1.. each send 100 messages to rank 0, which takes them with
/// `recv_any` and must see every one, from every sender.
fn any_source_receive(c: &mut AnyComm) {
    const N: usize = 100;
    if c.rank() == 0 {
        let mut count = vec![0usize; c.size()];
        for _ in 0..N * (c.size() - 1) {
            let m = recv_any(c);
            assert_ne!(m.source, 0);
            assert_eq!(m.tag as usize, m.source);
            assert_eq!(
                m.data,
                pattern((m.source * 1000 + count[m.source]) as u64, 64)
            );
            count[m.source] += 1;
        }
        assert!(count[1..].iter().all(|&n| n == N), "counts {count:?}");
        for r in 1..c.size() {
            c.send(r, 0, b"done").unwrap();
        }
    } else {
        for i in 0..N {
            let me = c.rank();
            c.send(0, me as Tag, &pattern((me * 1000 + i) as u64, 64))
                .unwrap();
        }
        assert_eq!(recv_from(c, 0).data, b"done");
    }
}

/// Probe reports the right source, tag and size, and does not consume.
fn probe_reports_source_tag_size(c: &mut AnyComm) {
    let sizes = [0usize, 3, 5000, 300_000];
    if c.rank() == 0 {
        assert_eq!(c.probe().unwrap(), None, "nothing was sent yet");
        // Only now may the others send.
        for r in 1..c.size() {
            c.send(r, 0, &[]).unwrap();
        }
        for _ in 0..(c.size() - 1) * sizes.len() {
            let start = Instant::now();
            let env = loop {
                if let Some(env) = c.probe().unwrap() {
                    break env;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "probe never saw a message"
                );
                std::thread::yield_now();
            };
            // Probing again reports the same message.
            assert_eq!(c.probe().unwrap(), Some(env));
            let m = recv_from(c, env.source);
            assert_eq!(m.envelope(), env);
            let k = m.tag as usize % 10;
            assert_eq!(m.tag as usize, 100 * env.source + k);
            assert_eq!(m.data.len(), sizes[k]);
        }
        for r in 1..c.size() {
            c.send(r, 0, &[]).unwrap();
        }
    } else {
        let me = c.rank();
        recv_from(c, 0);
        for (k, &len) in sizes.iter().enumerate() {
            c.send(0, (100 * me + k) as Tag, &pattern(k as u64, len))
                .unwrap();
        }
        recv_from(c, 0);
    }
}

/// 5000 non-blocking sends outstanding at once before any is tested.
fn many_outstanding_nsends(c: &mut AnyComm) {
    const N: usize = 5000;
    if c.rank() == 0 {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                c.nsend(1, (i % 1000) as Tag, pattern(i as u64, i % 5000))
                    .unwrap()
            })
            .collect();
        wait_all_sends(c, &handles);
        // Testing a completed send again keeps answering true.
        assert!(c.send_done(handles[0]).unwrap());
        assert_eq!(recv_from(c, 1).data, b"all here");
    } else if c.rank() == 1 {
        for i in 0..N {
            let m = recv_from(c, 0);
            assert_eq!(m.tag as usize, i % 1000);
            assert!(
                m.data == pattern(i as u64, i % 5000),
                "message {i} corrupted"
            );
        }
        c.send(0, 0, b"all here").unwrap();
    }
}

/// Rank 0 sends 600 messages of mixed sizes to rank 1, which keeps every
/// other one and checks them all at the end: a backend that hands over the
/// memory a message arrived in (MPI: the pre-posted buffer) must never
/// write into it again, whether the receiver drops it at once (its memory
/// comes back for the next message) or keeps it.
fn kept_messages_stay_intact(c: &mut AnyComm) {
    const N: usize = 600;
    const LENS: [usize; 7] = [5000, 16 << 10, 40_000, 64 << 10, 100, 70_000, 4096];
    if c.rank() == 0 {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                c.nsend(1, 3, pattern(i as u64, LENS[i % LENS.len()]))
                    .unwrap()
            })
            .collect();
        wait_all_sends(c, &handles);
        assert_eq!(recv_from(c, 1).data, b"checked");
    } else if c.rank() == 1 {
        let mut kept = Vec::new();
        for i in 0..N {
            let m = recv_from(c, 0);
            assert!(
                m.data == pattern(i as u64, LENS[i % LENS.len()]),
                "message {i} corrupted on arrival"
            );
            if i % 2 == 0 {
                kept.push(m.data);
            }
        }
        for (k, data) in kept.iter().enumerate() {
            let i = 2 * k;
            assert!(
                *data == pattern(i as u64, LENS[i % LENS.len()]),
                "kept message {i} changed after it was received"
            );
        }
        c.send(0, 0, b"checked").unwrap();
    }
}

/// Lengths around the MPI backend's eager limit (4000 bytes) and twice it,
/// where it sends a message as a head and the rest (Open MPI).
const AROUND_EAGER: [usize; 10] = [3999, 4000, 4001, 4096, 6000, 7999, 8000, 8001, 100, 0];

/// Ranks 1 and 2 each send rank 0 every length of [`AROUND_EAGER`] four
/// times, with `send`, `nsend`, `nsend_bulk` and `send_bulk` in turn, so
/// their heads and rests interleave at rank 0; rank 0 takes them with
/// `recv_any`, `recv_from` and `recv_from_into` (into a buffer some fit,
/// some do not) after probing, and checks every byte and each sender's
/// order.
fn messages_around_the_eager_limit_arrive_whole(c: &mut AnyComm) {
    let rounds = 4 * AROUND_EAGER.len();
    let len_of = |i: usize| AROUND_EAGER[i % AROUND_EAGER.len()];
    let seed = |src: Rank, i: usize| (src as u64) << 32 | i as u64;
    if c.rank() > 0 {
        let me = c.rank();
        let mut handles = Vec::new();
        for i in 0..rounds {
            let data = pattern(seed(me, i), len_of(i));
            let tag = i as Tag;
            match i % 4 {
                0 => c.send(0, tag, &data).unwrap(),
                1 => handles.push(c.nsend(0, tag, data).unwrap()),
                2 => handles.push(c.nsend_bulk(0, tag, data).unwrap()),
                _ => c.send_bulk(0, tag, &data).unwrap(),
            }
        }
        wait_all_sends(c, &handles);
        assert_eq!(recv_from(c, 0).data, b"all checked");
        return;
    }
    let mut next = [0usize; 3];
    let mut buf = vec![0u8; 6000];
    for k in 0..2 * rounds {
        // A sender with messages left, alternating while both have some.
        let src = if next[1 + k % 2] < rounds {
            1 + k % 2
        } else {
            2 - k % 2
        };
        let (source, tag, data) = match k % 3 {
            0 => {
                let m = recv_any(c);
                (m.source, m.tag, m.data)
            }
            1 => {
                let m = recv_from(c, src);
                (m.source, m.tag, m.data)
            }
            _ => {
                // A probe may see a split message only once it is whole.
                if let Some(e) = c.probe().unwrap() {
                    assert_eq!(e.len, len_of(e.tag as usize), "probe: wrong length");
                }
                match c
                    .recv_from_into(src, Some(Duration::from_secs(60)), &mut buf, &|_| true)
                    .unwrap()
                    .expect("a message from a rank still sending")
                {
                    Received::Placed(e) => (e.source, e.tag, buf[..e.len].to_vec()),
                    Received::Owned(m) => (m.source, m.tag, m.data),
                }
            }
        };
        let i = next[source];
        assert_eq!(tag as usize, i, "rank {source}'s messages out of order");
        assert!(
            data == pattern(seed(source, i), len_of(i)),
            "rank {source}'s message {i} ({} B) arrived corrupted or cut: {} B",
            len_of(i),
            data.len()
        );
        next[source] += 1;
    }
    assert_eq!(next, [0, rounds, rounds]);
    c.send(1, 0, b"all checked").unwrap();
    c.send(2, 0, b"all checked").unwrap();
}

/// Every rank sends many messages of mixed sizes to every rank (itself
/// included) with `nsend`, while receiving; checksums must match.
fn all_to_all_storm(c: &mut AnyComm) {
    const ROUNDS: usize = 300;
    let (me, size) = (c.rank(), c.size());
    let mut handles = Vec::new();
    let mut received = 0;
    let mut sum = 0u64;
    for round in 0..ROUNDS {
        for d in 0..size {
            let len = [8, 200, 9000, 70_000][(round + d) % 4];
            let seed = (me * 1_000_003 + d * 1009 + round) as u64;
            handles.push(
                c.nsend(d, round as Tag % 32_000, pattern(seed, len))
                    .unwrap(),
            );
        }
        while c.probe().unwrap().is_some() {
            let m = recv_any(c);
            sum = sum.wrapping_add(checksum(&m.data));
            received += 1;
        }
    }
    while received < ROUNDS * size {
        let m = recv_any(c);
        sum = sum.wrapping_add(checksum(&m.data));
        received += 1;
    }
    wait_all_sends(c, &handles);
    let mut expect = 0u64;
    for round in 0..ROUNDS {
        for s in 0..size {
            let len = [8, 200, 9000, 70_000][(round + me) % 4];
            expect = expect.wrapping_add(checksum(&pattern(
                (s * 1_000_003 + me * 1009 + round) as u64,
                len,
            )));
        }
    }
    assert_eq!(sum, expect, "rank {me}: the storm's checksum differs");
}

fn checksum(d: &[u8]) -> u64 {
    d.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Both ranks send each other 16 MiB with a blocking `send` at the same
/// time: the contract says neither may deadlock.
fn simultaneous_large_sends(c: &mut AnyComm) {
    let other = 1 - c.rank();
    let len = 16 << 20;
    let data = pattern(c.rank() as u64, len);
    c.send(other, 3, &data).unwrap();
    let m = recv_from(c, other);
    assert!(m.data == pattern(other as u64, len));
}

/// Sends to oneself loop back, in order, through every primitive, and are
/// held (`holds_received`) as soon as they are sent.
fn self_send(c: &mut AnyComm) {
    let me = c.rank();
    // The other rank sends nothing: nothing is held before the self-sends.
    assert!(!c.holds_received(), "held before anything was sent");
    c.send(me, 1, b"one").unwrap();
    assert!(c.holds_received(), "a self-send is held at once");
    let h = c.nsend(me, 2, b"two".to_vec()).unwrap();
    assert!(c.send_done(h).unwrap());
    assert_eq!(
        c.probe().unwrap().map(|e| (e.source, e.tag, e.len)),
        Some((me, 1, 3))
    );
    assert_eq!(recv_from(c, me).data, b"one");
    assert_eq!(recv_any(c).data, b"two");
}

/// Errors name the rank and the operation; a timeout is not an error.
fn errors_and_timeouts(c: &mut AnyComm) {
    let size = c.size();
    let e = c.send(size, 0, b"x").unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::NoSuchRank { peer, .. } if peer == size),
        "{e}"
    );
    assert!(e.to_string().contains(&format!("rank {}", c.rank())), "{e}");
    let e = c.nsend(size + 5, 0, vec![]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::NoSuchRank { .. }), "{e}");
    let max = c.max_message_len();
    assert_eq!(max, 1 << 20, "MTTL_MAX_MESSAGE=1048576 is honoured");
    let e = c
        .send((c.rank() + 1) % size, 0, &vec![0u8; max + 1])
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::MessageTooLarge { .. }), "{e}");
    // Rank 0 sends nothing until rank 1 says so: rank 1's waits must time out.
    if c.rank() == 0 {
        assert_eq!(recv_from(c, 1).data, b"go");
        c.send(1, 0, b"done").unwrap();
    } else if c.rank() == 1 {
        let start = Instant::now();
        assert!(c
            .recv_any(Some(Duration::from_millis(50)))
            .unwrap()
            .is_none());
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert!(c
            .recv_from(0, Some(Duration::from_millis(20)))
            .unwrap()
            .is_none());
        c.send(0, 0, b"go").unwrap();
        assert_eq!(recv_from(c, 0).data, b"done");
    }
}

/// What rank 0 sends rank 1 in `recv_from_into_places_or_hands_over`: tag,
/// length, and whether it must land in rank 1's buffer of
/// [`INTO_ROOM`] bytes (it fits and is accepted: tags 4 and 5 are refused).
const INTO_PLAN: &[(Tag, usize, bool)] = &[
    (1, 1000, true),
    (2, 1 << 20, true),
    (3, 3 << 20, false),
    (4, 1 << 20, false),
    (5, 100, false),
    (6, (3 << 19) + 5, true),
    (7, INTO_ROOM, true),
    (8, 70_000, true),
];
const INTO_ROOM: usize = 2 << 20;
/// What rank 2 sends rank 1 meanwhile: tag, length.
const INTO_NOISE: &[(Tag, usize)] = &[
    (20, 10),
    (21, 200_000),
    (22, 50),
    (23, 500_000),
    (24, 1 << 20),
];

/// Rank 0 sends rank 1 small and large messages, some fitting rank 1's
/// buffer and accepted, some too large, some refused, while rank 2 sends
/// rank 1 small and large messages of its own. Rank 1 takes rank 0's with
/// `recv_from_into` and checks each lands in the buffer (and nothing past
/// it) exactly when it fits and is accepted, is handed over otherwise, and
/// comes in order; then rank 2's, in order. Last, a large message whose
/// payload is already being received (rank 1 probed it first) still lands.
fn recv_from_into_places_or_hands_over(c: &mut AnyComm) {
    match c.rank() {
        0 => {
            assert_eq!(recv_from(c, 1).data, b"go");
            let mut handles = Vec::new();
            for (i, &(tag, len, _)) in INTO_PLAN.iter().enumerate() {
                let data = pattern(into_seed(0, tag), len);
                if i % 2 == 0 {
                    c.send(1, tag, &data).unwrap();
                } else {
                    handles.push(c.nsend(1, tag, data).unwrap());
                }
            }
            wait_all_sends(c, &handles);
            assert_eq!(recv_from(c, 1).data, b"probe");
            c.send(1, 9, &pattern(into_seed(0, 9), 1 << 20)).unwrap();
        }
        1 => {
            let mut buf = vec![0u8; INTO_ROOM];
            let accept = |e: &Envelope| e.tag != 4 && e.tag != 5;
            let got = c
                .recv_from_into(0, Some(Duration::from_millis(20)), &mut buf, &accept)
                .unwrap();
            assert!(got.is_none(), "rank 0 has sent nothing yet: {got:?}");
            c.send(0, 0, b"go").unwrap();
            for &(tag, len, placed) in INTO_PLAN {
                recv_into_and_check(c, &mut buf, &accept, tag, len, placed);
            }
            for &(tag, len) in INTO_NOISE {
                let m = recv_from(c, 2);
                assert_eq!(
                    (m.tag, m.data.len()),
                    (tag, len),
                    "rank 2's messages out of order"
                );
                assert!(
                    m.data == pattern(into_seed(2, tag), len),
                    "rank 2's message {tag}: wrong bytes"
                );
            }
            // Probing takes the marker out of MPI: its payload is then
            // received into the backend's own memory.
            c.send(0, 0, b"probe").unwrap();
            let start = Instant::now();
            while c.probe().unwrap().is_none() {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "nothing from rank 0"
                );
            }
            recv_into_and_check(c, &mut buf, &accept, 9, 1 << 20, true);
        }
        2 => {
            for &(tag, len) in INTO_NOISE {
                c.send(1, tag, &pattern(into_seed(2, tag), len)).unwrap();
            }
        }
        _ => {}
    }
}

/// The message of `a_receive_in_place_cut_short_loses_nothing`.
const CUT_LEN: usize = 48 << 20;

/// Rank 0 starts sending rank 1 a message of [`CUT_LEN`] bytes
/// (`nsend_bulk`: as much as the transport takes at once), sleeps 300 ms, then
/// finishes it and sends a small one. Rank 1 takes the first with
/// `recv_from_into` calls of 1 ms each, so some give up in the middle of it
/// (on TCP, in the middle of reading it in place): it still arrives whole,
/// then the small one.
fn a_receive_in_place_cut_short_loses_nothing(c: &mut AnyComm) {
    match c.rank() {
        0 => {
            let h = c
                .nsend_bulk(1, 3, pattern(into_seed(0, 3), CUT_LEN))
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            wait_all_sends(c, &[h]);
            c.send(1, 4, b"after").unwrap();
        }
        1 => {
            let mut buf = vec![0u8; CUT_LEN];
            let start = Instant::now();
            let mut cut = 0;
            let got = loop {
                let got = c
                    .recv_from_into(0, Some(Duration::from_millis(1)), &mut buf, &|_| true)
                    .unwrap_or_else(|e| panic!("{e}"));
                match got {
                    Some(got) => break got,
                    None => cut += 1,
                }
                assert!(start.elapsed() < Duration::from_secs(60), "nothing came");
            };
            let Received::Placed(e) = got else {
                panic!("the message fits and was accepted, yet handed over: {got:?}");
            };
            assert_eq!((e.tag, e.len), (3, CUT_LEN));
            assert!(
                buf == pattern(into_seed(0, 3), CUT_LEN),
                "wrong bytes after {cut} receives cut short"
            );
            let m = recv_from(c, 0);
            assert_eq!((m.tag, &m.data[..]), (4, &b"after"[..]));
        }
        _ => {}
    }
}

fn into_seed(src: Rank, tag: Tag) -> u64 {
    (src as u64) << 32 | u64::from(tag)
}

/// Takes the next message from rank 0 with `recv_from_into` and checks it
/// is message `tag` of `len` bytes, placed in `buf` (and nothing past it)
/// if `placed`, else handed over with `buf` untouched.
fn recv_into_and_check(
    c: &mut AnyComm,
    buf: &mut [u8],
    accept: &dyn Fn(&Envelope) -> bool,
    tag: Tag,
    len: usize,
    placed: bool,
) {
    buf.fill(0xee);
    let got = c
        .recv_from_into(0, Some(Duration::from_secs(60)), buf, accept)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("message {tag} from rank 0 did not come"));
    let want = pattern(into_seed(0, tag), len);
    match got {
        Received::Placed(e) => {
            assert!(placed, "message {tag} ({len} B) was placed");
            assert_eq!((e.source, e.tag, e.len), (0, tag, len), "out of order");
            assert!(buf[..len] == want, "message {tag}: wrong bytes placed");
            assert!(
                buf[len..].iter().all(|&b| b == 0xee),
                "message {tag}: bytes written past its length"
            );
        }
        Received::Owned(m) => {
            assert!(!placed, "message {tag} ({len} B) was not placed");
            assert_eq!((m.source, m.tag), (0, tag), "out of order");
            assert!(m.data == want, "message {tag}: wrong bytes");
            assert!(
                buf.iter().all(|&b| b == 0xee),
                "message {tag} touched the buffer"
            );
        }
    }
}

/// The lengths of `bulk_sends_arrive_whole_and_in_order`: around the
/// eager limit, the MPI backend's bulk marker threshold (16 KiB) and its
/// small-channel limit (64 KiB).
const BULK_LENS: &[usize] = &[
    0,
    100,
    5000,
    16 << 10,
    (16 << 10) + 1,
    40_000,
    64 << 10,
    (64 << 10) + 1,
    300_000,
];

/// Rank 0 sends rank 1 (and itself) messages of every length in
/// [`BULK_LENS`] four ways each (`send`, `nsend`, `send_bulk`,
/// `nsend_bulk`), interleaved; rank 1 takes them alternately with
/// `recv_from` and `recv_from_into` and checks that each arrives whole, in
/// order, and lands in the buffer whenever it fits (a bulk send only
/// changes how a message travels, never who can receive it).
fn bulk_sends_arrive_whole_and_in_order(c: &mut AnyComm) {
    let plan: Vec<(Tag, usize)> = BULK_LENS
        .iter()
        .enumerate()
        .flat_map(|(i, &len)| (0..4).map(move |way| ((i * 4 + way) as Tag, len)))
        .collect();
    let me = c.rank();
    if me == 0 {
        let mut handles = Vec::new();
        for dest in [1, 0] {
            for &(tag, len) in &plan {
                let data = pattern(into_seed(0, tag), len);
                match tag % 4 {
                    0 => c.send(dest, tag, &data).unwrap(),
                    1 => handles.push(c.nsend(dest, tag, data).unwrap()),
                    2 => c.send_bulk(dest, tag, &data).unwrap(),
                    _ => handles.push(c.nsend_bulk(dest, tag, data).unwrap()),
                }
            }
        }
        wait_all_sends(c, &handles);
    }
    if me > 1 {
        return;
    }
    let mut buf = vec![0u8; 128 << 10];
    for (i, &(tag, len)) in plan.iter().enumerate() {
        if i % 2 == 0 {
            let m = recv_from(c, 0);
            assert_eq!((m.tag, m.data.len()), (tag, len), "rank {me}: out of order");
            assert!(
                m.data == pattern(into_seed(0, tag), len),
                "rank {me}: message {tag}: wrong bytes"
            );
        } else {
            let fits = len <= buf.len();
            recv_into_and_check(c, &mut buf, &|_| true, tag, len, fits);
        }
    }
}

/// Rank 0 sends rank 1 and itself messages of every length in
/// [`BULK_LENS`] from borrowed memory (`nsend_borrowed`), keeping each
/// buffer untouched until `send_finished` reports its send over (while
/// rank 1 receives, so the sends progress without rank 0 draining); rank 1
/// and rank 0 take them in order, whole.
fn borrowed_sends_arrive_whole_and_in_order(c: &mut AnyComm) {
    let me = c.rank();
    if me == 0 {
        for dest in [1, 0] {
            for (i, &len) in BULK_LENS.iter().enumerate() {
                let data = pattern(into_seed(0, i as Tag), len);
                // SAFETY: `data` lives, unchanged, until the send is over:
                // the loop below waits for that (a self-send is over at once).
                let handle = unsafe { c.nsend_borrowed(dest, i as Tag, &data) }.unwrap();
                let start = Instant::now();
                while !c.send_finished(handle).unwrap() {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "send {i} never ended"
                    );
                }
                drop(data);
            }
        }
    }
    if me > 1 {
        return;
    }
    for (i, &len) in BULK_LENS.iter().enumerate() {
        let m = recv_from(c, 0);
        assert_eq!(
            (m.tag, m.data.len()),
            (i as Tag, len),
            "rank {me}: out of order"
        );
        assert!(
            m.data == pattern(into_seed(0, i as Tag), len),
            "rank {me}: message {i}: wrong bytes"
        );
    }
}

/// The head lengths of `headed_sends_arrive_whole_and_in_order`, cycled:
/// around what the MPI backend carries inside a marker (64 bytes).
const HEAD_LENS: &[usize] = &[0, 16, 64, 65, 300];

/// Ranks 0 and 2 each send rank 1 (and first themselves) a head and a body
/// of every length in [`BULK_LENS`], by `send_headed_bulk` and
/// `nsend_headed_borrowed` alternately. Rank 1 takes every head (by
/// `recv_any`, or by `recv_from_into` refusing it), then its body four ways
/// in turn: `recv_from_into` accepting it (placed when it fits), a probe
/// and `recv_from`, `recv_from_into` refusing it, and `recv_from` after a
/// head from the other sender came between. Each must arrive whole, as
/// two messages, in order.
fn headed_sends_arrive_whole_and_in_order(c: &mut AnyComm) {
    let me = c.rank();
    let head = |src: Rank, i: usize| {
        pattern(
            into_seed(src, 100 + i as Tag),
            HEAD_LENS[i % HEAD_LENS.len()],
        )
    };
    let body = |src: Rank, i: usize| pattern(into_seed(src, 200 + i as Tag), BULK_LENS[i]);
    if me == 0 || me == 2 {
        for dest in [me, 1] {
            for i in 0..BULK_LENS.len() {
                let (h, data) = (head(me, i), body(me, i));
                let head_msg = (100 + i as Tag, &h[..]);
                if i % 2 == 0 {
                    c.send_headed_bulk(dest, head_msg, 200 + i as Tag, &data)
                        .unwrap();
                    continue;
                }
                // SAFETY: `data` lives, unchanged, until the send is over:
                // the loop below waits for that.
                let handle =
                    unsafe { c.nsend_headed_borrowed(dest, head_msg, 200 + i as Tag, &data) }
                        .unwrap();
                let start = Instant::now();
                while !c.send_finished(handle).unwrap() {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "send {i} never ended"
                    );
                }
            }
            if dest == me {
                for i in 0..BULK_LENS.len() {
                    let h = recv_from(c, me);
                    assert_eq!((h.tag, &h.data), (100 + i as Tag, &head(me, i)));
                    let b = recv_from(c, me);
                    assert_eq!((b.tag, &b.data), (200 + i as Tag, &body(me, i)));
                }
            }
        }
        return;
    }
    if me != 1 {
        return;
    }
    let mut next = [0usize; 3];
    let mut buf = vec![0u8; 128 << 10];
    let total = 2 * BULK_LENS.len();
    for n in 0..total {
        let h = if n % 2 == 0 {
            recv_any(c)
        } else {
            // Refused by `recv_from_into`, taken as it is.
            let src = if next[0] < BULK_LENS.len() { 0 } else { 2 };
            match c
                .recv_from_into(src, Some(Duration::from_secs(60)), &mut buf, &|_| false)
                .unwrap()
                .expect("a head came")
            {
                Received::Owned(m) => m,
                Received::Placed(e) => panic!("a refused head was placed: {e:?}"),
            }
        };
        let src = h.source;
        let i = next[src];
        next[src] += 1;
        assert_eq!(
            (h.tag, &h.data),
            (100 + i as Tag, &head(src, i)),
            "head {i} from rank {src}"
        );
        let want = body(src, i);
        let fits = want.len() <= buf.len();
        buf.fill(0xee);
        let check_owned = |m: Message| {
            assert_eq!(
                (m.source, m.tag),
                (src, 200 + i as Tag),
                "body {i} from rank {src}"
            );
            assert!(m.data == want, "body {i} from rank {src}: wrong bytes");
        };
        match n % 4 {
            0 => match c
                .recv_from_into(src, Some(Duration::from_secs(60)), &mut buf, &|_| true)
                .unwrap()
                .expect("a body came")
            {
                Received::Placed(e) => {
                    assert!(fits, "body {i} was placed but does not fit");
                    assert_eq!((e.source, e.tag, e.len), (src, 200 + i as Tag, want.len()));
                    assert!(
                        buf[..e.len] == want,
                        "body {i} from rank {src}: wrong bytes placed"
                    );
                    assert!(
                        buf[e.len..].iter().all(|&b| b == 0xee),
                        "written past the body"
                    );
                }
                Received::Owned(m) => {
                    assert!(!fits, "body {i} fits but was not placed");
                    check_owned(m);
                }
            },
            1 => {
                // The body is announced: a probe sees a message waiting.
                let start = Instant::now();
                while c.probe().unwrap().is_none() {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "probe saw nothing"
                    );
                }
                check_owned(recv_from(c, src));
            }
            2 => match c
                .recv_from_into(src, Some(Duration::from_secs(60)), &mut buf, &|_| false)
                .unwrap()
                .expect("a body came")
            {
                Received::Owned(m) => {
                    check_owned(m);
                    assert!(
                        buf.iter().all(|&b| b == 0xee),
                        "a refused body touched the buffer"
                    );
                }
                Received::Placed(e) => panic!("a refused body was placed: {e:?}"),
            },
            _ => {
                // Let more arrive first (the other sender's next head).
                std::thread::sleep(Duration::from_millis(2));
                check_owned(recv_from(c, src));
            }
        }
    }
    assert_eq!(next, [BULK_LENS.len(), 0, BULK_LENS.len()]);
}

/// Each rank sends one message around a ring, receives one, and finishes
/// at once: ranks reach `finish` at different moments, with traffic still
/// in flight, and every one must leave cleanly.
fn ring_then_finish(c: &mut AnyComm) {
    let (me, size) = (c.rank(), c.size());
    c.send((me + 1) % size, 5, &pattern(me as u64, 1000))
        .unwrap();
    let m = recv_from(c, (me + size - 1) % size);
    assert_eq!(m.data, pattern(((me + size - 1) % size) as u64, 1000));
}

/// TCP and local (MPI gives no notice of a peer that left): rank 0 sends
/// rank 1 a message and waits for the answer with `receive`; rank 1 takes
/// the message and leaves without finishing (its process exits; on local,
/// its thread ends and drops its endpoint). Rank 0's wait must end at once
/// with the loss of rank 1, not hang until its timeout.
fn a_peer_that_exits_is_reported(
    c: &mut AnyComm,
    receive: fn(&mut AnyComm) -> Result<Option<Message>, mttl_comm::CommError>,
) {
    if c.rank() == 1 {
        assert_eq!(recv_from(c, 0).data, b"ping");
        // No finish, so no goodbye: the link just closes.
        leave_without_finish(c);
    }
    c.send(1, 1, b"ping").unwrap();
    let start = Instant::now();
    match receive(c) {
        Err(e) => assert!(
            matches!(e.kind, ErrorKind::PeerLost { peer: 1, .. }),
            "expected the loss of rank 1, got: {e}"
        ),
        Ok(m) => panic!("expected the loss of rank 1, got {m:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the loss was reported only after {:?}",
        start.elapsed()
    );
    // Rank 1 is gone: leave without finishing too.
    leave_without_finish(c);
}

#[test]
fn tcp_recv_from_reports_a_peer_that_exits() {
    run_job(
        "tcp",
        2,
        "tcp_recv_from_reports_a_peer_that_exits",
        &[],
        |c| a_peer_that_exits_is_reported(c, |c| c.recv_from(1, Some(Duration::from_secs(30)))),
    );
}

#[test]
fn tcp_recv_any_reports_a_peer_that_exits() {
    run_job(
        "tcp",
        2,
        "tcp_recv_any_reports_a_peer_that_exits",
        &[],
        |c| a_peer_that_exits_is_reported(c, |c| c.recv_any(Some(Duration::from_secs(30)))),
    );
}

#[test]
fn local_recv_from_reports_a_peer_that_exits() {
    run_job(
        "local",
        2,
        "local_recv_from_reports_a_peer_that_exits",
        &[],
        |c| a_peer_that_exits_is_reported(c, |c| c.recv_from(1, Some(Duration::from_secs(30)))),
    );
}

#[test]
fn local_recv_any_reports_a_peer_that_exits() {
    run_job(
        "local",
        2,
        "local_recv_any_reports_a_peer_that_exits",
        &[],
        |c| a_peer_that_exits_is_reported(c, |c| c.recv_any(Some(Duration::from_secs(30)))),
    );
}

macro_rules! conformance_suite {
    ($backend:ident) => {
        mod $backend {
            use super::*;

            fn name(test: &str) -> String {
                format!("{}::{}", stringify!($backend), test)
            }

            #[test]
            fn ping_pong() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("ping_pong"),
                    &[],
                    super::ping_pong,
                );
            }

            #[test]
            fn per_pair_ordering() {
                run_job(
                    stringify!($backend),
                    3,
                    &name("per_pair_ordering"),
                    &[],
                    super::per_pair_ordering,
                );
            }

            #[test]
            fn any_source_receive() {
                run_job(
                    stringify!($backend),
                    4,
                    &name("any_source_receive"),
                    &[],
                    super::any_source_receive,
                );
            }

            #[test]
            fn probe_reports_source_tag_size() {
                run_job(
                    stringify!($backend),
                    3,
                    &name("probe_reports_source_tag_size"),
                    &[],
                    super::probe_reports_source_tag_size,
                );
            }

            #[test]
            fn many_outstanding_nsends() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("many_outstanding_nsends"),
                    &[],
                    super::many_outstanding_nsends,
                );
            }

            #[test]
            fn kept_messages_stay_intact() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("kept_messages_stay_intact"),
                    &[],
                    super::kept_messages_stay_intact,
                );
            }

            #[test]
            fn messages_around_the_eager_limit_arrive_whole() {
                run_job(
                    stringify!($backend),
                    3,
                    &name("messages_around_the_eager_limit_arrive_whole"),
                    &[],
                    super::messages_around_the_eager_limit_arrive_whole,
                );
            }

            #[test]
            fn all_to_all_storm() {
                run_job(
                    stringify!($backend),
                    4,
                    &name("all_to_all_storm"),
                    &[],
                    super::all_to_all_storm,
                );
            }

            #[test]
            fn simultaneous_large_sends() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("simultaneous_large_sends"),
                    &[],
                    super::simultaneous_large_sends,
                );
            }

            #[test]
            fn ring_then_finish() {
                for _ in 0..5 {
                    run_job(
                        stringify!($backend),
                        4,
                        &name("ring_then_finish"),
                        &[],
                        super::ring_then_finish,
                    );
                }
            }

            #[test]
            fn recv_from_into_places_or_hands_over() {
                run_job(
                    stringify!($backend),
                    3,
                    &name("recv_from_into_places_or_hands_over"),
                    &[],
                    super::recv_from_into_places_or_hands_over,
                );
            }

            #[test]
            fn a_receive_in_place_cut_short_loses_nothing() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("a_receive_in_place_cut_short_loses_nothing"),
                    &[],
                    super::a_receive_in_place_cut_short_loses_nothing,
                );
            }

            #[test]
            fn bulk_sends_arrive_whole_and_in_order() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("bulk_sends_arrive_whole_and_in_order"),
                    &[],
                    super::bulk_sends_arrive_whole_and_in_order,
                );
            }

            #[test]
            fn borrowed_sends_arrive_whole_and_in_order() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("borrowed_sends_arrive_whole_and_in_order"),
                    &[],
                    super::borrowed_sends_arrive_whole_and_in_order,
                );
            }

            #[test]
            fn headed_sends_arrive_whole_and_in_order() {
                run_job(
                    stringify!($backend),
                    3,
                    &name("headed_sends_arrive_whole_and_in_order"),
                    &[],
                    super::headed_sends_arrive_whole_and_in_order,
                );
            }

            #[test]
            fn self_send() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("self_send"),
                    &[],
                    super::self_send,
                );
            }

            #[test]
            fn errors_and_timeouts() {
                run_job(
                    stringify!($backend),
                    2,
                    &name("errors_and_timeouts"),
                    &[("MTTL_MAX_MESSAGE", "1048576")],
                    super::errors_and_timeouts,
                );
            }
        }
    };
}

conformance_suite!(tcp);
conformance_suite!(local);
#[cfg(feature = "mpi")]
conformance_suite!(mpi);
