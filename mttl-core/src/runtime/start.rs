//! Start-up and the loop itself (see the steps in the parent module):
//! `start`, which joins the job and runs the user's main on rank 0, the
//! registry check of start-up step 3, and `serve`, the loop every rank runs
//! until the exit protocol ends it.

use std::time::{Duration, Instant};

use mttl_comm::{AnyComm, Comm};

use super::{
    report_line, try_with_rt, with_rt, Runtime, BATCH, FAILURE_CODE, IDLE_TICK, MISMATCH_CODE,
    RUNTIME, TCP_POLL_EVERY,
};
use crate::registry::Registry;
use crate::stats;
use crate::thread;
use crate::watchdog;
use crate::wire::{self, Fields, HeaderBuf};

/// What `#[mttl::main]` may return: `()`, an `i32` exit code, or a
/// `Result` whose error is printed.
pub trait MainResult {
    /// The process exit code.
    fn exit_code(self) -> i32;
}

impl MainResult for () {
    fn exit_code(self) -> i32 {
        0
    }
}

impl MainResult for i32 {
    fn exit_code(self) -> i32 {
        self
    }
}

impl<E: std::fmt::Debug> MainResult for Result<(), E> {
    fn exit_code(self) -> i32 {
        match self {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("Error: {e:?}");
                1
            }
        }
    }
}

/// Runs an mttl program: what `#[mttl::main]` expands to. Rank 0 runs
/// `main`; every other rank serves until rank 0's main returns. Returns the
/// exit code for the process.
pub fn start<R: MainResult>(main: impl FnOnce() -> R + 'static) -> i32 {
    if let Some(job) = super::local::job_from_env() {
        return super::local::run_job(job, main);
    }
    if let Some(code) = mttl_comm::launch::self_launch_from_env() {
        return code;
    }
    let comm = match AnyComm::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    run_rank(comm, Some(main))
}

/// Start-up steps 2 to 4 and the rest of one rank's life on `comm`; rank 0
/// runs `main`. Returns the rank's exit code.
pub(super) fn run_rank<R: MainResult>(
    comm: AnyComm,
    main: Option<impl FnOnce() -> R + 'static>,
) -> i32 {
    let rt = match Runtime::new(comm) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    let rank = rt.rank;
    RUNTIME.with(|cell| *cell.borrow_mut() = Some(rt));
    check_registries();
    with_rt(|rt| {
        if let Err(e) = rt.flush_all() {
            rt.comm_failed(&e);
        }
    });
    if let (0, Some(main)) = (rank, main) {
        thread::spawn("main", move || {
            let code = main().exit_code();
            with_rt(|rt| rt.begin_exit(code));
        });
    }
    serve();
    // Threads still suspended are about to be unwound: their memory must
    // not be freed under a send still reading it.
    try_with_rt(Runtime::finish_borrowed_sends);
    let rt = RUNTIME.with(|cell| cell.borrow_mut().take());
    thread::unwind_all();
    let Some(rt) = rt else { return FAILURE_CODE };
    let code = rt.exit_code.unwrap_or(FAILURE_CODE);
    if stats::enabled() {
        report_line(&format!("mttl stats rank {}: {}", rt.rank, rt.stats));
    }
    if let Err(e) = rt.comm.finish() {
        eprintln!("mttl: {e}");
        return if code == 0 { FAILURE_CODE } else { code };
    }
    code
}

