//! Strangers at a rank's port, on the TCP backend: a rogue client sending a
//! well-formed invoke frame without the job secret, port scans, garbage and
//! silent connections. None of their bytes may ever be delivered as a
//! message; each connection must be dropped and logged naming its address;
//! the rendezvous and the ranks must go on, and the job must finish
//! correctly.
//!
//! How a test runs: the test fn starts a job of [`SIZE`] ranks of this very
//! test binary (asking for that one test, as `conformance.rs` does), but
//! sets the launch environment itself instead of using `mttlrun`, so it
//! knows where rank 0 listens (`MTTL_ROOT`, a port it picked); the other
//! ranks' ports are found in `/proc` (the listening socket the rank's
//! process holds). In the job, the same fn runs [`rank_program`]: every
//! rank says `READY` once it has joined, receives (and checks) whatever
//! arrives until the test creates the "go" file, then exchanges numbered
//! messages with every other rank and checks each one. A message carrying
//! the rogue's mark would be reported (`DISPATCHED`) and fail the rank.

#![cfg(target_os = "linux")]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, ErrorKind as IoErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mttl_comm::backend::tcp::fuzzing::encode_header;
use mttl_comm::{env as launch_env, AnyComm, Comm, Message, Rank, Tag};

/// Ranks in each job.
const SIZE: usize = 3;

/// Messages each rank sends every other rank once told to go.
const MESSAGES: u32 = 200;

/// The tag of the job's own messages.
const JOB_TAG: Tag = 7;

/// The runtime's `INVOKE` kind, which the rogue's frame carries as its tag.
const INVOKE_TAG: Tag = 1;

/// What the rogue's frame carries as its argument: found in any message
/// delivered to a rank, it means a stranger's frame got through.
const ROGUE_MARK: &[u8] = b"ROGUE-INVOKE-FRAME-FROM-A-STRANGER";

/// The variable naming the file whose existence tells the ranks to go on.
const GO_FILE: &str = "MTTL_TEST_GO_FILE";

/// How long a rank takes, at most, to drop a connection that does not
/// authenticate: the handshake timeout (5 s) and a margin for a busy
/// machine.
const DROP_BOUND: Duration = Duration::from_secs(15);

/// How long a whole job may take.
const JOB_TIMEOUT: Duration = Duration::from_secs(90);

/// mttl's handshake greeting (`auth.rs`): what a client that knows the
/// protocol, but not the secret, opens with.
const HELLO: &[u8; 8] = b"MTTLHS1\0";

fn in_job() -> bool {
    std::env::var_os(launch_env::RANK).is_some()
}

// ---------------------------------------------------------------------------
// In the job.

/// The content of message `i` from `src` to `dest`.
fn job_message(src: Rank, dest: Rank, i: u32) -> Vec<u8> {
    let mut v = format!("job message {i} from rank {src} to rank {dest}").into_bytes();
    v.resize(64 + (i as usize * 97) % 3000, (src * 16 + dest) as u8);
    v
}

/// Checks one delivered message: it must be the next job message from its
/// sender. Anything else ends the rank, saying what arrived.
fn check_delivered(me: Rank, m: &Message, next: &mut [u32]) {
    if m.data.windows(ROGUE_MARK.len()).any(|w| w == ROGUE_MARK) {
        eprintln!(
            "rank {me}: DISPATCHED a frame from the rogue client (tag {}, {} bytes, 'from' rank {})",
            m.tag,
            m.data.len(),
            m.source
        );
        std::process::exit(3);
    }
    let i = next[m.source];
    if m.tag != JOB_TAG || m.data != job_message(m.source, me, i) {
        eprintln!(
            "rank {me}: UNEXPECTED message from rank {} (tag {}, {} bytes), expected job message {i}",
            m.source,
            m.tag,
            m.data.len()
        );
        std::process::exit(4);
    }
    next[m.source] += 1;
}

