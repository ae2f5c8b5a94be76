//! Unit tests of the thread module. Each test runs on its own OS thread (the
//! test harness's), so each gets a fresh scheduler.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::stack::stack_size_from;
use super::*;

type Log = Rc<RefCell<Vec<String>>>;

fn log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

fn push(log: &Log, entry: impl Into<String>) {
    log.borrow_mut().push(entry.into());
}

fn entries(log: &Log) -> Vec<String> {
    log.borrow().clone()
}

/// The runtime's spawn, which gives the id: most of these tests are about
/// ids (the handle's are in the tests of `join`, below).
fn spawn(name: &'static str, f: impl FnOnce() + 'static) -> ThreadId {
    spawn_detached(name, f)
}

/// Runs until no thread is ready.
fn drain() {
    while run_ready(usize::MAX) > 0 {}
}

#[test]
fn spawned_threads_run_in_fifo_order_and_not_before_run_ready() {
    let log = log();
    for i in 0..5 {
        let log = log.clone();
        spawn("fifo", move || push(&log, format!("t{i}")));
    }
    assert!(entries(&log).is_empty(), "spawn must not run the thread");
    assert_eq!((live_threads(), ready_threads()), (5, 5));
    assert_eq!(run_ready(usize::MAX), 5);
    assert_eq!(entries(&log), ["t0", "t1", "t2", "t3", "t4"]);
    assert_eq!((live_threads(), ready_threads()), (0, 0));
}

#[test]
fn run_ready_resumes_at_most_max_threads() {
    let log = log();
    for i in 0..3 {
        let log = log.clone();
        spawn("max", move || push(&log, format!("t{i}")));
    }
    assert_eq!(run_ready(2), 2);
    assert_eq!(entries(&log), ["t0", "t1"]);
    assert_eq!(ready_threads(), 1);
    assert_eq!(run_ready(0), 0);
    assert_eq!(run_ready(10), 1);
    assert_eq!(run_ready(10), 0);
}

#[test]
fn yield_to_loop_ends_the_batch() {
    let log = log();
    for name in ["a", "b"] {
        let log = log.clone();
        spawn("to-loop", move || {
            push(&log, format!("{name}0"));
            yield_to_loop();
            push(&log, format!("{name}1"));
        });
    }
    // `a` yields to the loop: the batch ends before `b` starts.
    assert_eq!(run_ready(usize::MAX), 1);
    assert_eq!(entries(&log), ["a0"]);
    assert_eq!(run_ready(usize::MAX), 1);
    assert_eq!(entries(&log), ["a0", "b0"]);
    drain();
    assert_eq!(entries(&log), ["a0", "b0", "a1", "b1"]);
    assert_eq!(live_threads(), 0);
}

#[test]
fn yield_interleaves_threads_in_fifo_order() {
    let log = log();
    for name in ["a", "b", "c"] {
        let log = log.clone();
        spawn("yielder", move || {
            for round in 0..3 {
                push(&log, format!("{name}{round}"));
                yield_now();
            }
        });
    }
    drain();
    assert_eq!(
        entries(&log),
        ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
    );
}

#[test]
fn spawn_from_a_thread_queues_behind_ready_threads() {
    let log = log();
    {
        let log = log.clone();
        spawn("parent", move || {
            let child_log = log.clone();
            spawn("child", move || push(&child_log, "child"));
            push(&log, "parent before yield");
            yield_now();
            push(&log, "parent after yield");
        });
    }
    {
        let log = log.clone();
        spawn("sibling", move || push(&log, "sibling"));
    }
    drain();
    assert_eq!(
        entries(&log),
        [
            "parent before yield",
            "sibling",
            "child",
            "parent after yield"
        ]
    );
}

#[test]
fn current_and_in_thread() {
    assert_eq!(current(), None);
    assert!(!in_thread());
    assert_eq!(current_name(), None);
    let seen = Rc::new(Cell::new(None));
    let id = {
        let seen = seen.clone();
        spawn("who-am-i", move || {
            assert!(in_thread());
            assert_eq!(current_name(), Some("who-am-i"));
            seen.set(current());
        })
    };
    drain();
    assert_eq!(seen.get(), Some(id));
    assert_eq!(current(), None);
}