/// Start-up step 3.
fn check_registries() {
    with_rt(|rt| {
        let reg = Registry::get();
        if rt.size == 1 {
            return;
        }
        if rt.rank != 0 {
            let header = HeaderBuf::with_capacity(8).u64(reg.digest()).bytes;
            if let Err(e) = rt.post(0, wire::HELLO, &header, reg.listing().as_bytes()) {
                rt.comm_failed(&e);
            }
            let ack = match rt.comm.recv_from(0, None) {
                Ok(Some(m)) if m.tag == wire::HELLO_ACK && !m.data.is_empty() => m,
                Ok(_) => rt.fail(
                    "rank 0 answered the start-up check with something else",
                    FAILURE_CODE,
                ),
                Err(e) => rt.comm_failed(&e),
            };
            rt.stats.recv += 1;
            if ack.data[0] != wire::STATUS_OK {
                report_line(&format!(
                    "mttl: rank {}: refused at start-up: {}",
                    rt.rank,
                    String::from_utf8_lossy(&ack.data[1..])
                ));
                std::process::exit(MISMATCH_CODE);
            }
            return;
        }
        let mut problems = Vec::new();
        for _ in 1..rt.size {
            let m = match rt.comm.recv_any(None) {
                Ok(Some(m)) if m.tag == wire::HELLO && m.data.len() >= 8 => m,
                Ok(Some(m)) => rt.fail(
                    &format!(
                        "rank {} sent kind {} before the start-up check",
                        m.source, m.tag
                    ),
                    FAILURE_CODE,
                ),
                Ok(None) => continue,
                Err(e) => rt.comm_failed(&e),
            };
            rt.stats.recv += 1;
            let digest = Fields(&m.data[..8]).u64();
            if digest != reg.digest() {
                problems
                    .push(reg.explain_mismatch(m.source, &String::from_utf8_lossy(&m.data[8..])));
            }
        }
        let verdict = if problems.is_empty() {
            vec![wire::STATUS_OK]
        } else {
            let mut v = vec![wire::STATUS_ERROR];
            v.extend_from_slice(problems.join("\n").as_bytes());
            v
        };
        for r in 1..rt.size {
            let _ = rt.post(r, wire::HELLO_ACK, &verdict, &[]);
        }
        if !problems.is_empty() {
            report_line(&format!(
                "mttl: rank 0: refusing to start: {}",
                problems.join("\n")
            ));
            // Let the verdicts reach every rank before leaving.
            rt.exit_code = Some(MISMATCH_CODE);
            std::thread::sleep(Duration::from_millis(200));
            std::process::exit(MISMATCH_CODE);
        }
    });
}

/// The main loop (see the module docs).
fn serve() {
    let mut last_look = Instant::now();
    let poll_every = with_rt(|rt| match rt.comm {
        AnyComm::Tcp(_) => TCP_POLL_EVERY,
        #[allow(unreachable_patterns)]
        _ => Duration::ZERO,
    });
    loop {
        let ran = thread::run_ready(BATCH);
        if thread::pending_panics() > 0 {
            let p = thread::take_panics().remove(0);
            let at = p.location.map(|l| format!(" at {l}")).unwrap_or_default();
            let why = format!("thread '{}' panicked{at}: {}", p.name, p.message);
            with_rt(|rt| rt.fail(&why, 101));
        }
        if with_rt(|rt| {
            rt.watchdog.progressed(ran);
            // Batches leave before the loop looks at the network.
            if let Err(e) = rt.flush_all() {
                rt.comm_failed(&e);
            }
            rt.done()
        }) {
            return;
        }
        let idle = ran == 0 && thread::ready_threads() == 0;
        if !idle && !poll_every.is_zero() {
            // Threads are ready: look at the network only now and then.
            let now = Instant::now();
            if !thread::take_look_request() && now - last_look < poll_every {
                continue;
            }
            last_look = now;
        }
        let mut wait = Some(if idle { IDLE_TICK } else { Duration::ZERO });
        // Dispatch what has arrived, then get back to the threads.
        for _ in 0..BATCH {
            let got = with_rt(|rt| {
                let m = rt.comm.recv_any(wait);
                if let Ok(Some(_)) = &m {
                    rt.stats.recv += 1;
                }
                m
            });
            match got {
                Ok(Some(m)) => {
                    if with_rt(|rt| {
                        rt.dispatch(m);
                        if rt.done() {
                            // The last acknowledgement must leave.
                            if let Err(e) = rt.flush_all() {
                                rt.comm_failed(&e);
                            }
                            return true;
                        }
                        false
                    }) {
                        return;
                    }
                }
                Ok(None) => {
                    if wait == Some(IDLE_TICK) {
                        with_rt(watchdog::idle);
                    }
                    break;
                }
                Err(e) => with_rt(|rt| rt.comm_failed(&e)),
            }
            wait = Some(Duration::ZERO);
        }
    }
}