/// What every rank of the job runs.
fn rank_program() -> ! {
    let mut comm = AnyComm::init().unwrap_or_else(|e| {
        eprintln!("init failed: {e}");
        std::process::exit(2)
    });
    let (me, size) = (comm.rank(), comm.size());
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("rank {me}: {e}");
        std::process::exit(5)
    };
    println!("READY rank {me}");
    let _ = std::io::stdout().flush();

    // Until the test says go, take whatever arrives: a stranger's frame
    // that got through would arrive now.
    let go = PathBuf::from(std::env::var_os(GO_FILE).expect("the go file's path"));
    let mut next = vec![0u32; size];
    while !go.exists() {
        if let Some(m) = comm
            .recv_any(Some(Duration::from_millis(50)))
            .unwrap_or_else(|e| fail(&e))
        {
            check_delivered(me, &m, &mut next);
        }
    }

    // The job's own work: numbered messages to every other rank, each
    // checked on arrival.
    for i in 0..MESSAGES {
        for dest in (0..size).filter(|&d| d != me) {
            comm.send(dest, JOB_TAG, &job_message(me, dest, i))
                .unwrap_or_else(|e| fail(&e));
        }
    }
    let expected = MESSAGES as usize * (size - 1);
    let mut got: usize = next.iter().map(|&n| n as usize).sum();
    while got < expected {
        match comm.recv_any(Some(Duration::from_secs(30))) {
            Ok(Some(m)) => check_delivered(me, &m, &mut next),
            Ok(None) => fail(&"nothing arrived within 30 s"),
            Err(e) => fail(&e),
        }
        got += 1;
    }
    println!("RESULT rank {me}: {got} messages, every one from the job and in order");
    let _ = std::io::stdout().flush();
    comm.finish().unwrap_or_else(|e| fail(&e));
    std::process::exit(0)
}

// ---------------------------------------------------------------------------
// The test's side: the job.

/// A job whose ranks this test started itself.
struct Job {
    test: &'static str,
    root: SocketAddr,
    secret: String,
    go: PathBuf,
    ranks: Vec<Option<Child>>,
    /// Every line each rank wrote, stdout and stderr apart.
    stdout: Vec<Arc<Mutex<Vec<String>>>>,
    stderr: Vec<Arc<Mutex<Vec<String>>>>,
    /// `(rank, line)` of every stdout line, as it comes.
    lines: mpsc::Receiver<(Rank, String)>,
    lines_tx: mpsc::Sender<(Rank, String)>,
    ready: HashSet<Rank>,
}

/// How one rank ended.
struct RankEnd {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn collect(
    stream: impl Read + Send + 'static,
    rank: Rank,
    into: Arc<Mutex<Vec<String>>>,
    tx: Option<mpsc::Sender<(Rank, String)>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if let Some(tx) = &tx {
                let _ = tx.send((rank, line.clone()));
            }
            into.lock().unwrap().push(line);
        }
    });
}

impl Job {
    /// A job of [`SIZE`] ranks of test `test`, none started yet.
    fn new(test: &'static str) -> Job {
        let secret: String = launch_env::new_secret()
            .expect("random numbers")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let root: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let go = std::env::temp_dir().join(format!(
            "mttl-rogue-client-{}-{}.go",
            std::process::id(),
            root.port()
        ));
        let _ = std::fs::remove_file(&go);
        let (lines_tx, lines) = mpsc::channel();
        Job {
            test,
            root,
            secret,
            go,
            ranks: (0..SIZE).map(|_| None).collect(),
            stdout: (0..SIZE).map(|_| Arc::default()).collect(),
            stderr: (0..SIZE).map(|_| Arc::default()).collect(),
            lines,
            lines_tx,
            ready: HashSet::new(),
        }
    }

    /// Starts rank `r`.
    fn start(&mut self, r: Rank) {
        self.start_with_file_limit(r, None);
    }

