//! What every load scenario sends, and the checksums that prove it all
//! arrived: pure functions of a seed and an index, so that the
//! orchestrator (and the tests) compute what each rank must have received
//! without seeing a byte of the traffic.
//!
//! - `ainvoke`: rank `r`'s `k`th call has index `r << 40 | k`, goes to
//!   [`ainvoke_target`] and carries [`value`]`(seed, index)`; the callee adds
//!   the value to its sum and replies [`ainvoke_reply`].
//! - `threads`: local thread `i` is woken with [`value`]`(seed, i)` and
//!   returns [`thread_result`]; remote thread `i` takes whichever token of
//!   [`gate_token`]`(seed, 0..n)` comes next and returns [`mix64`]`(i)` plus
//!   the token, so the sum does not depend on the order of the wake-ups.
//! - `transfer`: word `i` of the data is [`value`]`(seed, i)`; a block's
//!   checksum weighs each word by its position ([`word_checksum`]), so a
//!   lost, duplicated or misplaced block changes it, and checksums of
//!   consecutive blocks add up to the checksum of the whole.

/// SplitMix64's finaliser: a bijective mix of 64 bits.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The `i`th value of stream `seed`.
pub(crate) fn value(seed: u64, i: u64) -> u64 {
    mix64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// How many of `total` calls rank `rank` of `size` makes.
pub(crate) fn ainvoke_calls(rank: usize, size: usize, total: u64) -> u64 {
    let size = size as u64;
    total / size + u64::from((rank as u64) < total % size)
}

/// The index of rank `rank`'s `k`th call.
pub(crate) fn ainvoke_index(rank: usize, k: u64) -> u64 {
    (rank as u64) << 40 | k
}

/// The rank that rank `rank`'s `k`th call goes to: every other rank in
/// turn, never `rank` itself.
pub(crate) fn ainvoke_target(rank: usize, size: usize, k: u64) -> usize {
    let others = (size - 1) as u64;
    (rank + 1 + (k % others) as usize) % size
}

/// What the callee answers to call `index` carrying `v`.
pub(crate) fn ainvoke_reply(index: u64, v: u64) -> u64 {
    v.rotate_left(17) ^ index
}

/// What `total` calls of a job of `size` ranks must leave behind: per
/// target rank the number of calls and the wrapping sum of their values,
/// and the wrapping sum of every reply.
pub(crate) fn ainvoke_expected(size: usize, total: u64, seed: u64) -> (Vec<(u64, u64)>, u64) {
    let mut served = vec![(0u64, 0u64); size];
    let mut replies = 0u64;
    for rank in 0..size {
        for k in 0..ainvoke_calls(rank, size, total) {
            let index = ainvoke_index(rank, k);
            let v = value(seed, index);
            let t = &mut served[ainvoke_target(rank, size, k)];
            t.0 += 1;
            t.1 = t.1.wrapping_add(v);
            replies = replies.wrapping_add(ainvoke_reply(index, v));
        }
    }
    (served, replies)
}

/// What local thread `i` returns when woken with `token`.
pub(crate) fn thread_result(i: u64, token: u64) -> u64 {
    mix64(token ^ i)
}

/// The `j`th token written to the gate the remote threads wait on.
pub(crate) fn gate_token(seed: u64, j: u64) -> u64 {
    value(!seed, j)
}

/// The checksums of `n` local threads and of `n` remote threads.
pub(crate) fn threads_expected(n: u64, seed: u64) -> (u64, u64) {
    let mut local = 0u64;
    let mut remote = 0u64;
    for i in 0..n {
        local = local.wrapping_add(thread_result(i, value(seed, i)));
        remote = remote
            .wrapping_add(mix64(i))
            .wrapping_add(gate_token(seed, i));
    }
    (local, remote)
}

/// Fills `words` with the data words starting at word `start`.
pub(crate) fn fill(seed: u64, start: u64, words: &mut [u64]) {
    for (i, w) in (start..).zip(words.iter_mut()) {
        *w = value(seed, i);
    }
}

/// The checksum of `words`, the data words starting at word `start`.
pub(crate) fn word_checksum(start: u64, words: &[u64]) -> u64 {
    let mut sum = 0u64;
    for (i, &w) in (start..).zip(words) {
        sum = sum.wrapping_add(w.wrapping_mul(2 * i + 1));
    }
    sum
}

/// [`word_checksum`] of little-endian bytes (a whole number of words).
pub(crate) fn byte_checksum(start: u64, bytes: &[u8]) -> u64 {
    let mut sum = 0u64;
    for (i, chunk) in (start..).zip(bytes.chunks_exact(8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        sum = sum.wrapping_add(u64::from_le_bytes(word).wrapping_mul(2 * i + 1));
    }
    sum
}

/// The checksum of the `bytes / 8` data words of stream `seed`.
pub(crate) fn transfer_expected(bytes: u64, seed: u64) -> u64 {
    let mut sum = 0u64;
    let mut block = vec![0u64; 1 << 16];
    let words = bytes / 8;
    let mut start = 0;
    while start < words {
        let n = (words - start).min(block.len() as u64) as usize;
        fill(seed, start, &mut block[..n]);
        sum = sum.wrapping_add(word_checksum(start, &block[..n]));
        start += n as u64;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_goes_to_another_rank_and_all_are_counted() {
        for size in 2..6 {
            for rank in 0..size {
                for k in 0..20 {
                    assert_ne!(ainvoke_target(rank, size, k), rank);
                }
            }
            let (served, _) = ainvoke_expected(size, 1001, 3);
            assert_eq!(served.iter().map(|s| s.0).sum::<u64>(), 1001);
        }
    }

    #[test]
    fn block_checksums_add_up_and_see_a_moved_block() {
        let mut words = vec![0u64; 100];
        fill(9, 0, &mut words);
        let whole = word_checksum(0, &words);
        assert_eq!(
            word_checksum(0, &words[..40]).wrapping_add(word_checksum(40, &words[40..])),
            whole
        );
        assert_eq!(transfer_expected(800, 9), whole);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(byte_checksum(0, &bytes), whole);
        words.swap(3, 70);
        assert_ne!(word_checksum(0, &words), whole);
    }
}