#[test]
fn block_waits_until_wake_and_reports_its_reason() {
    let log = log();
    let line = line!() + 5;
    let id = {
        let log = log.clone();
        spawn("blocker", move || {
            push(&log, "before");
            block(BlockReason::new("test event").with_rank(7));
            push(&log, "after");
        })
    };
    drain();
    assert_eq!(entries(&log), ["before"]);
    assert_eq!((live_threads(), ready_threads()), (1, 0));
    let blocked = blocked_threads();
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].id, id);
    assert_eq!(blocked[0].name, "blocker");
    assert_eq!(blocked[0].reason.what(), "test event");
    assert_eq!(blocked[0].reason.detail(), Some(("rank", 7)));
    assert_eq!(blocked[0].reason.location().line(), line);
    assert!(blocked[0].reason.location().file().ends_with("tests.rs"));

    wake(id);
    assert!(blocked_threads().is_empty());
    assert_eq!(ready_threads(), 1);
    drain();
    assert_eq!(entries(&log), ["before", "after"]);
    assert_eq!(live_threads(), 0);
}

#[test]
fn wake_of_a_ready_thread_leaves_a_permit_that_block_consumes() {
    let log = log();
    let id = {
        let log = log.clone();
        spawn("permit", move || {
            yield_now();
            // Woken while ready: this block returns at once.
            block(BlockReason::new("first"));
            push(&log, "passed first block");
            // The permit is used up (two wakes left one): this one blocks.
            block(BlockReason::new("second"));
            push(&log, "passed second block");
        })
    };
    assert_eq!(run_ready(1), 1); // runs to the yield
    wake(id);
    wake(id);
    drain();
    assert_eq!(entries(&log), ["passed first block"]);
    assert_eq!(blocked_threads()[0].reason.what(), "second");
    wake(id);
    drain();
    assert_eq!(entries(&log), ["passed first block", "passed second block"]);
}

#[test]
fn wake_of_the_running_thread_itself_leaves_a_permit() {
    let passed = Rc::new(Cell::new(false));
    {
        let passed = passed.clone();
        spawn("self-wake", move || {
            wake(current().unwrap());
            block(BlockReason::new("never, permit pending"));
            passed.set(true);
        });
    }
    assert_eq!(run_ready(usize::MAX), 1, "the block must not switch");
    assert!(passed.get());
}

#[test]
fn a_thread_can_wake_another() {
    let log = log();
    let sleeper = {
        let log = log.clone();
        spawn("sleeper", move || {
            push(&log, "sleeper blocks");
            block(BlockReason::new("waker"));
            push(&log, "sleeper woke");
        })
    };
    {
        let log = log.clone();
        spawn("waker", move || {
            push(&log, "waker wakes");
            wake(sleeper);
            push(&log, "waker continues");
        });
    }
    drain();
    assert_eq!(
        entries(&log),
        [
            "sleeper blocks",
            "waker wakes",
            "waker continues",
            "sleeper woke"
        ]
    );
}

#[test]
fn waking_a_finished_or_stale_id_is_harmless() {
    let finished = spawn("short", || {});
    drain();
    wake(finished); // finished: nothing happens
    assert_eq!((live_threads(), ready_threads()), (0, 0));

    // The slot is reused by the next thread, under a new generation.
    let passed = Rc::new(Cell::new(false));
    let reused = {
        let passed = passed.clone();
        spawn("reuser", move || {
            block(BlockReason::new("real wake"));
            passed.set(true);
        })
    };
    assert_eq!(reused.index(), finished.index());
    assert_ne!(reused, finished);
    drain();
    wake(finished); // stale: must not wake `reused`
    assert_eq!(ready_threads(), 0);
    drain();
    assert!(!passed.get());
    assert_eq!(blocked_threads().len(), 1);

    // An id that was never issued on this OS thread.
    wake(ThreadId::new(1_000_000, 0));
    wake(reused);
    drain();
    assert!(passed.get());
}

#[test]
#[should_panic(expected = "block() called outside an mttl thread")]
fn block_outside_a_thread_panics() {
    block(BlockReason::new("nothing"));
}

#[test]
fn yield_outside_a_thread_does_nothing() {
    yield_now();
    assert_eq!(ready_threads(), 0);
}