    /// Starts rank `r`, allowed at most `file_limit` open files if given.
    fn start_with_file_limit(&mut self, r: Rank, file_limit: Option<u64>) {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut cmd = Command::new(exe);
        cmd.args(["--exact", self.test, "--nocapture", "--test-threads", "1"])
            .env(launch_env::BACKEND, "tcp")
            .env(launch_env::RANK, r.to_string())
            .env(launch_env::SIZE, SIZE.to_string())
            .env(launch_env::ROOT, self.root.to_string())
            .env(launch_env::SECRET, &self.secret)
            .env(launch_env::CONNECT_TIMEOUT, "30")
            .env(GO_FILE, &self.go)
            .env_remove(launch_env::NP)
            .env_remove(launch_env::BIND)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(limit) = file_limit {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // SAFETY: runs in the child between fork and exec, and only
            // calls setrlimit, which is async-signal-safe.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn().expect("cannot start a rank");
        collect(
            child.stdout.take().unwrap(),
            r,
            self.stdout[r].clone(),
            Some(self.lines_tx.clone()),
        );
        collect(
            child.stderr.take().unwrap(),
            r,
            self.stderr[r].clone(),
            None,
        );
        self.ranks[r] = Some(child);
    }

    fn pid(&self, r: Rank) -> u32 {
        self.ranks[r].as_ref().expect("rank started").id()
    }

    /// Everything rank `r` wrote so far.
    fn output(&self, r: Rank) -> String {
        format!(
            "--- rank {r} stdout ---\n{}\n--- rank {r} stderr ---\n{}\n",
            self.stdout[r].lock().unwrap().join("\n"),
            self.stderr[r].lock().unwrap().join("\n")
        )
    }

    fn all_output(&self) -> String {
        (0..SIZE).map(|r| self.output(r)).collect()
    }

    /// Waits until rank `r` listens, and returns its address.
    fn listening(&self, r: Rank) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(port) = listening_port(self.pid(r)) {
                return SocketAddr::from(([127, 0, 0, 1], port));
            }
            assert!(
                Instant::now() < deadline,
                "rank {r} does not listen after 30 s\n{}",
                self.all_output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every rank has said it has joined.
    fn wait_ready(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while self.ready.len() < SIZE {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((r, line)) if line.contains("READY rank") => {
                    self.ready.insert(r);
                }
                Ok(_) => {}
                Err(_) => panic!(
                    "ranks {:?} of {SIZE} were ready within {within:?}\n{}",
                    self.ready,
                    self.all_output()
                ),
            }
        }
    }

    /// Tells the ranks to go on, then waits for the job to end.
    fn go_and_wait(&mut self) -> Vec<RankEnd> {
        std::fs::write(&self.go, b"go").expect("cannot write the go file");
        let deadline = Instant::now() + JOB_TIMEOUT;
        let mut statuses: Vec<Option<ExitStatus>> = vec![None; SIZE];
        while statuses.iter().any(Option::is_none) {
            for (r, s) in statuses.iter_mut().enumerate() {
                if s.is_none() {
                    *s = self.ranks[r].as_mut().unwrap().try_wait().expect("wait");
                }
            }
            if Instant::now() > deadline {
                let out = self.all_output();
                self.kill();
                panic!("the job did not finish within {JOB_TIMEOUT:?}\n{out}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let the output threads take the last lines.
        std::thread::sleep(Duration::from_millis(200));
        statuses
            .into_iter()
            .enumerate()
            .map(|(r, s)| RankEnd {
                status: s.unwrap(),
                stdout: self.stdout[r].lock().unwrap().join("\n"),
                stderr: self.stderr[r].lock().unwrap().join("\n"),
            })
            .collect()
    }

    fn kill(&mut self) {
        for child in self.ranks.iter_mut().flatten() {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.go);
    }
}

/// Checks that the job finished correctly: every rank exited 0 having
/// received every job message and nothing else.
fn assert_finished_correctly(ends: &[RankEnd]) {
    let all: String = ends
        .iter()
        .enumerate()
        .map(|(r, e)| {
            format!(
                "--- rank {r}: {} ---\n{}\n{}\n",
                e.status, e.stdout, e.stderr
            )
        })
        .collect();
    for (r, e) in ends.iter().enumerate() {
        assert!(
            !e.stderr.contains("DISPATCHED"),
            "a stranger's frame was delivered to rank {r}\n{all}"
        );
        assert!(e.status.success(), "rank {r} failed: {}\n{all}", e.status);
        let want = format!(
            "RESULT rank {r}: {} messages, every one from the job and in order",
            MESSAGES as usize * (SIZE - 1)
        );
        assert!(
            e.stdout.contains(&want),
            "rank {r} did not finish its work\n{all}"
        );
    }
}

/// Asserts that rank `r` logged refusing the connection from `peer`, for a
/// reason containing `why`.
fn assert_refusal_logged(ends: &[RankEnd], r: Rank, peer: SocketAddr, why: &str) {
    let prefix = format!("mttl: rank {r}: refused a connection from {peer}: ");
    let line = ends[r]
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| {
            panic!(
                "rank {r} did not log refusing {peer}\n--- its stderr ---\n{}",
                ends[r].stderr
            )
        });
    assert!(line.contains(why), "{line:?} does not say {why:?}");
}

/// The port a process listens on, from `/proc`: the listening TCP socket
/// among its open files.
fn listening_port(pid: u32) -> Option<u16> {
    let mut inodes = HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy().into_owned();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // local_address is f[1] (ADDR:PORT in hex), st f[3] (0A: LISTEN),
        // inode f[9].
        if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
            u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()
        } else {
            None
        }
    })
}

