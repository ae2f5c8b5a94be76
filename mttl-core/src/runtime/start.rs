//! Start-up, the loop itself and shut-down (see the steps in the parent
//! module): `start`, which joins the job and runs the user's main on rank 0,
//! and `serve`, the loop every rank runs until the exit protocol ends it.

use std::time::{Duration, Instant};

use mttl_comm::{AnyComm, Comm};

use super::dispatch::{dispatch, start_services, stop_services};
use super::{exit, hello, BATCH, IDLE_TICK, TCP_POLL_EVERY};
use crate::context::{self, report_line, Context, FAILURE_CODE};
use crate::stats;
use crate::thread;
use crate::trace::{self, Kind};
use crate::watchdog;

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
    let cx = match Context::new(comm) {
        Ok(cx) => cx,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    let rank = cx.rank;
    if let Err(e) = start_services(&cx) {
        eprintln!("mttl: {e}");
        return FAILURE_CODE;
    }
    context::install(cx);
    let job_id = hello::check_registries();
    context::with(|cx| {
        if let Err(e) = trace::start(job_id, cx.rank as u32, cx.size as u32) {
            cx.fail(&format!("rank {}: {e}", cx.rank), FAILURE_CODE);
        }
        cx.flush_all_or_fail();
    });
    if let (0, Some(main)) = (rank, main) {
        thread::spawn_detached("main", move || {
            let code = main().exit_code();
            exit::begin(code);
        });
    }
    serve();
    // Shut-down. Threads still suspended are about to be unwound: their
    // memory must not be freed under a send still reading it.
    context::try_with(Context::finish_borrowed_sends);
    trace::finish();
    let cx = context::uninstall();
    stop_services();
    thread::unwind_all();
    let Some(cx) = cx else { return FAILURE_CODE };
    let code = exit::code().unwrap_or(FAILURE_CODE);
    if stats::enabled() {
        report_line(&format!("mttl stats rank {}: {}", cx.rank, cx.stats));
    }
    if let Err(e) = cx.comm.finish() {
        eprintln!("mttl: {e}");
        return if code == 0 { FAILURE_CODE } else { code };
    }
    code
}

/// The main loop (see the module docs).
fn serve() {
    let mut last_look = Instant::now();
    let poll_every = context::with(|cx| match cx.comm {
        AnyComm::Tcp(_) => TCP_POLL_EVERY,
        #[allow(unreachable_patterns)]
        _ => Duration::ZERO,
    });
    loop {
        let ran = thread::run_ready(BATCH);
        if thread::pending_panics() > 0 {
            let p = thread::take_panics().remove(0);
            context::with(|cx| cx.fail_panic(&p));
        }
        watchdog::progressed(ran);
        if context::with(|cx| {
            // Batches leave before the loop looks at the network.
            cx.flush_all_or_fail();
            exit::done(cx)
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
            let got = context::with(|cx| {
                let begin = trace::begin();
                let m = cx.comm.recv_any(wait);
                if let Ok(Some(m)) = &m {
                    cx.stats.recv += 1;
                    trace::received(Kind::RecvAny, begin, m.source, m.tag, m.data.len());
                }
                m
            });
            match got {
                Ok(Some(m)) => {
                    if context::with(|cx| {
                        dispatch(cx, m);
                        if exit::done(cx) {
                            // The last acknowledgement must leave.
                            cx.flush_all_or_fail();
                            return true;
                        }
                        false
                    }) {
                        return;
                    }
                }
                Ok(None) => {
                    if wait == Some(IDLE_TICK) {
                        watchdog::idle();
                    }
                    break;
                }
                Err(e) => context::with(|cx| cx.comm_failed(&e)),
            }
            wait = Some(Duration::ZERO);
        }
    }
}
