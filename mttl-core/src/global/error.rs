//! [`GlobalError`]: why a global-memory access failed, and how the owner
//! sends that reason back to the caller.
//!
//! An owner answers a bad access with `STATUS_ERROR` and a body of fixed
//! fields followed by a message:
//!
//! | field      | bytes | meaning                                         |
//! |------------|-------|-------------------------------------------------|
//! | code       | 1     | which [`GlobalErrorKind`]                       |
//! | region     | 4     | the region asked for                            |
//! | offset     | 8     | the byte offset asked for                       |
//! | len        | 8     | the bytes asked for                             |
//! | a, b       | 8 + 8 | the kind's numbers (region length, sizes)       |
//! | message    | rest  | UTF-8, for the kinds that carry text            |
//!
//! The region, offset and length travel too because a fence reports the
//! first failed `nwrite`, which the fencing thread did not issue itself.

use mttl_comm::Rank;

use crate::wire::{Fields, HeaderBuf};

/// A global-memory access that failed: at the caller (null pointer, no such
/// rank) or at the owner, which checks every access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalError {
    /// The rank the pointer names (the owner of the memory).
    pub rank: Rank,
    /// The region the pointer names.
    pub region: u32,
    /// The byte offset in the region.
    pub offset: u64,
    /// How many bytes were to be read or written.
    pub len: u64,
    /// What was attempted: `"read"`, `"write"`, `"nwrite"`, `"fetch_add"`,
    /// `"invoke of app::bump"`...
    pub op: &'static str,
    /// What went wrong.
    pub kind: GlobalErrorKind,
}

impl std::fmt::Display for GlobalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let GlobalError {
            rank,
            region,
            offset,
            len,
            op,
            kind,
        } = self;
        if *op == "invoke_nowait" {
            // A call touches no region.
            return write!(f, "{op} on rank {rank} failed: {kind}");
        }
        write!(
            f,
            "{op} of {len} bytes at byte offset {offset} of region {region:#x} on rank {rank} failed: {kind}"
        )
    }
}

impl std::error::Error for GlobalError {}

/// What went wrong with a global-memory access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GlobalErrorKind {
    /// The pointer is null.
    #[error("the pointer is null")]
    Null,
    /// The pointer names a rank outside the job.
    #[error("that rank does not exist (the job has {size} ranks)")]
    NoSuchRank {
        /// The job's size.
        size: usize,
    },
    /// No region with this id was ever registered at the owner.
    #[error("no such region was ever registered there (a made-up or corrupted pointer?)")]
    UnknownRegion,
    /// The region was registered, then freed.
    #[error("the region was freed (its GlobalArray or GlobalObject was dropped)")]
    Freed,
    /// The access does not fit in the region.
    #[error("out of bounds: the region holds {region_len} bytes")]
    OutOfBounds {
        /// The region's size in bytes.
        region_len: u64,
    },
    /// The pointer's element type has another size than the region's.
    #[error(
        "wrong element type: the region holds elements of {region_elem} bytes, \
         the pointer's have {ptr_elem} bytes"
    )]
    WrongType {
        /// `size_of` the region's element type.
        region_elem: u64,
        /// `size_of` the pointer's element type (65535 means "65535 or more").
        ptr_elem: u64,
    },
    /// The offset or length is not a whole number of elements.
    #[error("not a whole number of elements of {elem} bytes")]
    Misaligned {
        /// `size_of` the region's element type.
        elem: u64,
    },
    /// A local access found the region borrowed by a live `GlobalRef` or
    /// `GlobalRefMut` of its own rank (local accesses never wait).
    #[error(
        "the region is borrowed on its own rank (a GlobalRef/GlobalRefMut guard is live there); \
         drop the guard before accessing the memory through a GlobalPtr"
    )]
    Borrowed,
    /// A member function could not be run (not registered, not a member
    /// function, wrong object type, undecodable arguments or result).
    #[error("{0}")]
    Method(String),
    /// The member function, or the `invoke_nowait` call, panicked; the
    /// message names it and says where.
    #[error("{0}")]
    Panicked(String),
    /// The reply made no sense (a runtime bug or mismatched programs).
    #[error("malformed reply: {0}")]
    Protocol(String),
}

impl GlobalErrorKind {
    fn code(&self) -> u8 {
        match self {
            GlobalErrorKind::Null => 0,
            GlobalErrorKind::NoSuchRank { .. } => 1,
            GlobalErrorKind::UnknownRegion => 2,
            GlobalErrorKind::Freed => 3,
            GlobalErrorKind::OutOfBounds { .. } => 4,
            GlobalErrorKind::WrongType { .. } => 5,
            GlobalErrorKind::Misaligned { .. } => 6,
            GlobalErrorKind::Borrowed => 7,
            GlobalErrorKind::Method(_) => 8,
            GlobalErrorKind::Panicked(_) => 9,
            GlobalErrorKind::Protocol(_) => 10,
        }
    }