#[test]
fn panics_are_captured_with_name_message_and_location() {
    // Warm the pool so the panicking thread runs on a pooled stack.
    spawn("warm-up", || {});
    drain();
    let before = stack_stats();

    let line = line!() + 2;
    let id = spawn("doomed", move || {
        panic!("boom {}", 7);
    });
    let after_id = spawn("survivor", || {});
    drain();
    assert_eq!(live_threads(), 0);
    let panics = take_panics();
    assert_eq!(panics.len(), 1);
    let report = &panics[0];
    assert_eq!(report.thread, id);
    assert_eq!(report.name, "doomed");
    assert_eq!(report.message, "boom 7");
    let location = report.location.as_ref().expect("hook saw the panic");
    assert!(location.file.ends_with("tests.rs"), "{location}");
    assert_eq!(location.line, line);
    assert!(report
        .to_string()
        .starts_with("thread 'doomed' panicked at "));
    assert!(take_panics().is_empty());
    let _ = after_id;

    // Both stacks came back: no fresh mapping was needed, both are pooled.
    let after = stack_stats();
    assert_eq!(
        after.fresh,
        before.fresh + 1,
        "only `survivor` needed a new stack"
    );
    assert_eq!(after.pooled, before.pooled + 1);
    spawn("reuse", || {});
    spawn("reuse", || {});
    drain();
    assert_eq!(stack_stats().fresh, after.fresh);
}

#[test]
fn non_string_and_resumed_payloads_are_reported() {
    spawn("any-payload", || std::panic::panic_any(42_u32));
    spawn("resumed", || std::panic::resume_unwind(Box::new("quiet")));
    drain();
    let panics = take_panics();
    assert_eq!(panics.len(), 2);
    assert_eq!(panics[0].message, "Box<dyn Any>");
    assert!(panics[0].location.is_some());
    assert_eq!(panics[1].message, "quiet");
    assert_eq!(panics[1].location, None, "resume_unwind passes no hook");
}

#[test]
fn a_panic_caught_inside_the_thread_is_not_reported() {
    let recovered = Rc::new(Cell::new(false));
    {
        let recovered = recovered.clone();
        spawn("recovers", move || {
            let result = std::panic::catch_unwind(|| panic!("inner"));
            recovered.set(result.is_err());
            yield_now();
        });
    }
    drain();
    assert!(recovered.get());
    assert_eq!(pending_panics(), 0);
}

#[test]
fn finished_stacks_are_pooled_and_reused() {
    let start = stack_stats();
    // Sequential threads: one stack serves them all.
    for _ in 0..100 {
        spawn("sequential", || {});
        drain();
    }
    let sequential = stack_stats();
    assert!(sequential.fresh <= start.fresh + 1, "{sequential:?}");
    assert!(sequential.reused >= start.reused + 99);

    // Ten at once: the pool supplies what it has, the rest are mapped.
    for _ in 0..10 {
        spawn("concurrent", yield_now);
    }
    let concurrent = stack_stats();
    let from_pool = sequential.pooled.min(10);
    assert_eq!(concurrent.fresh - sequential.fresh, (10 - from_pool) as u64);
    assert_eq!(concurrent.pooled, sequential.pooled - from_pool);
    drain();
    assert_eq!(stack_stats().pooled, sequential.pooled.max(10));
    assert_eq!(stack_stats().fresh, concurrent.fresh);
}

#[test]
fn twenty_thousand_threads_block_at_once_then_all_finish() {
    const THREADS: usize = 20_000;
    let ids = Rc::new(RefCell::new(Vec::with_capacity(THREADS)));
    let finished = Rc::new(Cell::new(0_usize));
    for i in 0..THREADS {
        let ids = ids.clone();
        let finished = finished.clone();
        spawn("many", move || {
            ids.borrow_mut().push(current().unwrap());
            // Force a deeper-than-trivial stack to be live while blocked.
            let marker = std::hint::black_box([i as u8; 64]);
            block(BlockReason::new("mass wake").with_detail("i", i as u64));
            assert_eq!(marker[63], i as u8);
            finished.set(finished.get() + 1);
        });
    }
    assert_eq!(run_ready(usize::MAX), THREADS);
    assert_eq!(live_threads(), THREADS);
    assert_eq!(ready_threads(), 0);
    assert_eq!(blocked_threads().len(), THREADS);
    assert_eq!(finished.get(), 0);

    for &id in ids.borrow().iter().rev() {
        wake(id);
    }
    assert_eq!(ready_threads(), THREADS);
    assert_eq!(run_ready(usize::MAX), THREADS);
    assert_eq!(finished.get(), THREADS);
    assert_eq!(live_threads(), 0);
    assert!(blocked_threads().is_empty());
    assert!(stack_stats().pooled <= stack::POOL_CAPACITY);
}

