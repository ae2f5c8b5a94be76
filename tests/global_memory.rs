//! Global memory across a job, on every backend: read, write, `nwrite` and
//! fence on every node; slices below and above the eager limit; pointer
//! arithmetic; pointers kept in global memory; atomics under contention
//! from four nodes; member functions; every error a caller can meet;
//! remote accesses waiting for a local guard instead of aliasing it; many
//! `nwrite`s in flight; barriers making `nwrite`s visible; `nwrite_owned`.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::any::Any;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use mttl::{GlobalArray, GlobalError, GlobalErrorKind, GlobalObject, GlobalPtr, Zeroable};
use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    read_write_nwrite_fence_on_every_node,
    slices_below_and_above_the_eager_limit,
    pointer_arithmetic,
    pointers_to_pointers,
    atomics_from_four_nodes_count_exactly,
    member_functions_run_at_the_owner,
    errors_reach_the_caller,
    remote_accesses_wait_for_local_guards,
    owner_threads_wait_for_member_functions,
    many_nwrites_in_flight_then_fence,
    barrier_makes_nwrites_visible,
    the_job_ends_while_large_nwrites_are_in_flight,
    large_nwrite_loops_both_ways_keep_memory_bounded,
    owned_nwrites_land_and_are_released_at_the_fence,
    the_job_ends_while_owned_nwrites_are_in_flight,
);

// ---- Memory each node keeps between calls, by region ----

thread_local! {
    static KEPT: RefCell<HashMap<u32, Rc<dyn Any>>> = RefCell::new(HashMap::new());
}

fn keep<T: 'static>(region: u32, handle: T) {
    KEPT.with(|k| k.borrow_mut().insert(region, Rc::new(handle)));
}

fn kept<T: 'static>(region: u32) -> Rc<T> {
    let any = KEPT
        .with(|k| k.borrow().get(&region).cloned())
        .unwrap_or_else(|| panic!("rank {} keeps no region {region:#x}", mttl::rank()));
    any.downcast::<T>()
        .unwrap_or_else(|_| panic!("region {region:#x} holds another type"))
}

