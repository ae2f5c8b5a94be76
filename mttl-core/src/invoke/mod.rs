//! `invoke`, `ainvoke` and `spmd`: calling a function on another node. As
//! a service ([`Invoke`]) it owns the `INVOKE` message; its only state is
//! the count of `invoke_nowait` calls running here (`nowait`; the reply
//! cells are in `sync`'s cell table).
//!
//! A function marked `#[mttl::remote]` is registered under a stable id
//! ([`crate::registry`]). `invoke(node, f, args)`:
//!
//! 1. finds `f`'s id from its type (the `TypeId` of the [`RemoteFunction`]
//!    the attribute made of the function's name);
//! 2. if `node` is this node, calls `f` right here (no network, no thread);
//! 3. otherwise creates a reply cell (a `SyncCell` writable from other
//!    nodes), sends `INVOKE(id, cell, flags)` with the encoded arguments,
//!    and reads the cell, which blocks only the calling mttl thread;
//! 4. the handler on `node` spawns a thread that decodes the arguments,
//!    runs `f` (catching a panic), and writes the encoded result, or the
//!    panic's message, into the caller's reply cell with a `CELL_WRITE`;
//! 5. the caller's handler delivers it to the cell, which wakes the caller.
//!
//! `ainvoke` stops after step 3's send and returns a [`Pending`] handle to
//! read the cell later. A panic in the remote function comes back as a
//! [`RemoteError`]: `try_invoke` returns it, `invoke` panics with it.
//!
//! Two variants of step 4:
//!
//! - `spmd` sets the [`FATAL`] flag: nothing catches its tasks' panics (the
//!   other tasks may wait for the panicking one in a collective), so the
//!   callee lets a panic end the thread, and the job, at once;
//! - `invoke_nowait` (in `global`) sends [`NO_REPLY`] for the cell: the
//!   callee counts the call until it returns and keeps its failure for the
//!   caller's next fence (`nowait`).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use mttl_comm::{Rank, Tag};

use crate::codec::{self, Decode, Encode};
use crate::context::{self, Context, Service};
use crate::registry::{Callable, Registry, RemoteFn};
use crate::sync::{self, SyncCell};
use crate::thread::{self, BlockReason};
use crate::trace;
use crate::wire::{self, Fields, HeaderBuf};

mod nowait;

pub(crate) use nowait::{park_fence, wait_local};

/// The reply cell value of a call that wants no reply.
pub(crate) const NO_REPLY: u32 = u32::MAX;

/// `INVOKE` flag: no caller catches the function's panic (an `spmd` task),
/// so the callee ends the job at once, as for any uncaught panic, instead
/// of replying with it.
pub(crate) const FATAL: u8 = 1;

/// A remote call failed: the function panicked, or could not be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// The node where it failed.
    pub rank: Rank,
    /// What happened, e.g. `remote function app::f panicked at src/main.rs:9:5: boom`.
    pub message: String,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "on rank {}: {}", self.rank, self.message)
    }
}

impl std::error::Error for RemoteError {}

/// A function that can be invoked on another node with arguments `Args` (a
/// tuple): a function marked `#[mttl::remote]`, and only those. The
/// attribute makes the function's name a [`RemoteFunction`], which
/// implements this trait; a plain function does not, so passing one to
/// [`invoke`](fn@invoke) is a compile-time error:
///
/// ```compile_fail
/// fn not_marked(x: u32) -> u32 {
///     x
/// }
/// mttl_core::invoke(1, not_marked, (1,)); // `not_marked` is not a remote function
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a remote function",
    label = "not marked #[mttl::remote]",
    note = "add #[mttl::remote] to the function to call it on another node (arguments: `{Args}`)"
)]
pub trait Remote<Args>: Copy + 'static {
    /// What the function returns.
    type Output;
    /// Calls the function here.
    fn call_local(self, args: Args) -> Self::Output;
}

/// A function that can be invoked on a global object of type `T` at its
/// owner: `#[mttl::remote]` functions whose first parameter is `&mut T`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a remote member function of `{T}`",
    label = "not a #[mttl::remote] function taking `&mut {T}` first",
    note = "add #[mttl::remote] to the function, whose first parameter is the object"
)]
pub trait RemoteMethod<T, Args>: Copy + 'static {
    /// What the function returns.
    type Output;
    /// Calls the function here, on `object`.
    fn call_local(self, object: &mut T, args: Args) -> Self::Output;
}