    fn numbers(&self) -> (u64, u64) {
        match *self {
            GlobalErrorKind::NoSuchRank { size } => (size as u64, 0),
            GlobalErrorKind::OutOfBounds { region_len } => (region_len, 0),
            GlobalErrorKind::WrongType {
                region_elem,
                ptr_elem,
            } => (region_elem, ptr_elem),
            GlobalErrorKind::Misaligned { elem } => (elem, 0),
            _ => (0, 0),
        }
    }

    fn text(&self) -> &str {
        match self {
            GlobalErrorKind::Method(s)
            | GlobalErrorKind::Panicked(s)
            | GlobalErrorKind::Protocol(s) => s,
            _ => "",
        }
    }

    fn from_parts(code: u8, a: u64, b: u64, text: String) -> GlobalErrorKind {
        match code {
            0 => GlobalErrorKind::Null,
            1 => GlobalErrorKind::NoSuchRank { size: a as usize },
            2 => GlobalErrorKind::UnknownRegion,
            3 => GlobalErrorKind::Freed,
            4 => GlobalErrorKind::OutOfBounds { region_len: a },
            5 => GlobalErrorKind::WrongType {
                region_elem: a,
                ptr_elem: b,
            },
            6 => GlobalErrorKind::Misaligned { elem: a },
            7 => GlobalErrorKind::Borrowed,
            8 => GlobalErrorKind::Method(text),
            9 => GlobalErrorKind::Panicked(text),
            10 => GlobalErrorKind::Protocol(text),
            other => GlobalErrorKind::Protocol(format!("unknown error code {other}: {text}")),
        }
    }
}

/// The length of the fixed fields of an error body.
const FIXED: usize = 1 + 4 + 8 + 8 + 8 + 8;

/// What an owner found wrong, before the caller's side names the rank and
/// the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub(crate) region: u32,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) kind: GlobalErrorKind,
}

impl Fault {
    /// The body of a `STATUS_ERROR` reply (see the module docs).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let (a, b) = self.kind.numbers();
        let mut bytes = HeaderBuf::with_capacity(FIXED + self.kind.text().len())
            .u8(self.kind.code())
            .u32(self.region)
            .u64(self.offset)
            .u64(self.len)
            .u64(a)
            .u64(b)
            .bytes;
        bytes.extend_from_slice(self.kind.text().as_bytes());
        bytes
    }

    /// Reads a `STATUS_ERROR` body.
    pub(crate) fn decode(body: &[u8]) -> Fault {
        if body.len() < FIXED {
            return Fault {
                region: 0,
                offset: 0,
                len: 0,
                kind: GlobalErrorKind::Protocol(format!(
                    "an error reply of {} bytes (at least {FIXED} expected): {}",
                    body.len(),
                    String::from_utf8_lossy(body)
                )),
            };
        }
        let mut f = Fields(&body[..FIXED]);
        let code = f.u8();
        let region = f.u32();
        let offset = f.u64();
        let len = f.u64();
        let (a, b) = (f.u64(), f.u64());
        let text = String::from_utf8_lossy(&body[FIXED..]).into_owned();
        Fault {
            region,
            offset,
            len,
            kind: GlobalErrorKind::from_parts(code, a, b, text),
        }
    }

    /// The error as the caller reports it.
    pub(crate) fn at(self, rank: Rank, op: &'static str) -> GlobalError {
        GlobalError {
            rank,
            region: self.region,
            offset: self.offset,
            len: self.len,
            op,
            kind: self.kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_the_wire() {
        let kinds = [
            GlobalErrorKind::Null,
            GlobalErrorKind::NoSuchRank { size: 4 },
            GlobalErrorKind::UnknownRegion,
            GlobalErrorKind::Freed,
            GlobalErrorKind::OutOfBounds { region_len: 80 },
            GlobalErrorKind::WrongType {
                region_elem: 4,
                ptr_elem: 8,
            },
            GlobalErrorKind::Misaligned { elem: 12 },
            GlobalErrorKind::Borrowed,
            GlobalErrorKind::Method("app::f is not a member function".into()),
            GlobalErrorKind::Panicked("remote function app::f panicked: boom".into()),
            GlobalErrorKind::Protocol("odd".into()),
        ];
        for kind in kinds {
            let fault = Fault {
                region: 0x0010_0003,
                offset: 16,
                len: 8,
                kind,
            };
            assert_eq!(Fault::decode(&fault.encode()), fault);
        }
    }

    #[test]
    fn a_short_body_is_a_protocol_error() {
        let f = Fault::decode(b"abc");
        assert!(matches!(f.kind, GlobalErrorKind::Protocol(_)), "{f:?}");
    }

    #[test]
    fn the_message_names_rank_region_offset_and_len() {
        let e = Fault {
            region: 0x0010_0003,
            offset: 24,
            len: 8,
            kind: GlobalErrorKind::OutOfBounds { region_len: 16 },
        }
        .at(2, "read");
        assert_eq!(
            e.to_string(),
            "read of 8 bytes at byte offset 24 of region 0x100003 on rank 2 failed: \
             out of bounds: the region holds 16 bytes"
        );
    }
}