/// `n` zeroed `u64`s on this node, kept until `free_kept`.
#[mttl::remote]
fn alloc_u64(n: usize) -> GlobalPtr<u64> {
    let a = GlobalArray::<u64>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

/// Drops what this node keeps for `region` (which unregisters it).
#[mttl::remote]
fn free_kept(region: u32) {
    KEPT.with(|k| k.borrow_mut().remove(&region));
}

/// The owner's own view of a kept array, through its handle.
#[mttl::remote]
fn local_view(p: GlobalPtr<u64>) -> Vec<u64> {
    kept::<GlobalArray<u64>>(p.region()).to_vec()
}

/// A wrapping sum of a kept array, as its owner sees it.
#[mttl::remote]
fn local_sum(p: GlobalPtr<u64>) -> u64 {
    let a = kept::<GlobalArray<u64>>(p.region());
    let sum = a.borrow().iter().fold(0u64, |s, &x| s.wrapping_add(x));
    sum
}

fn expect_kind(e: &GlobalError, what: &str, ok: impl Fn(&GlobalErrorKind) -> bool) {
    assert!(ok(&e.kind), "{what}: unexpected error {e}");
}

// ---- read, write, nwrite, fence ----

#[mttl::remote]
fn alloc_object(v: u32) -> GlobalPtr<u32> {
    let o = GlobalObject::new(v);
    let p = o.global_ptr();
    keep(p.region(), o);
    p
}

#[mttl::remote]
fn object_value(p: GlobalPtr<u32>) -> u32 {
    kept::<GlobalObject<u32>>(p.region()).get()
}

fn read_write_nwrite_fence_on_every_node(t: Scenario) {
    t.run(4, || {
        for node in 0..mttl::size() {
            let p = mttl::invoke(node, alloc_u64, (16usize,));
            assert_eq!(p.node(), node);
            assert_eq!(p.read(), 0);
            p.write(7);
            assert_eq!(p.read(), 7);
            assert_eq!(p.add(15).try_read(), Ok(0));
            for i in 1..16 {
                p.add(i).nwrite(100 * node as u64 + i as u64);
            }
            mttl::fence();
            let expected: Vec<u64> = std::iter::once(7)
                .chain((1..16).map(|i| 100 * node as u64 + i))
                .collect();
            assert_eq!(p.read_vec(16), expected, "read back from node {node}");
            assert_eq!(
                mttl::invoke(node, local_view, (p,)),
                expected,
                "the owner's own view on node {node}"
            );
            mttl::invoke(node, free_kept, (p.region(),));

            let o = mttl::invoke(node, alloc_object, (5u32,));
            assert_eq!(o.read(), 5);
            o.nwrite(6);
            mttl::fence();
            assert_eq!(mttl::invoke(node, object_value, (o,)), 6);
            o.write(9);
            assert_eq!(mttl::invoke(node, object_value, (o,)), 9);
        }
        // A fence with nothing outstanding returns at once.
        mttl::fence();
        assert_eq!(mttl::try_fence(), Ok(()));
        println!("read, write, nwrite and fence work on every node");
    })
    .assert_success();
}

// ---- slices ----

fn slices_below_and_above_the_eager_limit(t: Scenario) {
    t.run(2, || {
        const N: usize = 1 << 19; // 4 MiB of u64
        for node in [1, 0] {
            let p = mttl::invoke(node, alloc_u64, (N,));
            // 8192 u64 are the 64 KiB eager limit exactly.
            for len in [0usize, 1, 1000, 8191, 8192, 8193, 100_000, N] {
                let at = (N - len) / 3;
                let data: Vec<u64> = (0..len as u64).map(|i| i * 31 + len as u64).collect();
                p.add(at).write_slice(&data);
                assert_eq!(
                    p.add(at).read_vec(len),
                    data,
                    "{len} elements on node {node}"
                );
                let flipped: Vec<u64> = data.iter().map(|x| !x).collect();
                p.add(at).nwrite_slice(&flipped);
                mttl::fence();
                let mut back = vec![0u64; len];
                p.add(at).read_slice(&mut back);
                assert!(
                    back == flipped,
                    "{len} elements after nwrite on node {node}"
                );
            }
            // The last write covered the whole array: the owner agrees.
            let sum = (0..N as u64).fold(0u64, |s, i| s.wrapping_add(!(i * 31 + N as u64)));
            assert_eq!(mttl::invoke(node, local_sum, (p,)), sum);
            // A large write running past the end is refused whole: not one
            // byte of it lands, though the region has room for its start.
            let tail = p.add(N - 5000);
            let e = tail.try_write_slice(&vec![7u64; 10_000]).unwrap_err();
            assert_eq!(
                e.kind,
                mttl::GlobalErrorKind::OutOfBounds {
                    region_len: 8 * N as u64
                },
                "{e}"
            );
            // An nwrite's error comes at once on the own node, else from
            // the next fence.
            let nwrite = tail.try_nwrite_slice(&vec![7u64; 10_000]);
            assert!(
                nwrite.is_err() || mttl::try_fence().is_err(),
                "the nwrite past the end fails"
            );
            assert_eq!(
                mttl::invoke(node, local_sum, (p,)),
                sum,
                "the region is intact"
            );
            // Reads of slices from several threads at once.
            let parts: Vec<_> = (0..4)
                .map(|k| mttl::ainvoke(0, read_part, (p.add(k * (N / 4)), N / 4)))
                .collect();
            let total = parts
                .into_iter()
                .map(mttl::Pending::wait)
                .fold(0u64, u64::wrapping_add);
            assert_eq!(total, sum);
            mttl::invoke(node, free_kept, (p.region(),));
        }
        println!("slices cross intact below and above the eager limit");
    })
    .assert_success();
}

#[mttl::remote]
fn read_part(p: GlobalPtr<u64>, n: usize) -> u64 {
    p.read_vec(n).iter().fold(0u64, |s, &x| s.wrapping_add(x))
}

// ---- pointer arithmetic ----

/// Reads element `i` of `p`, from wherever it runs.
#[mttl::remote]
fn read_at(p: GlobalPtr<u64>, i: usize) -> u64 {
    p.add(i).read()
}

fn pointer_arithmetic(t: Scenario) {
    t.run(3, || {
        let p = mttl::invoke(1, alloc_u64, (10usize,));
        p.write_slice(&(0..10).collect::<Vec<u64>>());
        assert_eq!(p.add(5).read(), 5);
        assert_eq!(p.add(7).sub(2).read(), 5);
        assert_eq!(p.add(9).offset(-4).read(), 5);
        assert_eq!(p.add(5).offset_from(p), Some(5));
        assert_eq!(p.offset_from(p.add(5)), Some(-5));
        assert_eq!(p.add(5).byte_offset(), 40);
        let end = p.add(10);
        let e = end.try_read().unwrap_err();
        expect_kind(&e, "one past the end", |k| {
            *k == GlobalErrorKind::OutOfBounds { region_len: 80 }
        });
        assert_eq!(end.sub(1).read(), 9);
        assert_eq!(p.add(3).read_vec(4), vec![3, 4, 5, 6]);
        let distinct: HashSet<GlobalPtr<u64>> = (0..10).map(|i| p.add(i)).collect();
        assert_eq!(distinct.len(), 10);
        // The same arithmetic at the owner and at a third node.
        for node in 0..3 {
            assert_eq!(
                mttl::invoke(node, read_at, (p.add(2), 6usize)),
                8,
                "on {node}"
            );
        }
        println!("pointer arithmetic works");
    })
    .assert_success();
}

// ---- pointers to pointers ----

#[mttl::remote]
fn alloc_ptr_table(n: usize) -> GlobalPtr<GlobalPtr<u64>> {
    let a = GlobalArray::<GlobalPtr<u64>>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

/// Follows every pointer of a table and reads element `i` behind it.
#[mttl::remote]
fn follow(table: GlobalPtr<GlobalPtr<u64>>, n: usize, i: usize) -> Vec<u64> {
    table
        .read_vec(n)
        .into_iter()
        .map(|p| p.add(i).read())
        .collect()
}

fn pointers_to_pointers(t: Scenario) {
    t.run(4, || {
        let data: Vec<GlobalPtr<u64>> = (1..4)
            .map(|n| mttl::invoke(n, alloc_u64, (4usize,)))
            .collect();
        for (k, p) in data.iter().enumerate() {
            let k = k as u64;
            p.write_slice(&[k * 10, k * 10 + 1, k * 10 + 2, k * 10 + 3]);
        }
        let table = mttl::invoke(1, alloc_ptr_table, (3usize,));
        table.write_slice(&data);
        for (k, &expected) in data.iter().enumerate() {
            let q: GlobalPtr<u64> = table.add(k).read();
            assert_eq!(q, expected);
            assert_eq!(q.add(1).read(), k as u64 * 10 + 1);
            q.add(2).write(900 + k as u64);
        }
        // Another node follows the table by itself.
        assert_eq!(
            mttl::invoke(2, follow, (table, 3usize, 2usize)),
            vec![900, 901, 902]
        );
        // Pointers stored with nwrite, then a null among them.
        table.add(0).nwrite(data[2]);
        table.add(1).nwrite(GlobalPtr::null());
        mttl::fence();
        assert_eq!(table.read(), data[2]);
        assert!(table.add(1).read().is_null());
        let e = table.add(1).read().try_read().unwrap_err();
        expect_kind(&e, "through null", |k| *k == GlobalErrorKind::Null);
        println!("pointers to pointers work");
    })
    .assert_success();
}

// ---- atomics ----

/// `threads` threads on this node, each running `hammer_thread`.
#[mttl::remote]
fn hammer(c: GlobalPtr<u64>, threads: usize, n: u64) -> u64 {
    let calls: Vec<_> = (0..threads)
        .map(|_| mttl::ainvoke(mttl::rank(), hammer_thread, (c, n)))
        .collect();
    calls
        .into_iter()
        .map(mttl::Pending::wait)
        .fold(0, u64::wrapping_add)
}

/// `n` rounds of: fetch_add on `c[0]`, a compare-exchange increment of
/// `c[1]`, fetch_max on `c[2]`, fetch_min on `c[3]`. Returns the sum of
/// the values fetch_add saw.
#[mttl::remote]
fn hammer_thread(c: GlobalPtr<u64>, n: u64) -> u64 {
    let me = mttl::rank() as u64;
    let mut seen = 0u64;
    for i in 0..n {
        seen = seen.wrapping_add(c.fetch_add(1));
        let cas = c.add(1);
        let mut current = cas.read();
        while let Err(actual) = cas.compare_exchange(current, current + 1) {
            current = actual;
        }
        c.add(2).fetch_max(me * 1000 + i);
        c.add(3).fetch_min(me * 1000 + i);
    }
    seen
}

fn atomics_from_four_nodes_count_exactly(t: Scenario) {
    t.run(4, || {
        const THREADS: usize = 4;
        const N: u64 = 150;
        let c = mttl::invoke(1, alloc_u64, (4usize,));
        c.add(3).write(u64::MAX);
        let seen = mttl::spmd(hammer, (c, THREADS, N));
        let total = 4 * THREADS as u64 * N;
        assert_eq!(c.read_vec(4), vec![total, total, 3 * 1000 + N - 1, 0]);
        // Each value 0..total was handed out exactly once.
        let sum = seen.into_iter().fold(0u64, u64::wrapping_add);
        assert_eq!(sum, total * (total - 1) / 2);

        // The other operations and types, remote (node 2) and local.
        for node in [2, 0] {
            let s = mttl::invoke(node, alloc_i64, (2usize,));
            assert_eq!(s.fetch_sub(5), 0);
            assert_eq!(s.read(), -5);
            assert_eq!(s.swap(12), -5);
            assert_eq!(s.fetch_and(0b1010), 12);
            assert_eq!(s.fetch_or(0b0101), 0b1000);
            assert_eq!(s.fetch_xor(0b1111), 0b1101);
            assert_eq!(s.read(), 0b0010);
            assert_eq!(s.fetch_min(-7), 2);
            assert_eq!(s.fetch_max(-9), -7);
            assert_eq!(s.compare_exchange(-7, 1), Ok(-7));
            assert_eq!(s.compare_exchange(-7, 2), Err(1));
            let w = s.add(1).cast::<u32>();
            let e = w.try_fetch_add(1).unwrap_err();
            expect_kind(&e, "u32 atomic on i64", |k| {
                *k == GlobalErrorKind::WrongType {
                    region_elem: 8,
                    ptr_elem: 4,
                }
            });
        }
        let u = mttl::invoke(3, alloc_u32, (1usize,));
        u.write(u32::MAX);
        assert_eq!(u.fetch_add(2), u32::MAX);
        assert_eq!(u.read(), 1, "fetch_add wraps");
        println!("{total} increments from 4 nodes counted exactly");
    })
    .assert_success();
}

#[mttl::remote]
fn alloc_i64(n: usize) -> GlobalPtr<i64> {
    let a = GlobalArray::<i64>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

#[mttl::remote]
fn alloc_u32(n: usize) -> GlobalPtr<u32> {
    let a = GlobalArray::<u32>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

// ---- member functions ----

#[derive(Clone, Copy, Debug, PartialEq, Eq, mttl::Pod, mttl::Zeroable)]
#[bytemuck(crate = "mttl::bytemuck")]
#[repr(C)]
struct Counter {
    hits: u64,
    total: u64,
}

#[mttl::remote]
fn bump(c: &mut Counter, by: u64) -> u64 {
    c.hits += 1;
    c.total += by;
    c.total
}

#[mttl::remote]
fn where_am_i(c: &mut Counter) -> usize {
    c.hits += 100;
    mttl::rank()
}

#[mttl::remote]
fn explode(c: &mut Counter, why: String) -> u64 {
    panic!("counter with {} hits exploded: {why}", c.hits)
}

#[mttl::remote]
fn alloc_counter() -> GlobalPtr<Counter> {
    let o = GlobalObject::new(Counter::zeroed());
    let p = o.global_ptr();
    keep(p.region(), o);
    p
}

#[mttl::remote]
fn alloc_counters(n: usize) -> GlobalPtr<Counter> {
    let a = GlobalArray::<Counter>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

#[mttl::remote]
fn bump_many(p: GlobalPtr<Counter>, n: u64) {
    for _ in 0..n {
        p.invoke(bump, (1u64,));
    }
}

fn member_functions_run_at_the_owner(t: Scenario) {
    t.run(3, || {
        // On a remote object.
        let p = mttl::invoke(2, alloc_counter, ());
        assert_eq!(p.invoke(bump, (5u64,)), 5);
        assert_eq!(p.invoke(bump, (7u64,)), 12);
        assert_eq!(p.read(), Counter { hits: 2, total: 12 });
        assert_eq!(p.invoke(where_am_i, ()), 2);

        // A panic comes back as an error; the object stays usable.
        let e = p.try_invoke(explode, ("boom".to_owned(),)).unwrap_err();
        match &e.kind {
            GlobalErrorKind::Panicked(m) => {
                assert!(
                    m.contains("explode") && m.contains("102 hits exploded: boom"),
                    "{m}"
                )
            }
            _ => panic!("expected a panic, got {e}"),
        }
        assert_eq!(p.invoke(bump, (1u64,)), 13);

        // On this node's own object, and there a local guard is a conflict.
        let own = GlobalObject::new(Counter::zeroed());
        let q = own.global_ptr();
        assert_eq!(q.invoke(bump, (3u64,)), 3);
        assert_eq!(q.invoke(where_am_i, ()), 0);
        assert_eq!(
            own.get(),
            Counter {
                hits: 101,
                total: 3
            }
        );
        {
            let _g = own.borrow();
            let e = q.try_invoke(bump, (1u64,)).unwrap_err();
            expect_kind(&e, "local call under a guard", |k| {
                *k == GlobalErrorKind::Borrowed
            });
        }

        // On an element of a remote array.
        let arr = mttl::invoke(1, alloc_counters, (4usize,));
        assert_eq!(arr.add(2).invoke(bump, (9u64,)), 9);
        assert_eq!(arr.add(2).read(), Counter { hits: 1, total: 9 });
        assert_eq!(arr.add(1).read(), Counter::zeroed());

        // From every node at once.
        mttl::spmd(bump_many, (p, 40u64));
        assert_eq!(
            p.read(),
            Counter {
                hits: 103 + 120,
                total: 13 + 120
            }
        );

        // Once freed, the object is gone.
        mttl::invoke(2, free_kept, (p.region(),));
        let e = p.try_invoke(bump, (1u64,)).unwrap_err();
        expect_kind(&e, "freed object", |k| *k == GlobalErrorKind::Freed);
        assert!(e.to_string().contains("on rank 2"), "{e}");
        println!("member functions run at the owner");
    })
    .assert_success();
}

// ---- errors ----

fn errors_reach_the_caller(t: Scenario) {
    t.run(3, || {
        // Remote (node 1) and local (node 0) memory give the same errors.
        for node in [1, 0] {
            let p = mttl::invoke(node, alloc_u64, (4usize,));

            let bogus = GlobalPtr::<u64>::from_parts(node, p.region() + (5 << 20), 0);
            let e = bogus.try_read().unwrap_err();
            expect_kind(&e, "unknown region", |k| {
                *k == GlobalErrorKind::UnknownRegion
            });
            assert_eq!(
                (e.rank, e.region, e.offset, e.len, e.op),
                (node, bogus.region(), 0, 8, "read")
            );

            let q = mttl::invoke(node, alloc_u64, (2usize,));
            mttl::invoke(node, free_kept, (q.region(),));
            expect_kind(&q.try_read().unwrap_err(), "freed read", |k| {
                *k == GlobalErrorKind::Freed
            });
            expect_kind(&q.try_write(1).unwrap_err(), "freed write", |k| {
                *k == GlobalErrorKind::Freed
            });
            expect_kind(&q.try_fetch_add(1).unwrap_err(), "freed atomic", |k| {
                *k == GlobalErrorKind::Freed
            });

            let oob = |k: &GlobalErrorKind| *k == GlobalErrorKind::OutOfBounds { region_len: 32 };
            let e = p.add(4).try_read().unwrap_err();
            expect_kind(&e, "past the end", oob);
            assert_eq!((e.offset, e.len), (32, 8));
            expect_kind(
                &p.add(3).try_read_slice(&mut [0; 2]).unwrap_err(),
                "slice past the end",
                oob,
            );
            expect_kind(
                &p.add(2).try_write_slice(&[1, 2, 3]).unwrap_err(),
                "write past the end",
                oob,
            );
            let e = p.sub(1).try_read().unwrap_err();
            expect_kind(&e, "before the start", oob);
            assert_eq!(
                e.offset,
                u64::MAX - 7,
                "the caller's own offset is reported"
            );

            let e = p.cast::<u32>().try_read().unwrap_err();
            expect_kind(&e, "u32 through a u64 region", |k| {
                *k == GlobalErrorKind::WrongType {
                    region_elem: 8,
                    ptr_elem: 4,
                }
            });
            let e = p.cast::<[u64; 2]>().try_read().unwrap_err();
            expect_kind(&e, "16-byte elements", |k| {
                *k == GlobalErrorKind::WrongType {
                    region_elem: 8,
                    ptr_elem: 16,
                }
            });
            let e = p.cast::<u8>().add(4).cast::<u64>().try_read().unwrap_err();
            expect_kind(&e, "misaligned", |k| {
                *k == GlobalErrorKind::Misaligned { elem: 8 }
            });

            // The region itself is unharmed by all that.
            p.write_slice(&[1, 2, 3, 4]);
            assert_eq!(p.read_vec(4), vec![1, 2, 3, 4]);
            mttl::invoke(node, free_kept, (p.region(),));
        }

        let p = mttl::invoke(1, alloc_u64, (4usize,));
        let nowhere = GlobalPtr::<u64>::from_parts(7, p.region(), 0);
        let e = nowhere.try_read().unwrap_err();
        expect_kind(&e, "rank 7 of 3", |k| {
            *k == GlobalErrorKind::NoSuchRank { size: 3 }
        });
        assert!(e.to_string().contains("rank 7"), "{e}");
        expect_kind(
            &nowhere.try_nwrite(1).unwrap_err(),
            "nwrite to rank 7",
            |k| *k == GlobalErrorKind::NoSuchRank { size: 3 },
        );
        let e = GlobalPtr::<u64>::null().try_write(1).unwrap_err();
        expect_kind(&e, "null", |k| *k == GlobalErrorKind::Null);

        // A bad nwrite is reported by the next fence, then forgotten.
        p.add(1).nwrite(11);
        assert_eq!(p.add(10).try_nwrite(1), Ok(()));
        p.add(2).nwrite(12);
        let e = mttl::try_fence().unwrap_err();
        expect_kind(&e, "nwrite past the end", |k| {
            *k == GlobalErrorKind::OutOfBounds { region_len: 32 }
        });
        assert_eq!(
            (e.rank, e.region, e.offset, e.len, e.op),
            (1, p.region(), 80, 8, "nwrite")
        );
        assert_eq!(
            p.read_vec(3),
            vec![0, 11, 12],
            "the good nwrites around it were applied"
        );
        assert_eq!(mttl::try_fence(), Ok(()));

        // The plain variants panic with the same error.
        let panic = mttl::thread::catch_panic(|| p.add(4).read()).unwrap_err();
        assert!(
            panic.message.contains("read of 8 bytes at byte offset 32")
                && panic.message.contains("out of bounds"),
            "{}",
            panic.message
        );
        let at = panic.location.expect("the panic's location");
        assert!(
            at.file.ends_with("global_memory.rs"),
            "panicked at {at}, not at the caller"
        );
        println!("every error reached the caller");
    })
    .assert_success();
}

// ---- deferral under a local guard ----

#[mttl::remote]
fn poke_nwrite(p: GlobalPtr<u64>, v: u64) {
    p.nwrite(v);
}

#[mttl::remote]
fn poke_write(p: GlobalPtr<u64>, v: u64) {
    p.write(v);
}

#[mttl::remote]
fn peek(p: GlobalPtr<u64>) -> u64 {
    p.read()
}

#[mttl::remote]
fn call_bump(p: GlobalPtr<Counter>, by: u64) -> u64 {
    p.invoke(bump, (by,))
}

#[mttl::remote]
fn ping() {}

#[mttl::remote]
fn poke_nwrite_fence(p: GlobalPtr<u64>, v: u64) {
    p.nwrite(v);
    mttl::fence();
}

/// Runs on node 1 and asks node 0 to access node 1's memory while node 1
/// holds guards on it across blocking calls.
#[mttl::remote]
fn guarded_owner() {
    let arr = GlobalArray::<u64>::from_vec(vec![1, 2, 3, 4]);
    let p = arr.ptr(0);

    // A shared guard held across blocking calls: remote writes wait.
    let g = arr.borrow();
    mttl::invoke(0, poke_nwrite, (p, 42u64));
    // Node 0 sent the write before answering (per-pair order), so it has
    // arrived here, and was deferred.
    let blocked = mttl::ainvoke(0, poke_write, (p.add(1), 43u64));
    mttl::invoke(0, ping, ());
    assert!(
        !blocked.is_ready(),
        "a blocking write returned under a guard"
    );
    assert_eq!(&g[..], &[1, 2, 3, 4], "the guard saw a remote write");
    // Local accesses through a pointer never wait: they fail.
    let e = p.try_write(5).unwrap_err();
    assert_eq!(e.kind, GlobalErrorKind::Borrowed, "{e}");
    assert_eq!(
        p.add(3).try_read(),
        Ok(4),
        "a local read beside a shared guard"
    );
    drop(g);
    // Dropping the guard applied both, in order, before anything else ran.
    assert_eq!(arr.to_vec(), vec![42, 43, 3, 4]);
    blocked.wait();

    // An exclusive guard: remote reads wait too, and see the final value.
    let mut w = arr.borrow_mut();
    w[3] = 99;
    let read = mttl::ainvoke(0, peek, (p.add(3),));
    mttl::invoke(0, ping, ());
    assert!(
        !read.is_ready(),
        "a remote read returned under an exclusive guard"
    );
    w[3] = 100;
    drop(w);
    assert_eq!(read.wait(), 100);

    // A fence waits for the deferred nwrites it covers.
    let g = arr.borrow();
    let fenced = mttl::ainvoke(0, poke_nwrite_fence, (p.add(2), 44u64));
    mttl::invoke(0, ping, ());
    assert!(
        !fenced.is_ready(),
        "a fence returned before its nwrite was applied"
    );
    drop(g);
    fenced.wait();
    assert_eq!(arr.get(2), 44);

    // A member function waits for the guard as well.
    let obj = GlobalObject::new(Counter::zeroed());
    let g = obj.borrow();
    let call = mttl::ainvoke(0, call_bump, (obj.global_ptr(), 4u64));
    mttl::invoke(0, ping, ());
    assert!(!call.is_ready(), "a member function ran under a guard");
    assert_eq!(*g, Counter::zeroed());
    drop(g);
    assert_eq!(call.wait(), 4);
    assert_eq!(obj.get(), Counter { hits: 1, total: 4 });
}

fn remote_accesses_wait_for_local_guards(t: Scenario) {
    t.run(2, || {
        mttl::invoke(1, guarded_owner, ());
        mttl::fence();
        println!("remote accesses waited for local guards");
    })
    .assert_success();
}

// ---- the owner's threads and member functions ----

/// A member function that blocks while it holds its object, and meanwhile
/// tries to reach the object through a pointer (which must fail, not wait
/// for itself).
#[mttl::remote]
fn slow_bump(c: &mut Counter, itself: GlobalPtr<Counter>) -> u64 {
    c.hits += 1;
    let e = itself.try_read().unwrap_err();
    assert_eq!(e.kind, GlobalErrorKind::Borrowed, "{e}");
    mttl::invoke(0, ping, ());
    c.total += 7;
    c.total
}

#[mttl::remote]
fn call_slow_bump(p: GlobalPtr<Counter>) -> u64 {
    p.invoke(slow_bump, (p,))
}

/// Runs on node 1: node 0 invokes `slow_bump` on an object of node 1,
/// whose own threads then wait for it instead of failing.
#[mttl::remote]
fn owner_waits() {
    let obj = GlobalObject::new(Counter::zeroed());
    let p = obj.global_ptr();
    let call = mttl::ainvoke(0, call_slow_bump, (p,));
    // Until the member function holds the object, it can be borrowed.
    while obj.try_borrow().is_ok() {
        mttl::yield_now();
    }
    assert!(obj.try_borrow_mut().is_err());
    // These wait for the member function, then see all it did.
    let after = Counter { hits: 1, total: 7 };
    assert_eq!(obj.get(), after);
    assert_eq!(p.read(), after);
    assert_eq!(call.wait(), 7);
    // And a local member function call waits the same way.
    let second = mttl::ainvoke(0, call_slow_bump, (p,));
    while obj.try_borrow().is_ok() {
        mttl::yield_now();
    }
    assert_eq!(p.invoke(bump, (1u64,)), 15);
    assert_eq!(second.wait(), 14);
    assert_eq!(obj.get(), Counter { hits: 3, total: 15 });
}

fn owner_threads_wait_for_member_functions(t: Scenario) {
    t.run(2, || {
        mttl::invoke(1, owner_waits, ());
        println!("the owner's threads waited for member functions");
    })
    .assert_success();
}

// ---- many nwrites ----

/// The value node `src` writes at index `i` of node `dst`.
fn stamp(src: usize, dst: usize, i: usize) -> u64 {
    (src as u64) << 40 | (dst as u64) << 32 | i as u64
}

/// Small `nwrite`s of `n` values and one large slice to every node
/// (itself included), then a fence.
#[mttl::remote]
fn blast(ptrs: Vec<GlobalPtr<u64>>, n: usize, big: usize) {
    let (me, size) = (mttl::rank(), mttl::size());
    for i in 0..n {
        for (dst, p) in ptrs.iter().enumerate() {
            p.add(me * n + i).nwrite(stamp(me, dst, i));
        }
        if i == n / 2 {
            for (dst, p) in ptrs.iter().enumerate() {
                let slice: Vec<u64> = (0..big).map(|j| stamp(me, dst, n + j)).collect();
                p.add(size * n + me * big).nwrite_slice(&slice);
            }
        }
    }
    mttl::fence();
}

#[mttl::remote]
fn check_blast(p: GlobalPtr<u64>, n: usize, big: usize) -> usize {
    let (me, size) = (mttl::rank(), mttl::size());
    let a = kept::<GlobalArray<u64>>(p.region());
    let a = a.borrow();
    let mut wrong = 0;
    for src in 0..size {
        for i in 0..n {
            wrong += usize::from(a[src * n + i] != stamp(src, me, i));
        }
        for j in 0..big {
            wrong += usize::from(a[size * n + src * big + j] != stamp(src, me, n + j));
        }
    }
    wrong
}

fn many_nwrites_in_flight_then_fence(t: Scenario) {
    t.run(4, || {
        const N: usize = 3000;
        const BIG: usize = 20_000; // 160 KB, above the eager limit
        let size = mttl::size();
        let ptrs = mttl::spmd(alloc_u64, (size * (N + BIG),));
        mttl::spmd(blast, (ptrs.clone(), N, BIG));
        // Every node's fence returned before spmd did: all is applied.
        for (node, &p) in ptrs.iter().enumerate() {
            assert_eq!(
                mttl::invoke(node, check_blast, (p, N, BIG)),
                0,
                "node {node}"
            );
        }
        println!(
            "{} nwrites in flight, all applied at the fence",
            size * size * (N + 1)
        );
    })
    .assert_success();
}

// ---- barrier ----

/// Rounds of: write this node's slot on every node, barrier, check that
/// every node's write of this round is here, barrier.
#[mttl::remote]
fn rounds_with_barriers(ptrs: Vec<GlobalPtr<u64>>, rounds: u64) {
    let me = mttl::rank();
    let own = kept::<GlobalArray<u64>>(ptrs[me].region());
    for round in 1..=rounds {
        for p in &ptrs {
            p.add(me).nwrite(round * 100 + me as u64);
        }
        mttl::barrier();
        let expected: Vec<u64> = (0..ptrs.len()).map(|r| round * 100 + r as u64).collect();
        assert_eq!(own.to_vec(), expected, "round {round} on rank {me}");
        mttl::barrier();
    }
}

fn barrier_makes_nwrites_visible(t: Scenario) {
    t.run(4, || {
        let ptrs = mttl::spmd(alloc_u64, (mttl::size(),));
        mttl::spmd(rounds_with_barriers, (ptrs, 20u64));
        println!("every barrier made the nwrites before it visible");
    })
    .assert_success();
}

// ---- large writes both ways ----

/// The bytes of one block of `large_nwrite_loops_both_ways_keep_memory_bounded`.
const FLOOD_BLOCK: usize = 1 << 20;
/// Blocks each node writes: a backlog of them all would be 300 MiB.
const FLOOD_BLOCKS: usize = 300;

/// This process's peak resident memory in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Every node writes [`FLOOD_BLOCKS`] blocks of 1 MiB into the next node's
/// array, in a loop that never yields, then checks what the previous node
/// wrote; returns how far its peak resident memory grew meanwhile, in MiB.
#[mttl::remote]
fn flood_next(ptrs: Vec<GlobalPtr<u8>>) -> u64 {
    let before = peak_rss_mib().unwrap_or(0);
    let (me, size) = (mttl::rank(), mttl::size());
    let own = kept::<GlobalArray<u8>>(ptrs[me].region());
    let next = ptrs[(me + 1) % size];
    let mut block = vec![0u8; FLOOD_BLOCK];
    for i in 0..FLOOD_BLOCKS {
        block.fill((me * 7 + i) as u8);
        next.nwrite_slice(&block);
    }
    mttl::barrier();
    let from = (me + size - 1) % size;
    let want = (from * 7 + FLOOD_BLOCKS - 1) as u8;
    assert!(
        own.borrow().iter().all(|&b| b == want),
        "rank {me}: the last block from rank {from} did not land"
    );
    mttl::barrier();
    peak_rss_mib().unwrap_or(0).saturating_sub(before)
}

#[mttl::remote]
fn alloc_u8(n: usize) -> GlobalPtr<u8> {
    let a = GlobalArray::<u8>::new(n);
    let p = a.global_ptr();
    keep(p.region(), a);
    p
}

/// Nodes write large blocks to each other from threads that never yield:
/// each takes what arrives while its own writes leave, so none waits for
/// ever, and what it took is placed as it goes, not piled up (300 MiB
/// each, had every block waited until the writing thread stopped).
///
/// How many bodies arrive while a send blocks depends on how long the next
/// node takes to read, which a loaded machine stretches several-fold: the
/// bound only tells the two designs apart, at two thirds of the backlog.
fn large_nwrite_loops_both_ways_keep_memory_bounded(t: Scenario) {
    t.run(3, || {
        let ptrs = mttl::spmd(alloc_u8, (FLOOD_BLOCK,));
        let growth = mttl::spmd(flood_next, (ptrs,));
        println!("peak resident memory growth per rank, MiB: {growth:?}");
        let bound = (FLOOD_BLOCKS * FLOOD_BLOCK * 2 / 3) >> 20;
        for (rank, &grew) in growth.iter().enumerate() {
            assert!(
                (grew as usize) < bound,
                "rank {rank}'s peak memory grew by {grew} MiB (bound {bound} MiB)"
            );
        }
    })
    .assert_success();
}

// ---- the end of a job ----

/// Starts a thread on this node that `nwrite`s 8 MiB blocks to `target`
/// for ever, from a buffer on its own stack frame.
#[mttl::remote]
fn write_for_ever(target: GlobalPtr<u8>) {
    mttl::thread::spawn("writer", move || {
        let block = vec![0x5au8; 8 << 20];
        loop {
            target.nwrite_slice(&block);
            // A cooperative thread that never blocks or yields starves its
            // rank's loop, which must see the end of the job. (On MPI a
            // large nwrite yields while it leaves anyway.)
            mttl::thread::yield_now();
        }
    });
}

/// Node 0 ends the job while node 1's thread is in the middle of large
/// `nwrite`s to it (on MPI they leave from the thread's buffer while the
/// thread yields): the job ends cleanly, with main's code, and the buffer
/// is released only after its send (nothing reads freed memory, nothing
/// waits for ever).
fn the_job_ends_while_large_nwrites_are_in_flight(t: Scenario) {
    t.run(2, || {
        let landing = GlobalArray::<u8>::new(8 << 20);
        mttl::invoke(1, write_for_ever, (landing.global_ptr(),));
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(300) {
            mttl::thread::yield_now();
        }
        println!("main returns while rank 1 writes");
    })
    .assert_success();
}

// ---- nwrite_owned ----

/// Elements `range` of a shared buffer, as `nwrite_owned` takes them.
struct Part(Arc<[u64]>, std::ops::Range<usize>);

impl AsRef<[u64]> for Part {
    fn as_ref(&self) -> &[u64] {
        &self.0[self.1.clone()]
    }
}

/// Where `owned_blast` puts what `src` writes: `rounds` chunks of `chunk`
/// values, one large vector of `big`, and four values from an array, per
/// source node.
fn owned_layout(src: usize, chunk: usize, rounds: usize, big: usize) -> (usize, usize, usize) {
    let per_src = rounds * chunk + big + 4;
    let base = src * per_src;
    (base, base + rounds * chunk, base + rounds * chunk + big)
}

/// `rounds` owned writes of `chunk` values to every node (itself included)
/// from one shared buffer per node, more than `MAX_OWNED_SENDS` in flight;
/// then one large `Vec` and one inline array each; then a fence. Returns
/// how many holders each shared buffer still has (1: only this function).
#[mttl::remote]
fn owned_blast(ptrs: Vec<GlobalPtr<u64>>, chunk: usize, rounds: usize, big: usize) -> Vec<usize> {
    let me = mttl::rank();
    let shared: Vec<Arc<[u64]>> = (0..ptrs.len())
        .map(|dst| (0..rounds * chunk).map(|k| stamp(me, dst, k)).collect())
        .collect();
    let (chunks, large, tail) = owned_layout(me, chunk, rounds, big);
    for round in 0..rounds {
        for (dst, p) in ptrs.iter().enumerate() {
            let range = round * chunk..(round + 1) * chunk;
            p.add(chunks + range.start)
                .nwrite_owned(Part(Arc::clone(&shared[dst]), range));
        }
    }
    for (dst, p) in ptrs.iter().enumerate() {
        let n = rounds * chunk;
        let v: Vec<u64> = (0..big).map(|k| stamp(me, dst, n + k)).collect();
        p.add(large).nwrite_owned(v);
        let n = n + big;
        p.add(tail)
            .nwrite_owned([0, 1, 2, 3].map(|k| stamp(me, dst, n + k)));
    }
    mttl::fence();
    shared.iter().map(Arc::strong_count).collect()
}

/// How many values of `owned_blast` are wrong on this node.
#[mttl::remote]
fn check_owned_blast(p: GlobalPtr<u64>, chunk: usize, rounds: usize, big: usize) -> usize {
    let (me, size) = (mttl::rank(), mttl::size());
    let a = kept::<GlobalArray<u64>>(p.region());
    let a = a.borrow();
    let mut wrong = 0;
    for src in 0..size {
        let (base, _, _) = owned_layout(src, chunk, rounds, big);
        for k in 0..rounds * chunk + big + 4 {
            wrong += usize::from(a[base + k] != stamp(src, me, k));
        }
    }
    wrong
}

/// Every node writes to every node with `nwrite_owned`: parts of a shared
/// buffer in small bodies (8 KiB: zero-copy on MPI) more than
/// `MAX_OWNED_SENDS` times, a large `Vec` (800 KB) and a 32-byte array (sent
/// as `nwrite_slice` sends it). All land by the fence, which leaves the
/// buffer unshared; a write past the end is reported by the next fence.
fn owned_nwrites_land_and_are_released_at_the_fence(t: Scenario) {
    t.run(3, || {
        const CHUNK: usize = 1024;
        const ROUNDS: usize = 2 * mttl::MAX_OWNED_SENDS;
        const BIG: usize = 100_000;
        let size = mttl::size();
        let (per_node, _, _) = owned_layout(size, CHUNK, ROUNDS, BIG);
        let ptrs = mttl::spmd(alloc_u64, (per_node,));
        let holders = mttl::spmd(owned_blast, (ptrs.clone(), CHUNK, ROUNDS, BIG));
        for (node, counts) in holders.iter().enumerate() {
            assert!(
                counts.iter().all(|&c| c == 1),
                "node {node}: after the fence its buffers have {counts:?} holders"
            );
        }
        for (node, &p) in ptrs.iter().enumerate() {
            assert_eq!(
                mttl::invoke(node, check_owned_blast, (p, CHUNK, ROUNDS, BIG)),
                0,
                "node {node}"
            );
        }
        // A large owned write past the end: its owner's error comes back
        // from the fence (on the own node, from the call), the good write
        // after it lands.
        for node in [1, 0] {
            let end = ptrs[node].add(per_node - 10);
            let bad = end.try_nwrite_owned(vec![7u64; 10_000]);
            let bad = bad.and_then(|()| mttl::try_fence()).unwrap_err();
            expect_kind(&bad, "owned nwrite past the end", |k| {
                *k == GlobalErrorKind::OutOfBounds {
                    region_len: 8 * per_node as u64,
                }
            });
            assert_eq!((bad.rank, bad.op), (node, "nwrite"), "{bad}");
            ptrs[node].nwrite_owned(vec![9u64; 10_000]);
            assert_eq!(mttl::try_fence(), Ok(()));
            assert_eq!(ptrs[node].read_vec(10_000), vec![9u64; 10_000]);
        }
        // Large bodies: at most MAX_OWNED_BYTES of them in flight, even
        // while their owner takes none (its only thread of OS sleeps).
        const LARGE: usize = 1 << 19; // 4 MiB of u64
        let target = ptrs[1];
        let block: Arc<[u64]> = vec![5u64; LARGE].into();
        let most = mttl::MAX_OWNED_BYTES / (8 * LARGE);
        let stalled = mttl::ainvoke(1, stall, (300,));
        std::thread::sleep(std::time::Duration::from_millis(50));
        for _ in 0..2 * most {
            target.nwrite_owned(Arc::clone(&block));
            let in_flight = Arc::strong_count(&block) - 1;
            assert!(in_flight <= most, "{in_flight} bodies of 4 MiB in flight");
        }
        mttl::fence();
        stalled.wait();
        assert_eq!(Arc::strong_count(&block), 1);
        assert_eq!(target.read_vec(LARGE), vec![5u64; LARGE]);
        println!(
            "{} owned nwrites landed by the fence",
            size * size * (ROUNDS + 2)
        );
    })
    .assert_success();
}

/// Keeps this node's OS thread asleep for `ms` milliseconds: its runtime
/// takes no message meanwhile.
#[mttl::remote]
fn stall(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Spawns a thread on this node that writes `target` with `nwrite_owned`
/// for ever (keeping `MAX_OWNED_SENDS` in flight).
#[mttl::remote]
fn write_owned_for_ever(target: GlobalPtr<u8>) {
    mttl::thread::spawn("owned writer", move || {
        let block: Arc<[u8]> = vec![0x5au8; 1 << 20].into();
        loop {
            target.nwrite_owned(Arc::clone(&block));
            mttl::thread::yield_now();
        }
    });
}

/// Node 0 ends the job while node 1 has owned writes to it in flight: the
/// job ends cleanly with main's code.
fn the_job_ends_while_owned_nwrites_are_in_flight(t: Scenario) {
    t.run(2, || {
        let landing = GlobalArray::<u8>::new(1 << 20);
        mttl::invoke(1, write_owned_for_ever, (landing.global_ptr(),));
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(300) {
            mttl::thread::yield_now();
        }
        println!("main returns while rank 1 writes");
    })
    .assert_success();
}