/// The CPU time a process has used so far, from `/proc`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the rank's stat");
    // The fields after the command name (which may hold spaces): utime and
    // stime are the 12th and 13th, in clock ticks.
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|x| x.parse().expect("a number"))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis((f[0] + f[1]) * 1000 / ticks)
}

// ---------------------------------------------------------------------------
// The strangers.

/// The rogue's frame: a valid header (`frame.rs`) for an `INVOKE`-tagged
/// message whose body is laid out as the runtime's invoke (function id,
/// reply cell, encoded arguments), the arguments being [`ROGUE_MARK`].
fn rogue_invoke_frame() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0x6d74_746c_726f_6775u64.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(ROGUE_MARK.len() as u8);
    body.extend_from_slice(ROGUE_MARK);
    let mut frame = encode_header(false, INVOKE_TAG, body.len()).to_vec();
    frame.extend_from_slice(&body);
    // The same frame again, for a reader that skipped some bytes.
    frame.extend_from_within(..);
    frame
}

fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

/// Reads until the rank drops the connection; returns how long it took and
/// what it sent. Fails if the connection is still open after [`DROP_BOUND`].
fn until_dropped(mut s: TcpStream, what: &str) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = DROP_BOUND.saturating_sub(start.elapsed());
        assert!(
            !left.is_zero(),
            "{what}: the rank kept the connection open for {DROP_BOUND:?}"
        );
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (start.elapsed(), got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == IoErrorKind::ConnectionReset => return (start.elapsed(), got),
            Err(e) if matches!(e.kind(), IoErrorKind::WouldBlock | IoErrorKind::TimedOut) => {}
            Err(e) if e.kind() == IoErrorKind::Interrupted => {}
            Err(e) => panic!("{what}: reading failed: {e}"),
        }
    }
}

/// Writes what it can: the rank may close first, which is what we expect.
fn write_some(s: &mut TcpStream, bytes: &[u8]) {
    let _ = s.write_all(bytes);
}

/// A rogue that sends the invoke frame at once, instead of a handshake.
/// Returns its address, as the rank sees it.
fn rogue_frame_at_once(at: SocketAddr) -> SocketAddr {
    let mut s = connect(at);
    let me = s.local_addr().unwrap();
    write_some(&mut s, &rogue_invoke_frame());
    until_dropped(s, "a rogue sending an invoke frame");
    me
}