/// What `#[mttl::remote]` makes of a function's name: a constant that
/// calls like the function (`f(x)`, through its pointer `P`) and that,
/// unlike a plain function, can be invoked on another node ([`Remote`],
/// [`RemoteMethod`]). `M` is a marker type of that one function, which
/// keys its registration.
pub struct RemoteFunction<M, P> {
    pointer: P,
    marker: PhantomData<fn() -> M>,
}

impl<M, P: Copy> Clone for RemoteFunction<M, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M, P: Copy> Copy for RemoteFunction<M, P> {}

impl<M, P> fmt::Debug for RemoteFunction<M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteFunction({})", std::any::type_name::<M>())
    }
}

impl<M, P> std::ops::Deref for RemoteFunction<M, P> {
    type Target = P;

    /// The function pointer: what makes `f(x)` call the function.
    fn deref(&self) -> &P {
        &self.pointer
    }
}

impl<M, P> RemoteFunction<M, P> {
    /// What the macro expands to; not part of the API.
    #[doc(hidden)]
    pub const fn __new(pointer: P) -> Self {
        RemoteFunction {
            pointer,
            marker: PhantomData,
        }
    }
}

macro_rules! impl_remote {
    ($($a:ident),*) => {
        impl<M, Out, $($a),*> Remote<($($a,)*)> for RemoteFunction<M, fn($($a),*) -> Out>
        where
            M: 'static,
            Out: 'static,
            $($a: 'static,)*
        {
            type Output = Out;
            #[allow(non_snake_case)]
            #[inline]
            fn call_local(self, ($($a,)*): ($($a,)*)) -> Out {
                (self.pointer)($($a),*)
            }
        }

        impl<M, Obj, Out, $($a),*> RemoteMethod<Obj, ($($a,)*)>
            for RemoteFunction<M, fn(&mut Obj, $($a),*) -> Out>
        where
            M: 'static,
            Obj: 'static,
            Out: 'static,
            $($a: 'static,)*
        {
            type Output = Out;
            #[allow(non_snake_case)]
            #[inline]
            fn call_local(self, object: &mut Obj, ($($a,)*): ($($a,)*)) -> Out {
                (self.pointer)(object, $($a),*)
            }
        }
    };
}

impl_remote!();
impl_remote!(A1);
impl_remote!(A1, A2);
impl_remote!(A1, A2, A3);
impl_remote!(A1, A2, A3, A4);
impl_remote!(A1, A2, A3, A4, A5);
impl_remote!(A1, A2, A3, A4, A5, A6);
impl_remote!(A1, A2, A3, A4, A5, A6, A7);
impl_remote!(A1, A2, A3, A4, A5, A6, A7, A8);

/// The registry entry of the function item `F`.
///
/// # Panics
///
/// Panics if `F` is not marked `#[mttl::remote]`.
#[track_caller]
pub(crate) fn entry_of<F: 'static>() -> &'static RemoteFn {
    match Registry::get().by_type(TypeId::of::<F>()) {
        Some(e) => e,
        None => not_remote(std::any::type_name::<F>()),
    }
}

#[cold]
#[track_caller]
fn not_remote(name: &str) -> ! {
    let short = name.rsplit("::").next().unwrap_or(name);
    panic!(
        "{name} is not a remote function: add #[mttl::remote] to fn {short} to call it \
         through invoke, ainvoke, invoke_nowait, spmd or a GlobalPtr"
    )
}

/// What a reply cell receives.
#[derive(Debug)]
pub(crate) struct Reply {
    status: u8,
    body: Vec<u8>,
}

fn deliver_reply(cell: &dyn Any, status: u8, body: &[u8]) -> Result<(), String> {
    crate::sync::write_any::<Reply>(
        cell,
        Reply {
            status,
            body: body.to_vec(),
        },
    )
}

/// A call in flight, started by [`ainvoke`]: wait for its result with
/// [`wait`](Pending::wait) or [`try_wait`](Pending::try_wait).
///
/// The call is sent by `ainvoke` and runs whether or not the handle is
/// waited on. Dropping the handle unwaited discards the result silently
/// when it arrives; if the remote function panicked, the caller's rank
/// reports it on stderr (`a write from rank R was lost: ... failed: ...`),
/// as no one else will see it. Nothing tells the caller when a dropped
/// call has run: to know, wait on it (or have it write into a
/// [`GlobalSync`](crate::GlobalSync), or end with a [`barrier`](crate::barrier)
/// after the callees' work is known to be done).
#[must_use = "the call runs anyway, but its result and any panic are lost unless waited on"]
pub struct Pending<R> {
    cell: SyncCell<Reply>,
    slot: Option<u32>,
    node: Rank,
    name: &'static str,
    _result: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for Pending<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pending({} on rank {})", self.name, self.node)
    }
}

impl<R: Decode<()>> Pending<R> {
    /// Whether the result has arrived (waiting would not block).
    pub fn is_ready(&self) -> bool {
        self.cell.queue_len() > 0
    }

    /// Waits for the result; a remote panic comes back as the error.
    #[track_caller]
    pub fn try_wait(mut self) -> Result<R, RemoteError> {
        let reply = self
            .cell
            .read_for(BlockReason::new("reply to invoke").with_rank(self.node as u32));
        // Only remote calls are traced (a local one sends nothing).
        if trace::on() && self.slot.is_some() {
            let node = Some(self.node);
            trace::named(trace::Kind::InvokeAnswered, node, self.name, 0, None);
        }
        if let Some(slot) = self.slot.take() {
            sync::remove_cell(slot);
        }
        let node = self.node;
        match reply.status {
            wire::STATUS_OK => codec::decode(&reply.body).map_err(|e| RemoteError {
                rank: node,
                message: format!("the result of {} could not be decoded: {e}", self.name),
            }),
            _ => Err(RemoteError {
                rank: node,
                message: String::from_utf8_lossy(&reply.body).into_owned(),
            }),
        }
    }

    /// Waits for the result.
    ///
    /// # Panics
    ///
    /// Panics with the remote error if the remote function panicked.
    #[track_caller]
    pub fn wait(self) -> R {
        match self.try_wait() {
            Ok(r) => r,
            Err(e) => panic!("remote call failed {e}"),
        }
    }
}

impl<R> Drop for Pending<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Dropped unwaited. While the reply is still to come, the slot
            // stays taken (by a dead cell), so that no later call reusing it
            // receives this reply; the late reply frees it, silently unless
            // the call failed (`CellTable::deliver`).
            if self.cell.queue_len() > 0 {
                sync::remove_cell(slot);
            }
        }
    }
}

