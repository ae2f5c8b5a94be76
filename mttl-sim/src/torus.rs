//! The topology mode: ranks on a torus, messages on dimension-ordered
//! routes over links they share.
//!
//! The model (`docs/simulator.md` states it for users):
//! 1. Rank r sits on node r of a torus of dimensions d0 × d1 × …, node
//!    numbers running fastest in the first dimension: coordinate
//!    `c_i = (r / (d0·…·d(i-1))) mod d_i`. There may be more nodes than
//!    ranks, not fewer.
//! 2. A message goes dimension by dimension, first to last, each the short
//!    way round the ring (the positive way on a tie): one hop per step, and
//!    each hop uses one directed link.
//! 3. Its head enters its first link when it leaves the sender (send time +
//!    o); a link carries one message at a time and is busy for `G · size`
//!    after the head enters it (the NIC's per-byte gap, so a link is as fast
//!    as a NIC). The head enters a link when it reaches it and the link is
//!    free, and reaches the next router `hop latency` later (cut-through: it
//!    need not wait for its tail).
//! 4. Links are granted in the order messages are sent (the engine handles
//!    sends in time order), and a message reserves its whole route when it
//!    is sent; so a later-sent message never overtakes an earlier one on a
//!    link, even if it could have reached that link first.
//! 5. The message arrives at `send time + o + L + (time from entering the
//!    first link to reaching the last router)`, which without contention is
//!    `L + hops · hop latency` after it left: L stays the end-to-end
//!    latency of the endpoints (ejection and injection), as in LogGOPS.
//!
//! Memory is one clock per directed link: 2 · dimensions per node.

use crate::params::per_byte;

/// A torus and the time each of its directed links is next free.
#[derive(Clone, Debug)]
pub struct Torus {
    dims: Vec<u32>,
    hop_latency: u64,
    /// Per node, per dimension, positive then negative direction.
    link_free: Vec<u64>,
}

/// Why a torus cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TorusError {
    /// The dimensions are not a list like `8x8x16`.
    #[error("torus dimensions `{0}`: expected sizes of at least 1 separated by `x`, like 8x8x16")]
    BadDims(String),
    /// Fewer nodes than ranks.
    #[error("a torus of {dims} has {nodes} nodes, but the schedule has {ranks} ranks")]
    TooSmall {
        /// The dimensions as given.
        dims: String,
        /// Their product.
        nodes: u64,
        /// Ranks of the schedule.
        ranks: usize,
    },
}

impl Torus {
    /// Parses `AxBxC` dimensions.
    pub fn parse_dims(text: &str) -> Result<Vec<u32>, TorusError> {
        let dims: Option<Vec<u32>> = text
            .split('x')
            .map(|d| d.trim().parse().ok().filter(|&d| d >= 1))
            .collect();
        match dims {
            Some(d) if !d.is_empty() && d.len() <= 8 => Ok(d),
            _ => Err(TorusError::BadDims(text.to_string())),
        }
    }

    /// Dimensions for `ranks` ranks on a 3-D torus as close to a cube as
    /// the rank count's factors allow (used when a profile needs a torus
    /// and none was given).
    pub fn cube_for(ranks: usize) -> Vec<u32> {
        let n = ranks.max(1) as u64;
        let mut best = vec![n as u32, 1, 1];
        let mut best_spread = u64::MAX;
        let mut a = 1u64;
        while a * a * a <= n {
            if n % a == 0 {
                let rest = n / a;
                let mut b = a;
                while b * b <= rest {
                    if rest % b == 0 {
                        let c = rest / b;
                        if c - a < best_spread {
                            best_spread = c - a;
                            best = vec![c as u32, b as u32, a as u32];
                        }
                    }
                    b += 1;
                }
            }
            a += 1;
        }
        best
    }