#[test]
fn unwind_all_drops_values_on_suspended_and_unstarted_threads() {
    struct Flag(Rc<Cell<usize>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
            // Blocking and yielding during an unwind return at once.
            if in_thread() {
                yield_now();
                block(BlockReason::new("during unwind"));
            }
        }
    }
    let dropped = Rc::new(Cell::new(0));
    {
        let flag = Flag(dropped.clone());
        spawn("blocked", move || {
            let _flag = flag;
            block(BlockReason::new("forever"));
            unreachable!();
        });
    }
    {
        let flag = Flag(dropped.clone());
        spawn("yielding", move || {
            let _flag = flag;
            loop {
                yield_now();
            }
        });
    }
    assert_eq!(run_ready(2), 2);
    {
        let flag = Flag(dropped.clone());
        spawn("unstarted", move || drop(flag));
    }
    assert_eq!(live_threads(), 3);
    let pooled_before = stack_stats().pooled;
    assert_eq!(unwind_all(), 3);
    assert_eq!(dropped.get(), 3);
    assert_eq!((live_threads(), ready_threads()), (0, 0));
    assert_eq!(pending_panics(), 0, "forced unwinds are not panics");
    assert_eq!(stack_stats().pooled, pooled_before + 3);
}

#[test]
fn stack_size_parsing() {
    assert_eq!(parse_stack_size("262144"), Ok(262_144));
    assert_eq!(parse_stack_size("256K"), Ok(256 << 10));
    assert_eq!(parse_stack_size("256k"), Ok(256 << 10));
    assert_eq!(parse_stack_size(" 1M "), Ok(1 << 20));
    assert_eq!(parse_stack_size("2MiB"), Ok(2 << 20));
    assert_eq!(parse_stack_size("1g"), Ok(1 << 30));
    assert_eq!(parse_stack_size("16K"), Ok(MIN_STACK_SIZE));

    for bad in [
        "",
        "K",
        "abc",
        "12X",
        "1.5M",
        "-1",
        "0",
        "4K",
        "2G",
        "99999999999999999999999",
    ] {
        let error = parse_stack_size(bad).expect_err(bad);
        let text = error.to_string();
        assert!(text.starts_with("MTTL_STACK_SIZE="), "{text}");
        assert!(text.contains("e.g. MTTL_STACK_SIZE=512K"), "{text}");
    }
    assert_eq!(
        parse_stack_size("12X").unwrap_err().problem,
        "the suffix is not one of K, M, G"
    );
    assert_eq!(stack_size_from(None), Ok(DEFAULT_STACK_SIZE));
    assert_eq!(stack_size_from(Some("64K")), Ok(64 << 10));
    assert!(stack_size_from(Some("lots")).is_err());
}

#[test]
fn thread_ids_display_index_and_generation() {
    let id = ThreadId::new(3, 9);
    assert_eq!(id.to_string(), "#3.9");
    assert_eq!(format!("{id:?}"), "ThreadId(3.9)");
}

// ---- join handles and scopes ----

/// Runs `f` in a thread to its end; returns what it returned.
fn run_in_thread<T: 'static>(f: impl FnOnce() -> T + 'static) -> T {
    let out = Rc::new(RefCell::new(None));
    let theirs = out.clone();
    spawn("test main", move || *theirs.borrow_mut() = Some(f()));
    drain();
    let value = out.borrow_mut().take();
    value.expect("the test thread ended")
}

#[test]
fn join_gives_the_value_once_the_thread_ends() {
    let got = run_in_thread(|| {
        let child = super::spawn("child", || {
            yield_now();
            yield_now();
            42
        });
        assert!(!child.is_finished());
        child.join()
    });
    assert_eq!(got, Ok(42));
    assert!(take_panics().is_empty());
}

#[test]
fn join_gives_the_panic_which_then_ends_nothing() {
    let line = line!() + 3;
    let got = run_in_thread(|| {
        let child = super::spawn("failing child", || -> u32 {
            panic!("child gives up");
        });
        child.join()
    });
    let report = got.expect_err("the child panicked");
    assert_eq!(report.name, "failing child");
    assert_eq!(report.message, "child gives up");
    assert_eq!(report.location.map(|l| l.line), Some(line));
    assert!(take_panics().is_empty(), "a joined panic is not uncaught");
}

