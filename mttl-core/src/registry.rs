//! The remote-function registry.
//!
//! Function pointers differ between processes, so a function callable from
//! another process is known by a stable id: the FNV-1a hash of its full path
//! and signature, computed at compile time by `#[mttl::remote]`, which also
//! submits a [`RemoteFn`] entry to this registry with `inventory` (at link
//! time, no start-up code).
//!
//! At start-up every rank sends rank 0 a digest of its registry; rank 0
//! compares them and, on a mismatch (ranks built from different sources),
//! stops the job with a message naming the functions that differ.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::OnceLock;

/// What a registered function does with an encoded request: decodes the
/// arguments, runs, encodes the result. `Err` means the arguments could not
/// be decoded (a panic inside is caught by the runtime around the call).
pub type Trampoline = fn(args: &[u8]) -> Result<Vec<u8>, String>;

/// A member function: like [`Trampoline`] with the bytes of the object it
/// runs on (a global object of plain data, at its owner).
pub type MethodTrampoline = fn(object: &mut [u8], args: &[u8]) -> Result<Vec<u8>, String>;

/// How a registered function is called.
#[derive(Debug, Clone, Copy)]
pub enum Callable {
    /// A free function.
    Free(Trampoline),
    /// A member function on a global object of `object_size` bytes.
    Method {
        /// The trampoline.
        call: MethodTrampoline,
        /// `size_of` the object type.
        object_size: usize,
    },
}

/// One function registered by `#[mttl::remote]`.
#[derive(Debug)]
pub struct RemoteFn {
    /// Full path, e.g. `my_crate::solver::step`.
    pub name: &'static str,
    /// The signature as written, e.g. `fn(i32, i32) -> i32`.
    pub signature: &'static str,
    /// FNV-1a of `name` and `signature`.
    pub id: u64,
    /// The `TypeId` of the function's [`RemoteFunction`](crate::RemoteFunction)
    /// constant, to find the entry from it.
    pub type_id: fn() -> TypeId,
    /// How to call it.
    pub callable: Callable,
}

inventory::collect!(RemoteFn);

/// FNV-1a over `parts`, usable in constants.
pub const fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut p = 0;
    while p < parts.len() {
        let bytes = parts[p].as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            h ^= bytes[i] as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
            i += 1;
        }
        // Separate the parts so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x100_0000_01b3);
        p += 1;
    }
    h
}

/// The registry, indexed.
#[derive(Debug)]
pub(crate) struct Registry {
    by_id: HashMap<u64, &'static RemoteFn>,
    by_type: HashMap<TypeId, &'static RemoteFn>,
    /// `(id, "name signature")`, sorted by id.
    listing: Vec<(u64, String)>,
    digest: u64,
}

impl Registry {
    fn build() -> Result<Registry, String> {
        let mut by_id = HashMap::new();
        let mut by_type = HashMap::new();
        for f in inventory::iter::<RemoteFn> {
            if let Some(other) = by_id.insert(f.id, f) {
                if other.name != f.name || other.signature != f.signature {
                    return Err(format!(
                        "two remote functions share the id {:#x}: {} and {}",
                        f.id, other.name, f.name
                    ));
                }
            }
            by_type.insert((f.type_id)(), f);
        }
        let mut listing: Vec<(u64, String)> = by_id
            .values()
            .map(|f| (f.id, format!("{} {}", f.name, f.signature)))
            .collect();
        listing.sort();
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        for (id, _) in &listing {
            for b in id.to_le_bytes() {
                digest ^= u64::from(b);
                digest = digest.wrapping_mul(0x100_0000_01b3);
            }
        }
        Ok(Registry {
            by_id,
            by_type,
            listing,
            digest,
        })
    }

    /// The registry of this process (built on first use).
    pub(crate) fn get() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| match Registry::build() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mttl: {e}");
                std::process::exit(2);
            }
        })
    }

    pub(crate) fn by_id(&self, id: u64) -> Option<&'static RemoteFn> {
        self.by_id.get(&id).copied()
    }

    pub(crate) fn by_type(&self, t: TypeId) -> Option<&'static RemoteFn> {
        self.by_type.get(&t).copied()
    }

    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// The listing sent to rank 0 for comparison: one `id name signature`
    /// line per function.
    pub(crate) fn listing(&self) -> String {
        self.listing
            .iter()
            .map(|(id, n)| format!("{id:016x} {n}\n"))
            .collect()
    }

    /// Explains how a peer's listing differs from ours.
    pub(crate) fn explain_mismatch(&self, rank: usize, theirs: &str) -> String {
        let ours: Vec<&str> = self.listing.iter().map(|(_, n)| n.as_str()).collect();
        let theirs: Vec<&str> = theirs
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(_, n)| n))
            .collect();
        let only_ours: Vec<&str> = ours
            .iter()
            .filter(|n| !theirs.contains(n))
            .copied()
            .collect();
        let only_theirs: Vec<&str> = theirs
            .iter()
            .filter(|n| !ours.contains(n))
            .copied()
            .collect();
        let mut msg = format!(
            "rank {rank} runs a different program than rank 0 (their remote functions differ; \
             were they built from the same sources?)"
        );
        if !only_ours.is_empty() {
            msg += &format!("\n  only on rank 0: {}", only_ours.join(", "));
        }
        if !only_theirs.is_empty() {
            msg += &format!("\n  only on rank {rank}: {}", only_theirs.join(", "));
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_separates_parts() {
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        assert_eq!(fnv1a(&["x", "y"]), fnv1a(&["x", "y"]));
    }

    #[test]
    fn mismatch_names_the_functions() {
        let r = Registry {
            by_id: HashMap::new(),
            by_type: HashMap::new(),
            listing: vec![(1, "a::f fn()".into()), (2, "a::g fn(i32)".into())],
            digest: 0,
        };
        let msg = r.explain_mismatch(
            3,
            "0000000000000001 a::f fn()\n0000000000000009 a::h fn()\n",
        );
        assert!(msg.contains("only on rank 0: a::g fn(i32)"), "{msg}");
        assert!(msg.contains("only on rank 3: a::h fn()"), "{msg}");
    }
}