    /// A torus of `dims` for `ranks` ranks with `hop_latency` ns per hop.
    pub fn new(dims: Vec<u32>, hop_latency: u64, ranks: usize) -> Result<Torus, TorusError> {
        let nodes = dims.iter().map(|&d| u64::from(d)).product::<u64>();
        let shown = || {
            dims.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x")
        };
        if nodes < ranks as u64 {
            return Err(TorusError::TooSmall {
                dims: shown(),
                nodes,
                ranks,
            });
        }
        // Links of the nodes that hold ranks or lie on routes: all of them.
        let links = usize::try_from(nodes)
            .ok()
            .and_then(|n| n.checked_mul(2 * dims.len()))
            .filter(|&l| l <= 1 << 32)
            .ok_or_else(|| TorusError::BadDims(shown()))?;
        Ok(Torus {
            link_free: vec![0; links],
            dims,
            hop_latency,
        })
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// Latency per hop, ns.
    pub fn hop_latency(&self) -> u64 {
        self.hop_latency
    }

    /// Hops from `src` to `dst` (step 2).
    pub fn hops(&self, src: u32, dst: u32) -> u64 {
        let mut total = 0;
        self.walk(src, dst, |_| total += 1);
        total
    }

    /// Calls `link` with the index of every directed link on the route.
    fn walk(&self, src: u32, dst: u32, mut link: impl FnMut(usize)) {
        let ndims = self.dims.len();
        let (mut node, mut stride) = (u64::from(src), 1u64);
        let (s, d) = (u64::from(src), u64::from(dst));
        for (i, &size) in self.dims.iter().enumerate() {
            let size = u64::from(size);
            let from = (s / stride) % size;
            let to = (d / stride) % size;
            let up = (to + size - from) % size;
            let (steps, positive) = if up <= size - up {
                (up, true)
            } else {
                (size - up, false)
            };
            let mut at = from;
            for _ in 0..steps {
                link(node as usize * 2 * ndims + 2 * i + usize::from(!positive));
                let next = if positive {
                    (at + 1) % size
                } else {
                    (at + size - 1) % size
                };
                node = node - at * stride + next * stride;
                at = next;
            }
            stride *= size;
        }
    }

    /// Step 3: a message of `bytes` bytes whose head enters the network at
    /// `inject`, with `g_ps` picoseconds per byte on each link; returns the
    /// time from `inject` until its head reaches the last router, and
    /// reserves the links.
    pub(crate) fn route(&mut self, src: u32, dst: u32, inject: u64, bytes: u64, g_ps: u64) -> u64 {
        let busy = per_byte(bytes, g_ps);
        let hop = self.hop_latency;
        let mut at = inject;
        let mut links = std::mem::take(&mut self.link_free);
        self.walk(src, dst, |l| {
            let start = at.max(links[l]);
            links[l] = start.saturating_add(busy);
            at = start.saturating_add(hop);
        });
        self.link_free = links;
        at - inject
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimension_ordered_short_way_round() {
        let t = Torus::new(vec![4, 4], 10, 16).unwrap();
        assert_eq!(t.hops(0, 1), 1);
        assert_eq!(t.hops(0, 3), 1); // round the ring
        assert_eq!(t.hops(0, 2), 2);
        assert_eq!(t.hops(0, 10), 4); // (2, 2)
        assert_eq!(t.hops(5, 5), 0);
        // Route of 1 -> 14 = (2, 3): +x to (2, 0), then -y to (2, 3).
        let mut seen = Vec::new();
        t.walk(1, 14, |l| seen.push(l));
        assert_eq!(seen, vec![4, 2 * 4 + 3]);
    }

    #[test]
    fn a_shared_link_serialises_messages() {
        // 1 000 bytes at 1 ns per byte hold a link for 1 µs.
        let mut t = Torus::new(vec![8], 50, 8).unwrap();
        assert_eq!(t.route(0, 2, 0, 1000, 1000), 100);
        // The same route again at once: waits for the first link (1000),
        // then for the second (free at 1050) it is already late enough.
        assert_eq!(t.route(0, 2, 0, 1000, 1000), 1100);
        // The opposite direction is another link: no wait.
        assert_eq!(t.route(2, 0, 0, 1000, 1000), 100);
    }

    #[test]
    fn bad_dimensions_are_errors() {
        assert!(Torus::parse_dims("4x0").is_err());
        assert!(Torus::parse_dims("4xx4").is_err());
        assert!(Torus::parse_dims("").is_err());
        assert_eq!(Torus::parse_dims("2x3x4"), Ok(vec![2, 3, 4]));
        assert_eq!(
            Torus::new(vec![2, 2], 1, 5).unwrap_err().to_string(),
            "a torus of 2x2 has 4 nodes, but the schedule has 5 ranks"
        );
    }

    #[test]
    fn cube_dimensions_multiply_to_the_rank_count() {
        assert_eq!(Torus::cube_for(64), vec![4, 4, 4]);
        assert_eq!(Torus::cube_for(1024), vec![16, 8, 8]);
        assert_eq!(Torus::cube_for(7), vec![7, 1, 1]);
        for n in 1..200 {
            let d = Torus::cube_for(n);
            assert_eq!(d.iter().map(|&x| x as usize).product::<usize>(), n);
        }
    }
}
