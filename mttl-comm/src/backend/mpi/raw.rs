//! Checked calls into the MPI C library (`mpi::ffi`) on `MPI_COMM_WORLD`.
//!
//! The backend calls MPI through this file only. It bypasses rsmpi's safe
//! point-to-point API for three reasons: a non-blocking send or receive here
//! owns its buffer and may outlive any Rust scope (rsmpi's `Request` panics
//! when dropped unfinished); errors are returned, not fatal (the error
//! handler is set to `MPI_ERRORS_RETURN`); and a receive lands in a `Vec`'s
//! uninitialised capacity, without zeroing it first.
//!
//! The backend talks on two private duplicates of `MPI_COMM_WORLD` (so MPI
//! traffic of the program itself can never match its receives, nor the
//! reverse), one per [`Channel`].
//!
//! Invariants: a [`World`] exists only between `MPI_Init_thread` and
//! `MPI_Finalize` (its owner, `MpiComm`, drops the rsmpi `Universe`, which
//! finalises MPI, only after it stops using the `World`), and it is used from
//! the thread that initialised MPI (`MpiComm` is `!Send`). Every buffer
//! handed to `MPI_Isend`, `MPI_Irecv` or a started persistent receive stays
//! alive, and unmodified for a send, until a test reports the request
//! complete (see [`World::isend`], [`World::irecv`] and [`World::start`]).

use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::mem::MaybeUninit;
use std::ptr;

use mpi::ffi;

/// `MPI_SUCCESS`: the standard fixes it to 0 in every implementation.
const SUCCESS: c_int = 0;

/// The largest tag every MPI implementation carries: the standard only
/// promises `MPI_TAG_UB >= 32767`.
pub(super) const MIN_TAG_UB: c_int = 32767;

/// An error code returned by an MPI call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MpiCode(pub(super) c_int);

impl MpiCode {
    /// `MPI_ERR_OTHER`: for a message on the backend's channels that breaks
    /// the backend's own protocol.
    pub(super) fn other() -> MpiCode {
        MpiCode(ffi::MPI_ERR_OTHER as c_int)
    }

    /// MPI's own description of the code, e.g. `MPI_ERR_RANK: invalid rank`.
    pub(super) fn describe(self) -> String {
        let mut text = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
        let mut len: c_int = 0;
        // SAFETY: `text` has room for MPI_MAX_ERROR_STRING characters, the
        // most MPI_Error_string writes; `len` is a valid out-pointer. The
        // call is allowed before, during and after MPI's lifetime.
        let rc = unsafe { ffi::MPI_Error_string(self.0, text.as_mut_ptr(), &mut len) };
        let len = usize::try_from(len).unwrap_or(0).min(text.len());
        if rc != SUCCESS || len == 0 {
            return format!("MPI error code {}", self.0);
        }
        let bytes: Vec<u8> = text[..len].iter().map(|&c| c as u8).collect();
        format!("{} (code {})", String::from_utf8_lossy(&bytes), self.0)
    }
}

impl fmt::Display for MpiCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Turns an MPI return code into a `Result`.
#[inline(always)]
fn check(rc: c_int) -> Result<(), MpiCode> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(MpiCode(rc))
    }
}

/// Which of the backend's two communicators a message travels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Channel {
    /// Whole messages of at most `SMALL_MAX` bytes, and the markers that
    /// announce larger ones: the channel the pre-posted receives listen on.
    Small,
    /// The payloads of larger messages, each received by an `MPI_Irecv`
    /// posted when its marker arrives.
    Large,
}

/// What a completed receive got: MPI's status, read out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Received {
    /// The sender's rank in `MPI_COMM_WORLD` (the duplicates keep ranks).
    pub(super) source: c_int,
    /// The message's MPI tag.
    pub(super) tag: c_int,
    /// The message's length in bytes.
    pub(super) len: c_int,
}

/// A started `MPI_Isend` or `MPI_Irecv`, not yet reported complete.
///
/// Dropping it forgets the request without freeing its buffer; the owner of
/// the buffer must keep it until a test answers complete.
#[derive(Debug)]
pub(super) struct Request(ffi::MPI_Request);

