//! The order in which operations that become executable together are issued.
//!
//! The reference simulator issues them sorted by kind (sends, then receives,
//! then computations) with C++'s `std::sort`, which is not stable: among
//! operations of one kind, the issue order — and therefore which of two
//! simultaneous sends gets the CPU first, or which receive a message matches —
//! is whatever the GNU library's introsort leaves. To give identical times we
//! reproduce that algorithm's element moves (introsort with median-of-three
//! pivots, a depth limit of twice the binary logarithm, heap sort past the
//! limit, and a final insertion sort in runs of 16). On up to 16 elements it
//! is a plain insertion sort, hence stable.

/// Elements per run below which introsort leaves the rest to insertion sort.
const THRESHOLD: usize = 16;

/// Sorts `v` by `key` (ascending) leaving ties where GNU `std::sort` would.
pub(crate) fn sort_by_key_like_gnu<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let less = |a: &T, b: &T| key(a) < key(b);
    if v.len() < 2 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
    introsort_loop(v, depth, &less);
    final_insertion_sort(v, &less);
}

fn introsort_loop<T: Copy>(mut v: &mut [T], mut depth: usize, less: &impl Fn(&T, &T) -> bool) {
    while v.len() > THRESHOLD {
        if depth == 0 {
            heap_sort(v, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, less);
        let (lo, hi) = v.split_at_mut(cut);
        introsort_loop(hi, depth, less);
        v = lo;
    }
}

/// Moves the median of `v[1]`, the middle and the last element to `v[0]`,
/// then partitions `v[1..]` around it; returns the cut.
fn partition_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> usize {
    let (a, b, c) = (1, v.len() / 2, v.len() - 1);
    let m = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, m);
    // Hoare partition of v[1..] around v[0]; the pivot stays in place and
    // bounds both scans, so no index checks are needed beyond the slice's.
    let (mut first, mut last) = (1, v.len());
    loop {
        while less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let x = v[i];
            v.copy_within(0..i, 1);
            v[0] = x;
        } else {
            linear_insert(v, i, less);
        }
    }
}

/// Moves `v[i]` left past the elements greater than it (one smaller-or-equal
/// element is known to exist to its left).
fn linear_insert<T: Copy>(v: &mut [T], mut i: usize, less: &impl Fn(&T, &T) -> bool) {
    let x = v[i];
    while i > 0 && less(&x, &v[i - 1]) {
        v[i] = v[i - 1];
        i -= 1;
    }
    v[i] = x;
}

fn heap_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    // Build the max-heap from the last parent down.
    let mut parent = (len - 2) / 2;
    loop {
        let x = v[parent];
        adjust_heap(v, parent, len, x, less);
        if parent == 0 {
            break;
        }
        parent -= 1;
    }
    // Pop the maximum to the end, one by one.
    let mut end = len;
    while end > 1 {
        end -= 1;
        let x = v[end];
        v[end] = v[0];
        adjust_heap(v, 0, end, x, less);
    }
}

/// Sifts a hole at `hole` down to a leaf along the larger children, then
/// pushes `x` up from there (the GNU heap's two-phase sift).
fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    len: usize,
    x: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len % 2 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    let mut parent = hole.wrapping_sub(1) / 2;
    while hole > top && less(&v[parent], &x) {
        v[hole] = v[parent];
        hole = parent;
        parent = hole.wrapping_sub(1) / 2;
    }
    v[hole] = x;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so the tests need no dependency.
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn sorts_by_key_at_every_length() {
        let mut seed = 7;
        for n in 0..300 {
            let mut v: Vec<(u8, usize)> = (0..n).map(|i| ((lcg(&mut seed) % 3) as u8, i)).collect();
            sort_by_key_like_gnu(&mut v, |e| e.0);
            assert!(v.windows(2).all(|w| w[0].0 <= w[1].0), "n = {n}");
            let mut ids: Vec<usize> = v.iter().map(|e| e.1).collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn short_runs_are_stable() {
        let mut v: Vec<(u8, usize)> = (0..16).map(|i| ((i % 3) as u8, i)).collect();
        sort_by_key_like_gnu(&mut v, |e| e.0);
        for w in v.windows(2) {
            assert!(w[0].0 < w[1].0 || w[0].1 < w[1].1);
        }
    }

    #[test]
    fn heap_sort_sorts() {
        let mut seed = 3;
        for n in 2..100 {
            let mut v: Vec<u64> = (0..n).map(|_| lcg(&mut seed) % 5).collect();
            heap_sort(&mut v, &|a: &u64, b: &u64| a < b);
            assert!(v.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
