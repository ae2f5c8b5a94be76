//! Checked calls into the MPI C library (`mpi::ffi`) on `MPI_COMM_WORLD`.
//!
//! The backend calls MPI through this file only. It bypasses rsmpi's safe
//! point-to-point API for three reasons: a non-blocking send here owns its
//! buffer and may outlive any Rust scope (rsmpi's `Request` panics when
//! dropped unfinished); errors are returned, not fatal (the world
//! communicator's error handler is set to `MPI_ERRORS_RETURN`); and a receive
//! lands in a `Vec`'s uninitialised capacity, without zeroing it first.
//!
//! Invariants: a [`World`] exists only between `MPI_Init_thread` and
//! `MPI_Finalize` (its owner, `MpiComm`, drops the rsmpi `Universe`, which
//! finalises MPI, only after it stops using the `World`), and it is used from
//! the thread that initialised MPI (`MpiComm` is `!Send`). Every buffer
//! handed to `MPI_Isend` stays alive and unmodified until `MPI_Test` reports
//! the send complete (see [`World::isend`]).

use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::mem::MaybeUninit;

use mpi::ffi;

/// `MPI_SUCCESS`: the standard fixes it to 0 in every implementation.
const SUCCESS: c_int = 0;

/// The largest tag every MPI implementation carries: the standard only
/// promises `MPI_TAG_UB >= 32767`.
pub(super) const MAX_TAG: c_int = 32767;

/// An error code returned by an MPI call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MpiCode(c_int);

impl MpiCode {
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

/// The envelope of a message that `MPI_Iprobe` saw and that is still inside
/// MPI, waiting to be received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Probed {
    /// The sender's rank in `MPI_COMM_WORLD`.
    pub(super) source: c_int,
    /// The message's tag.
    pub(super) tag: c_int,
    /// The message's length in bytes.
    pub(super) len: c_int,
}

/// A started `MPI_Isend`, not yet reported complete.
///
/// Dropping it forgets the request without freeing its buffer; the owner of
/// the buffer must keep it until [`World::test`] answers `true`.
#[derive(Debug)]
pub(super) struct Request(ffi::MPI_Request);

/// Handles on `MPI_COMM_WORLD` and the byte datatype, read once at start-up.
#[derive(Debug, Clone, Copy)]
pub(super) struct World {
    comm: ffi::MPI_Comm,
    byte: ffi::MPI_Datatype,
    any_source: c_int,
    any_tag: c_int,
}

impl World {
    /// Reads the world handles and makes MPI errors on the world
    /// communicator return codes instead of aborting the job.
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
        let world = unsafe {
            World {
                comm: ffi::RSMPI_COMM_WORLD,
                byte: ffi::RSMPI_UINT8_T,
                any_source: ffi::RSMPI_ANY_SOURCE,
                any_tag: ffi::RSMPI_ANY_TAG,
            }
        };
        // SAFETY: MPI is initialised (caller's contract); both handles are
        // the library's predefined ones.
        check(unsafe { ffi::MPI_Comm_set_errhandler(world.comm, ffi::RSMPI_ERRORS_RETURN) })?;
        Ok(world)
    }

    /// This process's rank and the job's size: `MPI_Comm_rank`, `MPI_Comm_size`.
    pub(super) fn rank_and_size(&self) -> Result<(c_int, c_int), MpiCode> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: MPI is initialised (`World` invariant); the out-pointers
        // are valid locals.
        check(unsafe { ffi::MPI_Comm_rank(self.comm, &mut rank) })?;
        // SAFETY: as above.
        check(unsafe { ffi::MPI_Comm_size(self.comm, &mut size) })?;
        Ok((rank, size))
    }

    /// `MPI_Send`: returns when `data` may be reused.
    #[inline]
    pub(super) fn send(&self, dest: c_int, tag: c_int, data: &[u8]) -> Result<(), MpiCode> {
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
                self.comm,
            )
        })
    }

    /// `MPI_Isend`: starts sending `len` bytes at `data`.
    ///
    /// # Safety
    ///
    /// `data` must be valid for reads of `len` bytes, and neither freed nor
    /// written, until [`test`](World::test) on the returned request answers
    /// `true` (or the process exits).
    #[inline]
    pub(super) unsafe fn isend(
        &self,
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
                self.comm,
                request.as_mut_ptr(),
            )
        })?;
        // SAFETY: MPI_Isend succeeded, so it wrote the request handle.
        Ok(Request(unsafe { request.assume_init() }))
    }

    /// `MPI_Test`: has the send behind `request` completed? Once it answers
    /// `true`, MPI has released the request and the send's buffer.
    #[inline]
    pub(super) fn test(&self, request: &mut Request) -> Result<bool, MpiCode> {
        let mut flag: c_int = 0;
        // SAFETY: `request.0` is a handle MPI_Isend returned that was not
        // completed yet (a completed one is never tested again: its owner
        // drops it at once); STATUS_IGNORE is allowed for MPI_Test.
        check(unsafe { ffi::MPI_Test(&mut request.0, &mut flag, ffi::RSMPI_STATUS_IGNORE) })?;
        Ok(flag != 0)
    }

    /// `MPI_Iprobe(source or ANY_SOURCE, ANY_TAG)`: the envelope of the next
    /// message waiting in MPI, if any. Never blocks; drives MPI's progress.
    #[inline]
    pub(super) fn iprobe(&self, source: Option<c_int>) -> Result<Option<Probed>, MpiCode> {
        let source = source.unwrap_or(self.any_source);
        let mut flag: c_int = 0;
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: the out-pointers are valid locals; MPI is initialised
        // (`World` invariant).
        check(unsafe {
            ffi::MPI_Iprobe(
                source,
                self.any_tag,
                self.comm,
                &mut flag,
                status.as_mut_ptr(),
            )
        })?;
        if flag == 0 {
            return Ok(None);
        }
        // SAFETY: the probe matched a message, so MPI filled in the status.
        let status = unsafe { status.assume_init() };
        Ok(Some(Probed {
            source: status.MPI_SOURCE,
            tag: status.MPI_TAG,
            len: self.count(&status)?,
        }))
    }

    /// `MPI_Recv(probed.source, probed.tag)` into a fresh `Vec` of the probed
    /// length. `probed` must come from [`iprobe`](World::iprobe) with no MPI
    /// receive from that source since, so the receive takes that very
    /// message (MPI's non-overtaking rule).
    #[inline]
    pub(super) fn recv(&self, probed: Probed) -> Result<Vec<u8>, MpiCode> {
        let capacity =
            usize::try_from(probed.len).map_err(|_| MpiCode(ffi::MPI_ERR_COUNT as c_int))?;
        let mut data = Vec::<u8>::with_capacity(capacity);
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: `data` has room for `probed.len` bytes and MPI writes at
        // most that many (a longer message is an MPI_ERR_TRUNCATE error, not
        // an overrun); the status out-pointer is valid; MPI is initialised.
        check(unsafe {
            ffi::MPI_Recv(
                data.as_mut_ptr().cast::<c_void>(),
                probed.len,
                self.byte,
                probed.source,
                probed.tag,
                self.comm,
                status.as_mut_ptr(),
            )
        })?;
        // SAFETY: MPI_Recv succeeded, so it filled in the status.
        let status = unsafe { status.assume_init() };
        let received = usize::try_from(self.count(&status)?)
            .unwrap_or(0)
            .min(capacity);
        // SAFETY: MPI wrote `received` bytes (at most the capacity) at the
        // start of `data`'s buffer.
        unsafe { data.set_len(received) };
        Ok(data)
    }

    /// The byte count of a probed or received message: `MPI_Get_count`.
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