/// A rogue that knows the handshake but not the secret: it greets as rank
/// 1, takes the rank's challenge, and answers it with the invoke frame
/// (whose first bytes stand where the proof should be).
fn rogue_after_hello(at: SocketAddr) -> SocketAddr {
    let mut s = connect(at);
    let me = s.local_addr().unwrap();
    let mut hello = HELLO.to_vec();
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&[0x5a; 32]);
    write_some(&mut s, &hello);
    // The challenge: greeting, rank, nonce, MAC.
    let mut challenge = [0u8; 8 + 4 + 32 + 32];
    s.set_read_timeout(Some(DROP_BOUND)).unwrap();
    s.read_exact(&mut challenge)
        .expect("the rank answers a greeting with its challenge");
    assert_eq!(&challenge[..8], HELLO);
    write_some(&mut s, &rogue_invoke_frame());
    let (_, rest) = until_dropped(s, "a rogue answering the challenge with a frame");
    // Never the acceptance byte.
    assert!(rest.is_empty(), "the rank accepted a rogue: {rest:?}");
    me
}

/// A port scan: connect and close at once. Returns the address.
fn port_scan(at: SocketAddr) -> SocketAddr {
    let s = connect(at);
    let me = s.local_addr().unwrap();
    drop(s);
    me
}