#[test]
fn a_dropped_handle_detaches_and_its_panic_is_uncaught() {
    // Dropped before the thread panics.
    drop(super::spawn("detached", || panic!("nobody joins")));
    // Dropped after.
    let kept = super::spawn("kept", || panic!("joined by nobody"));
    drain();
    drop(kept);
    let panics = take_panics();
    let messages: Vec<_> = panics.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(messages, ["nobody joins", "joined by nobody"]);
}

#[test]
fn scoped_threads_borrow_from_the_caller_and_are_all_joined() {
    let sums = run_in_thread(|| {
        let mut slots = vec![0_u64; 4];
        let total = Cell::new(0_u64);
        let returned = scope(|s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                let total = &total;
                s.spawn("scoped", move || {
                    for _ in 0..i {
                        yield_now();
                    }
                    *slot = i as u64 + 1;
                    total.set(total.get() + *slot);
                });
            }
            let joined = s.spawn("joined", || 7).join();
            assert_eq!(joined, Ok(7));
            "scope value"
        });
        assert_eq!(returned, "scope value");
        (slots, total.get())
    });
    assert_eq!(sums, (vec![1, 2, 3, 4], 10));
}

#[test]
fn a_scope_whose_closure_panics_still_waits_for_its_threads() {
    let (finished, message) = run_in_thread(|| {
        let finished = Cell::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scope(|s| {
                s.spawn("slow", || {
                    for _ in 0..5 {
                        yield_now();
                    }
                    finished.set(true);
                });
                panic!("scope body gives up");
            })
        }));
        let payload = caught.expect_err("the scope's closure panicked");
        let message = payload.downcast_ref::<&str>().map(|m| m.to_string());
        (finished.get(), message)
    });
    assert!(finished, "scope returned before its thread ended");
    assert_eq!(message.as_deref(), Some("scope body gives up"));
}

#[test]
fn an_unjoined_scoped_panic_makes_the_scope_panic_after_the_others_end() {
    let (others_done, message) = run_in_thread(|| {
        let done = Cell::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scope(|s| {
                s.spawn("bad", || panic!("scoped gives up"));
                s.spawn("good", || {
                    yield_now();
                    done.set(true);
                });
            })
        }));
        let payload = caught.expect_err("the scope panics");
        (done.get(), payload.downcast_ref::<String>().cloned())
    });
    assert!(others_done);
    let message = message.expect("a formatted message");
    assert!(message.contains("a scoped thread panicked"), "{message}");
    assert!(
        message.contains("'bad'") && message.contains("scoped gives up"),
        "{message}"
    );
    assert!(take_panics().is_empty(), "the scope reported it");
}

#[test]
fn unwind_all_unwinds_scoped_threads_before_their_owner() {
    struct Noted(Log, &'static str);
    impl Drop for Noted {
        fn drop(&mut self) {
            push(&self.0, self.1);
        }
    }
    let order = log();
    let theirs = order.clone();
    spawn("owner", move || {
        let owner_note = Noted(theirs.clone(), "owner");
        let borrowed = Cell::new(0_u32);
        scope(|s| {
            s.spawn("scoped", || {
                let _note = Noted(theirs.clone(), "scoped");
                borrowed.set(1);
                block(BlockReason::new("forever"));
            });
        });
        drop(owner_note);
    });
    drain();
    assert_eq!(blocked_threads().len(), 2);
    assert_eq!(unwind_all(), 2);
    assert_eq!(entries(&order), ["scoped", "owner"]);
}

#[test]
fn unwind_all_counts_out_a_scoped_thread_that_never_started() {
    spawn("owner", || {
        let borrowed = Cell::new(0_u32);
        scope(|s| {
            s.spawn("never started", || borrowed.set(1));
        });
        unreachable!("the owner is unwound in its scope");
    });
    // The owner runs, spawns, and blocks waiting for its scoped thread,
    // which is still only ready when the shut-down comes.
    assert_eq!(run_ready(1), 1);
    assert_eq!((blocked_threads().len(), ready_threads()), (1, 1));
    assert_eq!(unwind_all(), 2);
    assert_eq!(live_threads(), 0);
}

#[test]
#[should_panic(expected = "outside an mttl thread")]
fn scope_outside_a_thread_panics() {
    scope(|_| {});
}
