//! Who talks to whom: the communication schedules of the collectives, as
//! pure rank arithmetic on `0..n` (no messages here).
//!
//! - **Binomial tree** rooted at 0 (other roots use ranks relative to the
//!   root). The parent of `v > 0` is `v` with its lowest set bit cleared;
//!   the children of `v` are `v + 2^k` for every `2^k` below that bit (below
//!   `n` for the root). The subtree of `v` is the contiguous range
//!   `v .. v + lowbit(v)` (clipped to `n`), and the child `v + 2^k` holds
//!   the range `v + 2^k .. v + 2^(k+1)`: combining children in increasing
//!   `k` keeps rank order.
//! - **Recursive doubling** on the virtual power of two `P >= n`: in round
//!   `k` (stride `s = 2^k`) every node holds the result of its aligned block
//!   of `s` ranks and combines it with the neighbouring block (`me ^ s`'s).
//!   A neighbouring block entirely at or beyond `n` is empty: nothing to
//!   receive. A block that is only partly real has some holder missing; the
//!   node that would have talked to it receives from the block's real node
//!   `lo + (me mod s) mod m` instead (`lo` the block's start, `m` its real
//!   nodes), and that node sends to every node it stands in for. So every
//!   node ends with the same bracketing as the binomial tree's reduction:
//!   `R(lo, 2s) = R(lo, s) ⊕ R(lo + s, s)`, the right part dropped when it
//!   is empty, over the whole of `0..P`.
//! - **Dissemination**: in round `k`, node `i` signals `i + 2^k` and waits
//!   for `i - 2^k` (mod `n`); after `ceil(log2 n)` rounds every node has
//!   heard, transitively, from every node.

use mttl_comm::Rank;

/// The strides `1, 2, 4, ...` below `n`: one per round of recursive
/// doubling and dissemination (`ceil(log2 n)` of them).
pub(super) fn strides(n: usize) -> impl Iterator<Item = usize> {
    (0..usize::BITS)
        .map(|k| 1usize << k)
        .take_while(move |&s| s < n)
}

/// The number of tree levels below `v`: `lowbit(v)`'s exponent, or
/// `ceil(log2 n)` for the root.
fn levels(v: Rank, n: usize) -> u32 {
    if v == 0 {
        n.next_power_of_two().trailing_zeros()
    } else {
        v.trailing_zeros()
    }
}

/// The parent of `v > 0` in the binomial tree rooted at 0.
pub(super) fn tree_parent(v: Rank) -> Rank {
    v & (v - 1)
}

/// The children of `v` in the binomial tree on `0..n` rooted at 0, the
/// smallest subtree (the next rank) first.
pub(super) fn tree_children(v: Rank, n: usize) -> impl DoubleEndedIterator<Item = Rank> {
    (0..levels(v, n))
        .map(move |k| v + (1 << k))
        .filter(move |&c| c < n)
}

/// `me`'s rank relative to `root`.
pub(super) fn relative(me: Rank, root: Rank, n: usize) -> Rank {
    (me + n - root) % n
}

/// The absolute rank of relative rank `v`.
pub(super) fn absolute(v: Rank, root: Rank, n: usize) -> Rank {
    (v + root) % n
}

/// Recursive doubling, round of stride `s`: the node `me` receives the
/// neighbouring block's result from, or `None` if that block is empty.
pub(super) fn doubling_source(me: Rank, n: usize, s: usize) -> Option<Rank> {
    let lo = (me ^ s) & !(s - 1);
    if lo >= n {
        return None;
    }
    let real = (n - lo).min(s);
    Some(lo + (me & (s - 1)) % real)
}

/// Recursive doubling, round of stride `s`: the nodes `me` sends its
/// block's result to (those whose [`doubling_source`] is `me`).
pub(super) fn doubling_dests(me: Rank, n: usize, s: usize) -> impl Iterator<Item = Rank> {
    let mine = me & !(s - 1);
    let real = (n - mine).min(s);
    let theirs = (me ^ s) & !(s - 1);
    (me - mine..s)
        .step_by(real)
        .map(move |offset| theirs + offset)
        .filter(move |&d| d < n)
}