/// Connect, then reset the connection (close with a zero linger).
fn reset_at_once(at: SocketAddr) {
    let s = connect(at);
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on an open socket we own, with a valid `linger`
    // of the size given.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// Random garbage (64 KiB), then wait to be dropped. Returns the address.
fn garbage(at: SocketAddr, seed: u64) -> SocketAddr {
    let mut s = connect(at);
    let me = s.local_addr().unwrap();
    let mut x = seed | 1;
    let bytes: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    write_some(&mut s, &bytes);
    until_dropped(s, "a client sending garbage");
    me
}

/// A connection that sends nothing: opened now, checked by [`Silent::dropped`].
struct Silent {
    stream: TcpStream,
    addr: SocketAddr,
}

impl Silent {
    fn open(at: SocketAddr) -> Silent {
        let stream = connect(at);
        let addr = stream.local_addr().unwrap();
        Silent { stream, addr }
    }

    /// Waits until the rank drops it; returns how long that took from now.
    fn dropped(self) -> Duration {
        until_dropped(self.stream, "a silent connection").0
    }
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn a_rogue_invoke_frame_is_never_delivered_and_the_job_finishes() {
    if in_job() {
        rank_program();
    }
    let mut job = Job::new("a_rogue_invoke_frame_is_never_delivered_and_the_job_finishes");
    for r in 0..SIZE {
        job.start(r);
    }
    job.wait_ready(Duration::from_secs(60));
    // Rank 0's rendezvous port and rank 2's own, both now guarded.
    let targets = [(0, job.root), (2, job.listening(2))];
    assert_eq!(job.listening(0), job.root);
    let mut rogues = Vec::new();
    for &(r, at) in &targets {
        rogues.push((r, rogue_frame_at_once(at), "not an mttl handshake"));
        rogues.push((
            r,
            rogue_after_hello(at),
            "authentication failed (claimed rank 1, wrong job secret)",
        ));
    }
    let ends = job.go_and_wait();
    assert_finished_correctly(&ends);
    for (r, peer, why) in rogues {
        assert_refusal_logged(&ends, r, peer, why);
    }
}

#[test]
fn port_scans_garbage_and_silent_connections_do_not_stop_the_job() {
    if in_job() {
        rank_program();
    }
    let mut job = Job::new("port_scans_garbage_and_silent_connections_do_not_stop_the_job");

    // During the rendezvous: only rank 0 runs, and strangers get there
    // first.
    job.start(0);
    let root = job.listening(0);
    assert_eq!(root, job.root);
    let silent_early = Silent::open(root);
    let scanned_early = port_scan(root);
    reset_at_once(root);
    let garbage_early = garbage(root, 1);
    let early_rogue = rogue_frame_at_once(root);
    job.start(1);
    job.start(2);
    job.wait_ready(Duration::from_secs(60));

    // In the job: the same at rank 0 and rank 1, and many scans at once.
    let at1 = job.listening(1);
    let mut silent = vec![(0, Silent::open(root)), (1, Silent::open(at1))];
    let mut scanned = Vec::new();
    let mut garbled = Vec::new();
    for (r, at) in [(0, root), (1, at1)] {
        for _ in 0..20 {
            scanned.push((r, port_scan(at)));
        }
        for _ in 0..5 {
            reset_at_once(at);
        }
        garbled.push((r, garbage(at, 7 + r as u64)));
    }
    let silent_times: Vec<(Rank, SocketAddr, Duration)> = silent
        .drain(..)
        .map(|(r, s)| (r, s.addr, s.dropped()))
        .collect();
    let early_addr = silent_early.addr;
    silent_early.dropped();

    let ends = job.go_and_wait();
    assert_finished_correctly(&ends);
    assert_refusal_logged(&ends, 0, early_addr, "handshake timed out");
    assert_refusal_logged(&ends, 0, scanned_early, "reading hello");
    assert_refusal_logged(&ends, 0, garbage_early, "not an mttl handshake");
    assert_refusal_logged(&ends, 0, early_rogue, "not an mttl handshake");
    for (r, addr, took) in silent_times {
        assert_refusal_logged(&ends, r, addr, "handshake timed out");
        // Dropped by the handshake timeout, not by the end of the job.
        assert!(took < DROP_BOUND, "{took:?}");
    }
    for (r, addr) in scanned {
        assert_refusal_logged(&ends, r, addr, "reading hello");
    }
    for (r, addr) in garbled {
        assert_refusal_logged(&ends, r, addr, "not an mttl handshake");
    }
}

/// Rank 0's file descriptors run out during the rendezvous: a flood of
/// silent connections holds them all. Its accept fails (EMFILE) until the
/// handshakes time out and give them back; the rendezvous must wait that
/// out, not give up. Then the same flood while the port is guarded: the
/// guard must wait too, not spin on the failing accept. The job must
/// finish.
#[test]
fn a_flood_that_exhausts_rank_0s_files_only_delays_the_rendezvous() {
    if in_job() {
        rank_program();
    }
    let mut job = Job::new("a_flood_that_exhausts_rank_0s_files_only_delays_the_rendezvous");
    // Enough for a rank's own needs (standard streams, the I/O runtime,
    // the listener, the links), not for the flood as well.
    job.start_with_file_limit(0, Some(40));
    let root = job.listening(0);
    let flood: Vec<Silent> = (0..60).map(|_| Silent::open(root)).collect();
    // Let rank 0 take what it can of the flood and run out.
    std::thread::sleep(Duration::from_millis(300));
    job.start(1);
    job.start(2);
    job.wait_ready(Duration::from_secs(60));
    drop(flood);

    let flood: Vec<Silent> = (0..60).map(|_| Silent::open(root)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_time(job.pid(0));
    std::thread::sleep(Duration::from_secs(2));
    let busy = cpu_time(job.pid(0)) - before;
    assert!(
        // Waiting costs a few milliseconds of CPU (more in a slow debug
        // build, still well below the bound); spinning on the failed accept
        // costs about twice the bound.
        busy < Duration::from_millis(150),
        "rank 0 used {busy:?} of CPU in 2 s while out of files\n{}",
        job.all_output()
    );
    drop(flood);
    let ends = job.go_and_wait();
    assert_finished_correctly(&ends);
    assert!(
        ends[0]
            .stderr
            .contains("mttl: rank 0: accepting a connection failed"),
        "rank 0 never ran out of files: the test proves nothing\n{}",
        ends[0].stderr
    );
}