fn check_node(node: Rank) -> Result<(), RemoteError> {
    let size = context::size();
    if node >= size {
        return Err(RemoteError {
            rank: node,
            message: format!("rank {node} does not exist (the job has {size} ranks)"),
        });
    }
    Ok(())
}

/// A `Pending` that is already complete.
fn ready<R>(node: Rank, name: &'static str, reply: Reply) -> Pending<R> {
    let cell = SyncCell::new();
    cell.write(reply);
    Pending {
        cell,
        slot: None,
        node,
        name,
        _result: PhantomData,
    }
}

fn local_reply<R: Encode>(result: Result<R, thread::ThreadPanic>, name: &str) -> Reply {
    match result {
        Ok(r) => {
            let mut body = Vec::new();
            match codec::encode_into(&r, &mut body) {
                Ok(()) => Reply {
                    status: wire::STATUS_OK,
                    body,
                },
                Err(e) => Reply {
                    status: wire::STATUS_ERROR,
                    body: e.into_bytes(),
                },
            }
        }
        Err(p) => Reply {
            status: wire::STATUS_PANIC,
            body: panic_message(name, &p).into_bytes(),
        },
    }
}

pub(crate) fn panic_message(name: &str, p: &thread::ThreadPanic) -> String {
    match &p.location {
        Some(l) => format!("remote function {name} panicked at {l}: {}", p.message),
        None => format!("remote function {name} panicked: {}", p.message),
    }
}

/// Starts `f(args)` on `node` and returns at once; the handle gives the
/// result. To this node, `f` runs in a new local thread.
///
/// The first call of a burst to one node leaves at once; the next ones
/// leave together when this thread blocks or yields (or their batch
/// fills). Before computing for long after a burst, call
/// [`flush`](crate::flush) to send them now.
///
/// # Panics
///
/// Panics if `f` is not `#[mttl::remote]`, or the call cannot be sent.
#[track_caller]
pub fn ainvoke<F, A>(node: Rank, f: F, args: A) -> Pending<F::Output>
where
    F: Remote<A>,
    A: Encode + 'static,
    F::Output: Encode + Decode<()>,
{
    start_call(node, f, args, 0)
}