/// Whether the neighbouring block of round `s` holds higher ranks than
/// `me`'s (its result goes on the right of `⊕`).
pub(super) fn doubling_upper(me: Rank, s: usize) -> bool {
    me & s == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binomial tree's reduction of ranks `lo..lo + len` (clipped to
    /// `n`), written out with its brackets.
    fn bracketed(lo: usize, len: usize, n: usize) -> String {
        if len == 1 {
            return lo.to_string();
        }
        let half = len / 2;
        if lo + half >= n {
            return bracketed(lo, half, n);
        }
        format!(
            "({}+{})",
            bracketed(lo, half, n),
            bracketed(lo + half, half, n)
        )
    }

    fn tree_reduce(v: usize, n: usize) -> String {
        let mut acc = v.to_string();
        for c in tree_children(v, n) {
            acc = format!("({acc}+{})", tree_reduce(c, n));
        }
        acc
    }

    #[test]
    fn tree_is_a_spanning_tree_of_contiguous_subtrees() {
        for n in 1..=70 {
            let mut seen = vec![0; n];
            seen[0] += 1;
            for v in 0..n {
                for c in tree_children(v, n) {
                    assert_eq!(tree_parent(c), v, "n={n}");
                    seen[c] += 1;
                }
            }
            assert!(seen.iter().all(|&k| k == 1), "n={n}: {seen:?}");
            assert_eq!(tree_reduce(0, n), bracketed(0, n.next_power_of_two(), n));
        }
    }

    #[test]
    fn doubling_matches_the_tree_on_every_node() {
        for n in 1..=70 {
            let mut value: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            for s in strides(n) {
                // Sources and destinations agree: one message per receiver.
                for me in 0..n {
                    for d in doubling_dests(me, n, s) {
                        assert_eq!(doubling_source(d, n, s), Some(me), "n={n} s={s}");
                    }
                    if let Some(src) = doubling_source(me, n, s) {
                        assert!(doubling_dests(src, n, s).any(|d| d == me), "n={n} s={s}");
                        assert_ne!(src, me);
                    }
                }
                let before = value.clone();
                for (me, v) in value.iter_mut().enumerate() {
                    if let Some(src) = doubling_source(me, n, s) {
                        *v = if doubling_upper(me, s) {
                            format!("({v}+{})", before[src])
                        } else {
                            format!("({}+{v})", before[src])
                        };
                    }
                }
            }
            let expect = tree_reduce(0, n);
            assert!(value.iter().all(|v| *v == expect), "n={n}: {value:?}");
        }
    }

    /// In every round, recursive doubling sends only to ranks of the job,
    /// and each rank that has a source is sent to exactly once.
    #[test]
    fn doubling_sends_once_to_each_receiver_and_only_within_the_job() {
        for n in 1..=70 {
            for s in strides(n) {
                let mut received = vec![0; n];
                for me in 0..n {
                    for d in doubling_dests(me, n, s) {
                        assert!(d < n, "n={n} s={s}: rank {me} sends to {d}");
                        received[d] += 1;
                    }
                }
                for (d, &k) in received.iter().enumerate() {
                    let expect = usize::from(doubling_source(d, n, s).is_some());
                    assert_eq!(k, expect, "n={n} s={s}: rank {d} is sent to {k} times");
                }
            }
        }
    }

    #[test]
    fn dissemination_reaches_everyone() {
        for n in 1..=70 {
            let mut heard: Vec<Vec<bool>> =
                (0..n).map(|i| (0..n).map(|j| i == j).collect()).collect();
            for s in strides(n) {
                let before = heard.clone();
                for (me, h) in heard.iter_mut().enumerate() {
                    let from = (me + n - s) % n;
                    for (j, x) in h.iter_mut().enumerate() {
                        *x |= before[from][j];
                    }
                }
            }
            assert!(heard.iter().flatten().all(|&x| x), "n={n}");
        }
    }

    /// Recursive doubling and dissemination take the documented
    /// `ceil(log2 n)` rounds, strides `1, 2, 4, ...`: not one more (a power
    /// of two needs no extra round), not one fewer.
    #[test]
    fn rounds_are_ceil_log2_n() {
        for n in 1..=300usize {
            let rounds = n.next_power_of_two().trailing_zeros() as usize;
            let got: Vec<usize> = strides(n).collect();
            let expect: Vec<usize> = (0..rounds).map(|k| 1 << k).collect();
            assert_eq!(got, expect, "n={n}");
        }
        assert_eq!(strides(1 << 20).count(), 20);
        assert_eq!(strides((1 << 20) + 1).count(), 21);
    }

    /// The root's children are `2^k` for every `2^k` below `n`; any other
    /// node's stop below its lowest set bit.
    #[test]
    fn tree_children_are_as_documented() {
        let children = |v, n| tree_children(v, n).collect::<Vec<_>>();
        assert_eq!(children(0, 1), Vec::<usize>::new());
        assert_eq!(children(0, 8), vec![1, 2, 4]);
        assert_eq!(children(0, 9), vec![1, 2, 4, 8]);
        assert_eq!(children(8, 16), vec![9, 10, 12]);
        assert_eq!(children(8, 11), vec![9, 10]);
        assert_eq!(children(6, 16), vec![7]);
        assert_eq!(children(5, 16), Vec::<usize>::new());
        assert_eq!(tree_parent(12), 8);
        assert_eq!(tree_parent(7), 6);
    }

    #[test]
    fn relative_ranks_round_trip() {
        for n in 1..9 {
            for root in 0..n {
                for me in 0..n {
                    assert_eq!(absolute(relative(me, root, n), root, n), me);
                }
                assert_eq!(relative(root, root, n), 0);
            }
        }
    }
}
