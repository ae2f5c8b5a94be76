//! Open files: a rank of a TCP job holds one socket per peer it has a link
//! to (links are made when first needed, see [`super::bootstrap`]). Rank 0
//! links to every rank at the rendezvous, and any rank may come to link to
//! every other, so a job of N ranks needs up to about N descriptors per
//! rank: more than the usual soft limit of 1024 past about a thousand
//! ranks, and more than a tight `ulimit -n` far earlier. A rank checks at
//! start, before connecting: it raises its soft limit (`RLIMIT_NOFILE`) up
//! to the hard one if that is enough, and otherwise fails at once with a
//! message naming the need, instead of failing in the middle of the job
//! with "too many open files". The launcher checks the same need for every
//! rank before it starts any (`launch::tcp`).

/// Descriptors a rank holds besides its links: standard streams, the
/// listener, the poll and its waker, the link thread's runtime (about ten
/// in all), and a margin for the program's own files.
const BESIDES_LINKS: u64 = 32;

/// How many descriptors a rank of a job of `size` ranks may need.
pub(crate) fn needed(size: usize) -> u64 {
    size as u64 + BESIDES_LINKS
}

/// A process's `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    /// The limit in force (`ulimit -n`).
    pub(crate) soft: u64,
    /// How far the process may raise it itself (`ulimit -Hn`).
    pub(crate) hard: u64,
}

/// This process's limit on open files, if the system says.
#[cfg(unix)]
pub(crate) fn limit() -> Option<Limit> {
    // SAFETY: `rlimit` is plain integers, valid when zeroed.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one `rlimit` into `lim`, which is writable.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    // `rlim_t` is u64 where mttl runs (Linux, macOS); the cast is a no-op.
    #[allow(clippy::unnecessary_cast)]
    Some(Limit {
        soft: lim.rlim_cur as u64,
        hard: lim.rlim_max as u64,
    })
}

#[cfg(not(unix))]
pub(crate) fn limit() -> Option<Limit> {
    None
}

/// Makes sure this process may open `need` descriptors, raising its soft
/// limit up to its hard one if needed; returns the limit that is too low
/// otherwise. A system that does not say passes (its kernel refuses later).
pub(crate) fn raise_to(need: u64) -> Result<(), Limit> {
    let Some(lim) = limit() else {
        return Ok(());
    };
    if lim.soft >= need {
        return Ok(());
    }
    #[cfg(unix)]
    if lim.hard >= need {
        let raised = libc::rlimit {
            rlim_cur: need as libc::rlim_t,
            rlim_max: lim.hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads one `rlimit` from `raised`.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    Err(lim)
}

/// Makes sure a rank of a job of `size` ranks may open what it needs; says
/// why not otherwise.
pub(super) fn ensure(size: usize) -> Result<(), String> {
    let need = needed(size);
    raise_to(need).map_err(|lim| refusal(size, need, lim.soft, lim.hard))
}

/// The message of a rank that may not open enough files.
fn refusal(size: usize, need: u64, soft: u64, hard: u64) -> String {
    format!(
        "a TCP job of {size} ranks needs up to {need} open files per rank \
         (a link to every rank it talks to, rank 0 to all), but this process may \
         open only {soft} (`ulimit -n`; hard limit {hard}): raise the limit \
         (`ulimit -n {need}`, or `nofile` in /etc/security/limits.conf) or run \
         fewer ranks"
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
        assert!(text.starts_with("a TCP job of 2000 ranks needs up to 2032"));
        assert!(text.contains("may open only 1024 (`ulimit -n`; hard limit 1024)"));
        assert!(text.contains("ulimit -n 2032"));
    }

    #[cfg(unix)]
    #[test]
    fn a_job_within_the_limit_passes() {
        assert_eq!(ensure(2), Ok(()));
    }
}