/// `ainvoke` with the `INVOKE` flags `flags`.
#[track_caller]
fn start_call<F, A>(node: Rank, f: F, args: A, flags: u8) -> Pending<F::Output>
where
    F: Remote<A>,
    A: Encode + 'static,
    F::Output: Encode + Decode<()>,
{
    let entry = entry_of::<F>();
    if let Err(e) = check_node(node) {
        return ready(
            node,
            entry.name,
            Reply {
                status: wire::STATUS_ERROR,
                body: e.message.into_bytes(),
            },
        );
    }
    let cell: SyncCell<Reply> = SyncCell::new();
    let me = context::rank();
    if node == me {
        let target = cell.clone();
        let name = entry.name;
        thread::spawn_detached(name, move || {
            let result = if flags & FATAL != 0 {
                Ok(f.call_local(args))
            } else {
                thread::catch_panic(|| f.call_local(args))
            };
            target.write(local_reply(result, name));
        });
        return Pending {
            cell,
            slot: None,
            node,
            name: entry.name,
            _result: PhantomData,
        };
    }
    let mut body = Vec::new();
    if let Err(e) = codec::encode_into(&args, &mut body) {
        panic!("invoke of {}: {e}", entry.name);
    }
    let slot = sync::insert_cell(cell.weak_any(), deliver_reply);
    if trace::on() {
        trace::named(trace::Kind::InvokeIssued, Some(node), entry.name, 0, None);
    }
    context::with(|cx| {
        let header = HeaderBuf::with_capacity(13)
            .u64(entry.id)
            .u32(slot)
            .u8(flags)
            .bytes;
        if let Err(e) = cx.post_owned(node, wire::INVOKE, &header, body) {
            cx.send_failed(&format!("invoke of {} on rank {node}", entry.name), &e);
        }
    });
    Pending {
        cell,
        slot: Some(slot),
        node,
        name: entry.name,
        _result: PhantomData,
    }
}

/// Starts `f(args)` on `node` with no reply: `invoke_nowait`'s send (the
/// caller counts it for its fence; see `nowait`). To this node, `f` runs
/// in a new local thread, counted here.
///
/// # Panics
///
/// Panics if `f` is not `#[mttl::remote]`, or its arguments cannot be
/// encoded.
#[track_caller]
pub(crate) fn start_nowait<F, A>(node: Rank, f: F, args: A)
where
    F: Remote<A>,
    A: Encode + 'static,
{
    let entry = entry_of::<F>();
    let me = context::rank();
    if node == me {
        let name = entry.name;
        nowait::started(me);
        thread::spawn_detached(name, move || {
            let failure = thread::catch_panic(|| drop(f.call_local(args)))
                .err()
                .map(|p| panic_message(name, &p));
            nowait::finished(me, failure);
        });
        return;
    }
    let mut body = Vec::new();
    if let Err(e) = codec::encode_into(&args, &mut body) {
        panic!("invoke_nowait of {}: {e}", entry.name);
    }
    if trace::on() {
        trace::named(trace::Kind::InvokeIssued, Some(node), entry.name, 1, None);
    }
    context::with(|cx| {
        let header = HeaderBuf::with_capacity(13)
            .u64(entry.id)
            .u32(NO_REPLY)
            .u8(0)
            .bytes;
        if let Err(e) = cx.post_owned(node, wire::INVOKE, &header, body) {
            cx.send_failed(
                &format!("invoke_nowait of {} on rank {node}", entry.name),
                &e,
            );
        }
    });
}

/// Calls `f(args)` on `node` and returns its result; blocks only the
/// calling thread. A remote panic comes back as the error.
#[track_caller]
pub fn try_invoke<F, A>(node: Rank, f: F, args: A) -> Result<F::Output, RemoteError>
where
    F: Remote<A>,
    A: Encode + 'static,
    F::Output: Encode + Decode<()>,
{
    let entry = entry_of::<F>();
    check_node(node)?;
    if node == context::rank() {
        return thread::catch_panic(|| f.call_local(args)).map_err(|p| RemoteError {
            rank: node,
            message: panic_message(entry.name, &p),
        });
    }
    ainvoke(node, f, args).try_wait()
}