/// The backend's handles on MPI, read or made once at start-up.
#[derive(Debug, Clone, Copy)]
pub(super) struct World {
    small: ffi::MPI_Comm,
    large: ffi::MPI_Comm,
    byte: ffi::MPI_Datatype,
    any_source: c_int,
    any_tag: c_int,
}

impl World {
    /// Makes MPI errors return codes instead of aborting the job, and
    /// duplicates `MPI_COMM_WORLD` for the two channels. Collective: every
    /// rank calls it during init.
    ///
    /// # Safety
    ///
    /// MPI must be initialised and stay so (not finalised) for as long as the
    /// returned `World` or any copy of it is used, and it must only be used
    /// on a thread MPI's threading level allows (for `MPI_THREAD_FUNNELED`,
    /// the thread that initialised MPI).
    pub(super) unsafe fn new() -> Result<World, MpiCode> {
        // SAFETY: these extern statics are constants defined by rsmpi's C
        // shim; reading them after MPI_Init is what they exist for.
        let (world, byte, any_source, any_tag, errors_return) = unsafe {
            (
                ffi::RSMPI_COMM_WORLD,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                ffi::RSMPI_ERRORS_RETURN,
            )
        };
        // SAFETY: MPI is initialised (caller's contract); both handles are
        // the library's predefined ones.
        check(unsafe { ffi::MPI_Comm_set_errhandler(world, errors_return) })?;
        let dup = || {
            let mut comm = MaybeUninit::<ffi::MPI_Comm>::uninit();
            // SAFETY: MPI is initialised; the out-pointer is valid. The
            // duplicate inherits the error handler just set.
            check(unsafe { ffi::MPI_Comm_dup(world, comm.as_mut_ptr()) })?;
            // SAFETY: MPI_Comm_dup succeeded, so it wrote the handle.
            Ok(unsafe { comm.assume_init() })
        };
        Ok(World {
            small: dup()?,
            large: dup()?,
            byte,
            any_source,
            any_tag,
        })
    }

    #[inline(always)]
    fn comm(&self, channel: Channel) -> ffi::MPI_Comm {
        match channel {
            Channel::Small => self.small,
            Channel::Large => self.large,
        }
    }

