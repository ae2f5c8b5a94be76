//! Open files: a rank of a TCP job holds one socket per other rank (the
//! mesh is complete, see [`super::bootstrap`]), so a job of N ranks needs
//! about N descriptors per rank, more than the usual soft limit of 1024
//! past about a thousand ranks, and more than a tight `ulimit -n` far
//! earlier. A rank checks at start, before connecting: it raises its soft
//! limit (`RLIMIT_NOFILE`) up to the hard one if that is enough, and
//! otherwise fails at once with a message naming the need, instead of
//! failing halfway through the mesh with "too many open files".

/// Descriptors a rank holds besides its links: standard streams, the
/// listener, the poll, the bootstrap thread's runtime (about ten in all),
/// and a margin for the program's own files.
const BESIDES_LINKS: u64 = 32;

/// How many descriptors a rank of a job of `size` ranks needs.
pub(super) fn needed(size: usize) -> u64 {
    size as u64 + BESIDES_LINKS
}

/// Makes sure this process may open `need` descriptors, raising its soft
/// limit up to its hard one if needed; says why not otherwise.
#[cfg(unix)]
pub(super) fn ensure(size: usize) -> Result<(), String> {
    let need = needed(size);
    // SAFETY: `rlimit` is plain integers, valid when zeroed.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one `rlimit` into `lim`, which is writable.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        // A system that does not say leaves the kernel to refuse.
        return Ok(());
    }
    // `rlim_t` is u64 where mttl runs (Linux, macOS); the cast is a no-op.
    #[allow(clippy::unnecessary_cast)]
    let (soft, hard) = (lim.rlim_cur as u64, lim.rlim_max as u64);
    if soft >= need {
        return Ok(());
    }
    if hard >= need {
        lim.rlim_cur = need as libc::rlim_t;
        // SAFETY: setrlimit reads one `rlimit` from `lim`.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
            return Ok(());
        }
    }
    Err(refusal(size, need, soft, hard))
}

#[cfg(not(unix))]
pub(super) fn ensure(_size: usize) -> Result<(), String> {
    Ok(())
}

/// The message of a rank that may not open enough files.
fn refusal(size: usize, need: u64, soft: u64, hard: u64) -> String {
    format!(
        "a TCP job of {size} ranks needs about {need} open files per rank \
         (one link to every other rank), but this process may open only {soft} \
         (`ulimit -n`; hard limit {hard}): raise the limit (`ulimit -n {need}`, or \
         `nofile` in /etc/security/limits.conf) or run fewer ranks"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_need_grows_with_the_job() {
        assert_eq!(needed(2), 34);
        assert_eq!(needed(256), 288);
        assert!(needed(1000) > 1024);
    }

    #[test]
    fn a_refusal_names_the_need_and_the_limits() {
        let text = refusal(2000, 2032, 1024, 1024);
        assert!(text.starts_with("a TCP job of 2000 ranks needs about 2032"));
        assert!(text.contains("may open only 1024 (`ulimit -n`; hard limit 1024)"));
        assert!(text.contains("ulimit -n 2032"));
    }

    #[cfg(unix)]
    #[test]
    fn a_job_within_the_limit_passes() {
        assert_eq!(ensure(2), Ok(()));
    }
}