/// Calls `f(args)` on `node` and returns its result; blocks only the
/// calling thread (paper: `invoke(node, f, args...)`).
///
/// # Panics
///
/// Panics if `f` panicked on `node` (with its message), if `f` is not
/// `#[mttl::remote]`, or if `node` does not exist.
#[track_caller]
pub fn invoke<F, A>(node: Rank, f: F, args: A) -> F::Output
where
    F: Remote<A>,
    A: Encode + 'static,
    F::Output: Encode + Decode<()>,
{
    match try_invoke(node, f, args) {
        Ok(r) => r,
        Err(e) => panic!("remote call failed {e}"),
    }
}

/// Runs `f(args)` on every node (rank order) and waits for all: the SPMD
/// pattern of the paper's NPB ports, where node 0's main invokes each task
/// everywhere. Returns the results by rank.
///
/// A task that panics ends the job at once, on its own rank, as `MPI_Abort`
/// would: the other tasks may be waiting for it in a collective and could
/// never finish, so nothing waits for them.
#[track_caller]
pub fn spmd<F, A>(f: F, args: A) -> Vec<F::Output>
where
    F: Remote<A>,
    A: Encode + Clone + 'static,
    F::Output: Encode + Decode<()>,
{
    // Loops, not iterator adapters: a closure would place the wait (in a
    // deadlock report) and the calls' errors inside the standard library.
    let mut calls = Vec::with_capacity(context::size());
    for r in 0..context::size() {
        calls.push(start_call(r, f, args.clone(), FATAL));
    }
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        results.push(call.wait());
    }
    results
}

/// The service of remote calls: owns `INVOKE` (step 4).
#[derive(Debug)]
pub(crate) struct Invoke;

impl Service for Invoke {
    fn start(_cx: &Context) -> Result<(), String> {
        nowait::reset();
        Ok(())
    }

    fn stop() {
        nowait::reset();
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        kind == wire::INVOKE
    }

    fn handle(_cx: &mut Context, src: Rank, _kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        let mut f = Fields(header);
        let (id, cell, flags) = (f.u64(), f.u32(), f.u8());
        serve(src, id, cell, flags, body.into_owned());
    }
}

/// Step 4 on the callee's node: run function `id` for `src` in a new
/// thread and reply into `cell`.
fn serve(src: Rank, id: u64, cell: u32, flags: u8, args: Vec<u8>) {
    let entry = Registry::get().by_id(id);
    let name = entry.map_or("an unknown remote function", |e| e.name);
    if cell == NO_REPLY {
        nowait::started(src);
    }
    thread::spawn_detached(name, move || {
        let begin = trace::begin();
        let (status, body) = run_registered(entry, id, &args, flags);
        if begin.is_some() {
            trace::named(trace::Kind::InvokeServed, Some(src), name, 0, begin);
        }
        if cell != NO_REPLY {
            sync::write_cell(src, cell, status, &body);
        } else {
            let failure =
                (status != wire::STATUS_OK).then(|| String::from_utf8_lossy(&body).into_owned());
            nowait::finished(src, failure);
        }
    });
}

fn run_registered(
    entry: Option<&'static RemoteFn>,
    id: u64,
    args: &[u8],
    flags: u8,
) -> (u8, Vec<u8>) {
    let me = context::rank();
    let Some(entry) = entry else {
        return (
            wire::STATUS_ERROR,
            format!("rank {me} has no remote function with id {id:#018x} (are all ranks the same program?)")
                .into_bytes(),
        );
    };
    let Callable::Free(call) = entry.callable else {
        return (
            wire::STATUS_ERROR,
            format!(
                "{} is a member function: invoke it through a GlobalPtr",
                entry.name
            )
            .into_bytes(),
        );
    };
    let result = if flags & FATAL != 0 {
        // A panic unwinds to the thread's root and ends the job from there.
        Ok(call(args))
    } else {
        thread::catch_panic(|| call(args))
    };
    match result {
        Ok(Ok(bytes)) => (wire::STATUS_OK, bytes),
        Ok(Err(e)) => (
            wire::STATUS_ERROR,
            format!(
                "the arguments of {} could not be decoded on rank {me}: {e}",
                entry.name
            )
            .into_bytes(),
        ),
        Err(p) => (
            wire::STATUS_PANIC,
            panic_message(entry.name, &p).into_bytes(),
        ),
    }
}