    /// This process's rank and the job's size: `MPI_Comm_rank`, `MPI_Comm_size`.
    pub(super) fn rank_and_size(&self) -> Result<(c_int, c_int), MpiCode> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: MPI is initialised (`World` invariant); the out-pointers
        // are valid locals.
        check(unsafe { ffi::MPI_Comm_rank(self.small, &mut rank) })?;
        // SAFETY: as above.
        check(unsafe { ffi::MPI_Comm_size(self.small, &mut size) })?;
        Ok((rank, size))
    }

    /// The ranks that share this process's node (its memory):
    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`, then an `MPI_Allgather`
    /// of their ranks on that node's communicator. Collective: every rank
    /// calls it during init.
    pub(super) fn same_node_ranks(&self) -> Result<Vec<c_int>, MpiCode> {
        let (rank, _) = self.rank_and_size()?;
        // SAFETY: these extern statics are constants defined by rsmpi's C
        // shim; reading them after MPI_Init is what they exist for.
        let (shared, info_null, int) = unsafe {
            (
                ffi::RSMPI_COMM_TYPE_SHARED,
                ffi::RSMPI_INFO_NULL,
                ffi::RSMPI_INT32_T,
            )
        };
        let mut node = MaybeUninit::<ffi::MPI_Comm>::uninit();
        // SAFETY: MPI is initialised (`World` invariant); the out-pointer
        // is valid.
        check(unsafe {
            ffi::MPI_Comm_split_type(self.small, shared, rank, info_null, node.as_mut_ptr())
        })?;
        // SAFETY: MPI_Comm_split_type succeeded, so it wrote the handle.
        let mut node = unsafe { node.assume_init() };
        let mut count: c_int = 0;
        // SAFETY: `node` is a valid communicator; the out-pointer is valid.
        let gathered = check(unsafe { ffi::MPI_Comm_size(node, &mut count) }).and_then(|()| {
            let mut ranks = vec![0 as c_int; usize::try_from(count).unwrap_or(0)];
            // SAFETY: `rank` is one `int` to send, `ranks` has room for one
            // from each of the node's `count` processes.
            check(unsafe {
                ffi::MPI_Allgather(
                    (&rank as *const c_int).cast::<c_void>(),
                    1,
                    int,
                    ranks.as_mut_ptr().cast::<c_void>(),
                    1,
                    int,
                    node,
                )
            })?;
            Ok(ranks)
        });
        // SAFETY: `node` was made above and is freed once.
        check(unsafe { ffi::MPI_Comm_free(&mut node) })?;
        gathered
    }

    /// The largest tag this MPI carries (the `MPI_TAG_UB` attribute; the
    /// standard promises at least 32767).
    pub(super) fn tag_ub(&self) -> Result<c_int, MpiCode> {
        let mut value: *mut c_int = ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: MPI is initialised; for a predefined attribute such as
        // MPI_TAG_UB, MPI stores a pointer to an `int` it owns into the
        // out-pointer, which is a valid local of pointer size.
        check(unsafe {
            ffi::MPI_Comm_get_attr(
                self.small,
                ffi::MPI_TAG_UB as c_int,
                (&mut value as *mut *mut c_int).cast::<c_void>(),
                &mut flag,
            )
        })?;
        if flag == 0 || value.is_null() {
            return Ok(MIN_TAG_UB);
        }
        // SAFETY: the attribute is set, so `value` points to MPI's `int`,
        // valid while MPI is initialised.
        Ok(unsafe { *value }.max(MIN_TAG_UB))
    }

    /// `MPI_Send` on `channel`: returns when `data` may be reused.
    #[inline]
    pub(super) fn send(
        &self,
        channel: Channel,
        dest: c_int,
        tag: c_int,
        data: &[u8],
    ) -> Result<(), MpiCode> {
        let len = c_int::try_from(data.len()).map_err(|_| MpiCode(ffi::MPI_ERR_COUNT as c_int))?;
        // SAFETY: `data` is valid for reads of `len` bytes for the whole
        // call, which is blocking: MPI does not keep the pointer after it
        // returns. MPI is initialised (`World` invariant).
        check(unsafe {
            ffi::MPI_Send(
                data.as_ptr().cast::<c_void>(),
                len,
                self.byte,
                dest,
                tag,
                self.comm(channel),
            )
        })
    }

    /// `MPI_Isend` on `channel`: starts sending `len` bytes at `data`.
    ///
    /// # Safety
    ///
    /// `data` must be valid for reads of `len` bytes, and neither freed nor
    /// written, until [`test`](World::test) on the returned request answers
    /// `true` (or the process exits).
    #[inline]
    pub(super) unsafe fn isend(
        &self,
        channel: Channel,
        dest: c_int,
        tag: c_int,
        data: *const u8,
        len: c_int,
    ) -> Result<Request, MpiCode> {
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: the buffer outlives the request (caller's contract); the
        // request out-pointer is valid. MPI is initialised (`World` invariant).
        check(unsafe {
            ffi::MPI_Isend(
                data.cast::<c_void>(),
                len,
                self.byte,
                dest,
                tag,
                self.comm(channel),
                request.as_mut_ptr(),
            )
        })?;
        // SAFETY: MPI_Isend succeeded, so it wrote the request handle.
        Ok(Request(unsafe { request.assume_init() }))
    }

    /// `MPI_Test` on a send: has it completed? Once it answers `true`, MPI
    /// has released the request and the send's buffer.
    #[inline]
    pub(super) fn test(&self, request: &mut Request) -> Result<bool, MpiCode> {
        let mut flag: c_int = 0;
        // SAFETY: `request.0` is a handle MPI_Isend returned that was not
        // completed yet (a completed one is never tested again: its owner
        // drops it at once); STATUS_IGNORE is allowed for MPI_Test.
        check(unsafe { ffi::MPI_Test(&mut request.0, &mut flag, ffi::RSMPI_STATUS_IGNORE) })?;
        Ok(flag != 0)
    }

    /// `MPI_Irecv` on `channel` from `source` (`None`: any) with `tag`
    /// (`None`: any) of at most `capacity` bytes into `buf`. Never blocks.
    ///
    /// # Safety
    ///
    /// `buf` must be valid for writes of `capacity` bytes, and neither freed
    /// nor otherwise accessed, until [`test_recv`](World::test_recv) on the
    /// returned request answers `Some` (or the process exits).
    #[inline]
    pub(super) unsafe fn irecv(
        &self,
        channel: Channel,
        source: Option<c_int>,
        tag: Option<c_int>,
        buf: *mut u8,
        capacity: c_int,
    ) -> Result<Request, MpiCode> {
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: the buffer outlives the request and nothing else touches
        // it meanwhile (caller's contract); MPI writes at most `capacity`
        // bytes (a longer message is an MPI_ERR_TRUNCATE error, not an
        // overrun). MPI is initialised (`World` invariant).
        check(unsafe {
            ffi::MPI_Irecv(
                buf.cast::<c_void>(),
                capacity,
                self.byte,
                source.unwrap_or(self.any_source),
                tag.unwrap_or(self.any_tag),
                self.comm(channel),
                request.as_mut_ptr(),
            )
        })?;
        // SAFETY: MPI_Irecv succeeded, so it wrote the request handle.
        Ok(Request(unsafe { request.assume_init() }))
    }

    /// `MPI_Test` on a receive: the message's envelope once it has arrived
    /// whole, after which MPI has released the request and the buffer.
    #[inline]
    pub(super) fn test_recv(&self, request: &mut Request) -> Result<Option<Received>, MpiCode> {
        // SAFETY: `request.0` is a handle MPI_Irecv returned that was not
        // completed yet (see `test`).
        unsafe { self.test_handle(&mut request.0) }
    }

    /// `MPI_Test` on a receive request: its envelope once complete.
    ///
    /// # Safety
    ///
    /// `handle` must be a receive request MPI returned and has not released:
    /// one not reported complete yet, or a persistent one.
    #[inline]
    unsafe fn test_handle(
        &self,
        handle: &mut ffi::MPI_Request,
    ) -> Result<Option<Received>, MpiCode> {
        let mut flag: c_int = 0;
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: a valid handle (caller's contract); the out-pointers are
        // valid locals.
        check(unsafe { ffi::MPI_Test(handle, &mut flag, status.as_mut_ptr()) })?;
        if flag == 0 {
            return Ok(None);
        }
        // SAFETY: the receive completed, so MPI filled in the status.
        self.received(&unsafe { status.assume_init() }).map(Some)
    }

    /// The envelope a completed receive's status reports.
    #[inline]
    fn received(&self, status: &ffi::MPI_Status) -> Result<Received, MpiCode> {
        Ok(Received {
            source: status.MPI_SOURCE,
            tag: status.MPI_TAG,
            len: self.count(status)?,
        })
    }

    /// The byte count of a received message: `MPI_Get_count`.
    #[inline]
    fn count(&self, status: &ffi::MPI_Status) -> Result<c_int, MpiCode> {
        let mut count: c_int = 0;
        // SAFETY: `status` was filled in by MPI; the out-pointer is valid.
        check(unsafe { ffi::MPI_Get_count(status, self.byte, &mut count) })?;
        if count < 0 {
            // MPI_UNDEFINED: not a whole number of bytes, which cannot happen
            // for a byte datatype.
            return Err(MpiCode(ffi::MPI_ERR_COUNT as c_int));
        }
        Ok(count)
    }
}

/// A persistent receive (`MPI_Recv_init`), bound to one buffer address:
/// started again and again with `MPI_Start`, it saves MPI building and
/// releasing a request per message (small-message streams run noticeably
/// faster than with an `MPI_Irecv` per message). Active from
/// [`World::start`] until the test
/// that reports it complete (or [`World::cancel_persistent`]); while
/// inactive, MPI does not touch the buffer. Freed, inactive, by
/// [`World::free_persistent`] before MPI is finalised.
#[derive(Debug)]
pub(super) struct Persistent(ffi::MPI_Request);

impl World {
    /// `MPI_Recv_init` on `channel` from any source with any tag, of at
    /// most `capacity` bytes into `buf`. Inactive until started.
    ///
    /// # Safety
    ///
    /// Each time the request is started, `buf` must be valid for writes of
    /// `capacity` bytes, and neither freed nor otherwise accessed, until a
    /// test reports it complete or a cancellation returns.
    pub(super) unsafe fn recv_init_any(
        &self,
        channel: Channel,
        buf: *mut u8,
        capacity: c_int,
    ) -> Result<Persistent, MpiCode> {
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: MPI only records the buffer here (caller's contract covers
        // the starts). MPI is initialised (`World` invariant).
        check(unsafe {
            ffi::MPI_Recv_init(
                buf.cast::<c_void>(),
                capacity,
                self.byte,
                self.any_source,
                self.any_tag,
                self.comm(channel),
                request.as_mut_ptr(),
            )
        })?;
        // SAFETY: MPI_Recv_init succeeded, so it wrote the request handle.
        Ok(Persistent(unsafe { request.assume_init() }))
    }

    /// `MPI_Start` of an inactive persistent receive.
    ///
    /// # Safety
    ///
    /// As for [`recv_init_any`](World::recv_init_any): the buffer is MPI's
    /// until the receive completes or is cancelled.
    #[inline]
    pub(super) unsafe fn start(&self, request: &mut Persistent) -> Result<(), MpiCode> {
        // SAFETY: an inactive persistent request (caller's contract).
        check(unsafe { ffi::MPI_Start(&mut request.0) })
    }

    /// `MPI_Test` on an active persistent receive: the envelope once the
    /// message has arrived whole, after which the request is inactive and
    /// the buffer is the caller's again.
    #[inline]
    pub(super) fn test_persistent(
        &self,
        request: &mut Persistent,
    ) -> Result<Option<Received>, MpiCode> {
        // SAFETY: a persistent request MPI_Recv_init made, not freed yet
        // (`free_persistent` takes it by value).
        unsafe { self.test_handle(&mut request.0) }
    }

    /// Withdraws an active persistent receive: `MPI_Cancel`, then
    /// `MPI_Wait` until MPI has let go of it (the request is inactive
    /// afterwards). Returns what it received if a message matched it before
    /// the cancellation took effect. Once this returns, MPI no longer
    /// touches the receive's buffer.
    pub(super) fn cancel_persistent(
        &self,
        request: &mut Persistent,
    ) -> Result<Option<Received>, MpiCode> {
        // SAFETY: an active persistent receive.
        check(unsafe { ffi::MPI_Cancel(&mut request.0) })?;
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: as above; MPI_Wait completes the cancelled (or matched)
        // request, leaving it inactive, and fills in the status.
        check(unsafe { ffi::MPI_Wait(&mut request.0, status.as_mut_ptr()) })?;
        // SAFETY: MPI_Wait succeeded, so it filled in the status.
        let status = unsafe { status.assume_init() };
        let mut cancelled: c_int = 0;
        // SAFETY: `status` came from MPI_Wait; the out-pointer is valid.
        check(unsafe { ffi::MPI_Test_cancelled(&status, &mut cancelled) })?;
        if cancelled != 0 {
            return Ok(None);
        }
        self.received(&status).map(Some)
    }

    /// `MPI_Request_free` of an inactive persistent receive.
    pub(super) fn free_persistent(&self, mut request: Persistent) -> Result<(), MpiCode> {
        // SAFETY: an inactive persistent request: MPI holds no buffer for it.
        check(unsafe { ffi::MPI_Request_free(&mut request.0) })
    }
}
