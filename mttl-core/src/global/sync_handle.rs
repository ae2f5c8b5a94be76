//! [`GlobalSync`], the handle through which other nodes write into a
//! [`SyncCell`]. It lives with global memory because its writes are fenced
//! like `nwrite`s: each counts for the writer's next [`fence`](crate::fence).

use std::fmt;
use std::marker::PhantomData;

use mttl_comm::Rank;

use super::with_memory;
use crate::codec::{self, Decode, Encode};
use crate::context;
use crate::sync::{self, SyncCell};
use crate::wire;

impl<T: Decode<()> + 'static> SyncCell<T> {
    /// Makes this cell writable from every node and returns its global
    /// handle (the same handle every time). The cell stays reachable while
    /// any local handle to it lives; a write that arrives after that is
    /// lost, and the cell's rank says so on stderr (`a write from rank R
    /// was lost: cell C does not exist ...`).
    pub fn global(&self) -> GlobalSync<T> {
        GlobalSync {
            node: context::rank() as u32,
            slot: self.global_slot(),
            _value: PhantomData,
        }
    }
}

/// The global handle of a [`SyncCell`]: writable from any node. Plain data:
/// pass it to other nodes as an argument of `invoke`.
pub struct GlobalSync<T> {
    node: u32,
    slot: u32,
    _value: PhantomData<fn(T)>,
}

impl<T> Clone for GlobalSync<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for GlobalSync<T> {}

impl<T> fmt::Debug for GlobalSync<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GlobalSync(node {}, cell {})", self.node, self.slot)
    }
}

impl<T> PartialEq for GlobalSync<T> {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node && self.slot == other.slot
    }
}

impl<T> Encode for GlobalSync<T> {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        self.node.encode(e)?;
        self.slot.encode(e)
    }
}

impl<T, C> Decode<C> for GlobalSync<T> {
    fn decode<D: bincode::de::Decoder<Context = C>>(
        d: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        Ok(GlobalSync {
            node: u32::decode(d)?,
            slot: u32::decode(d)?,
            _value: PhantomData,
        })
    }
}

impl<T: Encode> GlobalSync<T> {
    /// The node that owns the cell.
    pub fn node(&self) -> Rank {
        self.node as Rank
    }

    /// Appends `value` to the cell at its node (does not wait for it to
    /// arrive; per-pair order is kept). Like an `nwrite`, it is done at its
    /// node once this node's next [`fence`](crate::fence) (or
    /// [`barrier`](crate::barrier)) returns.
    ///
    /// # Panics
    ///
    /// Panics if the value cannot be encoded or the cell's node is gone.
    #[track_caller]
    pub fn write(&self, value: T) {
        let mut body = Vec::new();
        if let Err(e) = codec::encode_into(&value, &mut body) {
            panic!("GlobalSync::write: {e}");
        }
        let node = self.node as Rank;
        sync::write_cell(node, self.slot, wire::STATUS_OK, &body);
        if node != context::rank() {
            with_memory(|global| global.note_nwrite(node));
        }
    }
}
