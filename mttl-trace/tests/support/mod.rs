//! Trace files built with the format's own encoders, for the tests of the
//! reader and of the tool.

// Each test file uses part of this module.
#![allow(dead_code)]

use mttl_core::trace::format::*;

/// A trace file of rank `rank` of `size` in job `job_id`, format
/// `version`: `blocks` blocks of `per_block` sends each, then an end
/// block; returns it and the offsets where its blocks end.
pub(crate) fn build_for(
    job_id: u64,
    rank: u32,
    size: u32,
    version: u16,
    blocks: usize,
    per_block: usize,
) -> (Vec<u8>, Vec<usize>) {
    let header = FileHeader {
        version,
        status: STATUS_FINISHED,
        policy: 2,
        job_id,
        rank,
        size,
        mono_start: 1_000,
        real_start: 0,
        buffer: 4096,
    };
    let mut file = header.encode().to_vec();
    let mut ends = Vec::new();
    let mut t = 1_000u64;
    for blk in 0..blocks {
        let base = t;
        let mut payload = encode_name(blk as u64, "a name");
        let mut prev = base;
        for i in 0..per_block {
            t += 17 + i as u64;
            let e = Event {
                kind: Kind::Send,
                peer: Some(1),
                a: i as u64,
                b: 100,
                begin: t - 5,
                end: t,
            };
            let mut rec = [0u8; MAX_EVENT_LEN];
            let n = encode_event(&mut rec, &e, prev);
            payload.extend_from_slice(&rec[..n]);
            prev = t;
        }
        push_block(
            &mut file,
            BLOCK_EVENTS,
            per_block as u32 + 1,
            base,
            &payload,
        );
        ends.push(file.len());
    }
    let totals = EndTotals {
        events: (blocks * per_block) as u64,
        dropped: 0,
        flushes: 0,
    };
    push_block(&mut file, BLOCK_END, 0, t, &totals.encode());
    ends.push(file.len());
    (file, ends)
}

pub(crate) fn push_block(file: &mut Vec<u8>, kind: u8, count: u32, base: u64, payload: &[u8]) {
    let h = BlockHeader {
        kind,
        len: payload.len() as u32,
        count,
        base,
        checksum: 0,
    }
    .encode_unsummed();
    file.extend_from_slice(&h);
    file.extend_from_slice(&checksum(&[&h, payload]).to_le_bytes());
    file.extend_from_slice(payload);
}

/// xorshift64*: reproducible randomness without a dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
