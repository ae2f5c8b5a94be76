//! Start-up step 3: the ranks check that they run the same program.
//!
//! 1. Every rank but 0 sends `HELLO` with the digest of its registry of
//!    remote functions, the settings every rank must share (the
//!    collectives' and tracing's `agreed_settings`) and the registry's
//!    listing, then waits for rank 0's answer.
//! 2. Rank 0 takes one `HELLO` from each rank and compares its digest and
//!    settings with its own, explaining each difference.
//! 3. It answers every rank with `HELLO_ACK`: `STATUS_OK`, or
//!    `STATUS_ERROR` and the differences.
//!    With `STATUS_OK` goes the job's id (8 bytes), drawn by rank 0: the
//!    trace files of one run carry it, so files of different runs are
//!    never read as one.
//! 4. On a difference every rank prints it and exits with
//!    [`MISMATCH_CODE`]; rank 0 waits a moment first, so its answers reach
//!    every rank.

use std::time::Duration;

use mttl_comm::Comm;

use super::{exit, MISMATCH_CODE};
use crate::context::{self, report_line, FAILURE_CODE};
use crate::registry::Registry;
use crate::wire::{self, Fields, HeaderBuf};

/// Start-up step 3. Returns the job's id.
pub(super) fn check_registries() -> u64 {
    context::with(|cx| {
        let reg = Registry::get();
        if cx.size == 1 {
            return new_job_id();
        }
        if cx.rank != 0 {
            let settings = agreed_settings();
            let header = HeaderBuf::with_capacity(12)
                .u64(reg.digest())
                .u32(settings.len() as u32)
                .bytes;
            let body = [settings.as_bytes(), reg.listing().as_bytes()].concat();
            if let Err(e) = cx.post(0, wire::HELLO, &header, &body) {
                cx.comm_failed(&e);
            }
            let ack = match cx.comm.recv_from(0, None) {
                Ok(Some(m)) if m.tag == wire::HELLO_ACK && !m.data.is_empty() => m,
                Ok(_) => cx.fail(
                    "rank 0 answered the start-up check with something else",
                    FAILURE_CODE,
                ),
                Err(e) => cx.comm_failed(&e),
            };
            cx.stats.recv += 1;
            if ack.data[0] != wire::STATUS_OK {
                report_line(&format!(
                    "mttl: rank {}: refused at start-up: {}",
                    cx.rank,
                    String::from_utf8_lossy(&ack.data[1..])
                ));
                std::process::exit(MISMATCH_CODE);
            }
            return match ack.data.get(1..9) {
                Some(id) => Fields(id).u64(),
                None => cx.fail(
                    "rank 0 answered the start-up check without the job's id",
                    FAILURE_CODE,
                ),
            };
        }
        let ours = agreed_settings();
        let mut problems = Vec::new();
        for _ in 1..cx.size {
            let m = match cx.comm.recv_any(None) {
                Ok(Some(m)) if m.tag == wire::HELLO && m.data.len() >= 12 => m,
                Ok(Some(m)) => cx.fail(
                    &format!(
                        "rank {} sent kind {} before the start-up check",
                        m.source, m.tag
                    ),
                    FAILURE_CODE,
                ),
                Ok(None) => continue,
                Err(e) => cx.comm_failed(&e),
            };
            cx.stats.recv += 1;
            let mut fields = Fields(&m.data[..12]);
            let digest = fields.u64();
            let rest = &m.data[12..];
            let (settings, listing) = rest.split_at((fields.u32() as usize).min(rest.len()));
            let settings = String::from_utf8_lossy(settings);
            if settings != ours {
                problems.push(format!(
                    "rank {} runs with {settings}, rank 0 with {ours}: every rank must have \
                     the same MTTL_BCAST and MTTL_TRACE, MTTL_TRACE_FLUSH and MTTL_TRACE_RESYNC",
                    m.source
                ));
            }
            if digest != reg.digest() {
                problems.push(reg.explain_mismatch(m.source, &String::from_utf8_lossy(listing)));
            }
        }
        let job_id = new_job_id();
        let verdict = if problems.is_empty() {
            let mut v = vec![wire::STATUS_OK];
            v.extend_from_slice(&job_id.to_le_bytes());
            v
        } else {
            let mut v = vec![wire::STATUS_ERROR];
            v.extend_from_slice(problems.join("\n").as_bytes());
            v
        };
        for r in 1..cx.size {
            let _ = cx.post(r, wire::HELLO_ACK, &verdict, &[]);
        }
        if !problems.is_empty() {
            report_line(&format!(
                "mttl: rank 0: refusing to start: {}",
                problems.join("\n")
            ));
            // Let the verdicts reach every rank before leaving.
            exit::set_code(MISMATCH_CODE);
            std::thread::sleep(Duration::from_millis(200));
            std::process::exit(MISMATCH_CODE);
        }
        job_id
    })
}

/// The settings that change which messages the ranks exchange, so that
/// every rank must have the same.
fn agreed_settings() -> String {
    format!(
        "{}; {}",
        crate::coll::agreed_settings(),
        crate::trace::agreed_settings()
    )
}

/// A fresh job id: the time, this process and a counter, mixed
/// (splitmix64's finaliser; unique enough to tell runs apart, not a
/// secret).
fn new_job_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
