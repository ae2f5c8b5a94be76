//! The launch environment: how a process learns which job it belongs to.
//!
//! A launcher hands each process its place in the job through environment
//! variables. `mttlrun` (and self-launch) set the `MTTL_*` ones below; under
//! `mpirun` or `srun` the MPI library learns its own and only the choice of
//! backend is read here.
//!
//! | variable        | meaning                                                        |
//! |-----------------|----------------------------------------------------------------|
//! | `MTTL_BACKEND`  | `tcp`, `mpi` or `local` (every rank a thread of one process)   |
//! | `MTTL_RANK`     | this process's rank (TCP)                                      |
//! | `MTTL_SIZE`     | the number of ranks (TCP)                                      |
//! | `MTTL_ROOT`     | `host:port` where rank 0 listens for the rendezvous (TCP)      |
//! | `MTTL_SECRET`   | the per-job secret, 64 hex digits (TCP)                        |
//! | `MTTL_BIND`     | `loopback` (default) or `any` when the job spans hosts (TCP)   |
//! | `MTTL_ROOT_FD`  | rank 0 only: the open rendezvous listener the launcher bound (TCP) |
//!
//! Read by the launcher ([`crate::launch`]), never by the backends:
//!
//! | variable          | meaning                                                            |
//! |-------------------|--------------------------------------------------------------------|
//! | `MTTL_NP`         | self-launch: start this program again as a job of that many ranks (with `MTTL_BACKEND=local`: run that many ranks as threads of this process, see [`local_job_size`]) |
//! | `MTTL_TAG_OUTPUT` | self-launch: `1` prefixes each output line with its rank            |
//! | `MTTL_MPIRUN`     | the `mpirun` command for `--backend mpi` (default `mpirun`)         |
//! | `MTTL_RSH`        | the remote shell for hosts other than this one (default `ssh`)      |
//! | `MTTL_ROOT_PORT`  | the rendezvous port to use when the job spans hosts                 |
//!
//! Tuning knobs, read by the backends: `MTTL_SPIN_US` (how long a blocked
//! receive spins before it parks, default 50), `MTTL_MAX_MESSAGE` (largest
//! message in bytes, default 1 GiB), `MTTL_CONNECT_TIMEOUT` (seconds allowed
//! for the bootstrap, default 30), `MTTL_TCP_SNDBUF` (the TCP backend's
//! socket send buffer in bytes, default 256 KiB; 0 leaves it to the
//! kernel's automatic sizing), `MTTL_LINK_TIMEOUT` (seconds a TCP link may
//! show no sign of its peer's host before the peer counts as lost, at least
//! 5, default 25).

use std::time::Duration;

use crate::comm::Rank;
use crate::error::{CommError, ErrorKind, Op};

/// Variable naming the descriptor of the rendezvous listener that the
/// launcher bound on `MTTL_ROOT`'s port and rank 0 inherited open.
pub const ROOT_FD: &str = "MTTL_ROOT_FD";

/// Variable naming the backend.
pub const BACKEND: &str = "MTTL_BACKEND";
/// Variable holding the rank.
pub const RANK: &str = "MTTL_RANK";
/// Variable holding the job size.
pub const SIZE: &str = "MTTL_SIZE";
/// Variable holding rank 0's rendezvous address.
pub const ROOT: &str = "MTTL_ROOT";
/// Variable holding the per-job secret.
pub const SECRET: &str = "MTTL_SECRET";
/// Variable saying which interfaces to bind.
pub const BIND: &str = "MTTL_BIND";
/// Variable holding the spin time before parking, in microseconds.
pub const SPIN_US: &str = "MTTL_SPIN_US";
/// Variable holding the largest message, in bytes.
pub const MAX_MESSAGE: &str = "MTTL_MAX_MESSAGE";
/// Variable holding the bootstrap timeout, in seconds.
pub const CONNECT_TIMEOUT: &str = "MTTL_CONNECT_TIMEOUT";
/// Variable holding the TCP socket send buffer size, in bytes.
pub const TCP_SNDBUF: &str = "MTTL_TCP_SNDBUF";
/// Variable holding how long a TCP link may stay silent, in seconds.
pub const LINK_TIMEOUT: &str = "MTTL_LINK_TIMEOUT";

/// Variable asking a program to launch itself as a job of that many ranks.
pub const NP: &str = "MTTL_NP";
/// Variable asking self-launch to tag output lines with their rank (`1`).
pub const TAG_OUTPUT: &str = "MTTL_TAG_OUTPUT";
/// Variable naming the `mpirun` command for the MPI backend.
pub const MPIRUN: &str = "MTTL_MPIRUN";
/// Variable naming the remote shell used to start ranks on other hosts.
pub const RSH: &str = "MTTL_RSH";
/// Variable fixing the rendezvous port of a job that spans hosts.
pub const ROOT_PORT: &str = "MTTL_ROOT_PORT";

/// Variables that MPI launchers set in every process they start.
const MPI_LAUNCHER_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_NUM_TASKS",
];

/// The length of the per-job secret in bytes.
pub const SECRET_LEN: usize = 32;

/// Which backend a process should start, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Started bare: a job of one rank.
    Single,
    /// Started by `mttlrun` (or self-launch) for the TCP backend.
    Tcp(TcpLaunch),
    /// Started by `mpirun`/`srun`, or by `mttlrun --backend mpi`.
    Mpi,
    /// `MTTL_BACKEND=local`: every rank is a thread of this process (see
    /// [`crate::backend::local`]).
    Local,
}

/// What the TCP backend needs to join its job.
#[derive(Clone, PartialEq, Eq)]
pub struct TcpLaunch {
    /// This process's rank.
    pub rank: Rank,
    /// The number of ranks.
    pub size: usize,
    /// Where rank 0 listens for the rendezvous.
    pub root: String,
    /// The per-job secret.
    pub secret: [u8; SECRET_LEN],
    /// Bind every interface (the job spans hosts) instead of loopback only.
    pub bind_any: bool,
}

impl std::fmt::Debug for TcpLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpLaunch")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("root", &self.root)
            .field("secret", &"<hidden>")
            .field("bind_any", &self.bind_any)
            .finish()
    }
}

fn env_err(msg: String) -> CommError {
    CommError::new(None, Op::Init, ErrorKind::Environment(msg))
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn required(name: &str) -> Result<String, CommError> {
    var(name).ok_or_else(|| {
        env_err(format!(
            "{name} is not set (start the program with mttlrun)"
        ))
    })
}

fn parse_num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, CommError> {
    value
        .trim()
        .parse()
        .map_err(|_| env_err(format!("{name}={value:?} is not a valid number")))
}

/// The name of an MPI launcher variable present in the environment, if any.
pub fn mpi_launcher_var() -> Option<(&'static str, String)> {
    MPI_LAUNCHER_VARS
        .iter()
        .find_map(|name| var(name).map(|v| (*name, v)))
}

impl Launch {
    /// Reads the launch environment of this process.
    pub fn from_env() -> Result<Launch, CommError> {
        match var(BACKEND).as_deref() {
            Some("tcp") => return TcpLaunch::from_env().map(Launch::Tcp),
            Some("mpi") => return Ok(Launch::Mpi),
            Some("local") => return Ok(Launch::Local),
            Some(other) => {
                return Err(env_err(format!(
                    "{BACKEND}={other:?}: expected \"tcp\", \"mpi\" or \"local\""
                )))
            }
            None => {}
        }
        if var(RANK).is_some() {
            return TcpLaunch::from_env().map(Launch::Tcp);
        }
        if mpi_launcher_var().is_some() {
            return Ok(Launch::Mpi);
        }
        Ok(Launch::Single)
    }
}

impl TcpLaunch {
    /// Reads `MTTL_RANK`, `MTTL_SIZE`, `MTTL_ROOT`, `MTTL_SECRET`, `MTTL_BIND`.
    pub fn from_env() -> Result<TcpLaunch, CommError> {
        let rank: Rank = parse_num(RANK, &required(RANK)?)?;
        let size: usize = parse_num(SIZE, &required(SIZE)?)?;
        if size == 0 || rank >= size {
            return Err(env_err(format!("{RANK}={rank} is not below {SIZE}={size}")));
        }
        let root = if size > 1 {
            required(ROOT)?
        } else {
            var(ROOT).unwrap_or_default()
        };
        let secret = match var(SECRET) {
            Some(hexed) => decode_secret(&hexed)?,
            None if size == 1 => [0; SECRET_LEN],
            None => {
                return Err(env_err(format!(
                    "{SECRET} is not set (start the program with mttlrun)"
                )))
            }
        };
        let bind_any = match var(BIND).as_deref() {
            None | Some("loopback") => false,
            Some("any") => true,
            Some(other) => {
                return Err(env_err(format!(
                    "{BIND}={other:?}: expected \"loopback\" or \"any\""
                )))
            }
        };
        Ok(TcpLaunch {
            rank,
            size,
            root,
            secret,
            bind_any,
        })
    }
}

/// The size of the local job this process is to run, if it is to run one:
/// `Some(N)` when `MTTL_BACKEND=local`, `N` from `MTTL_NP` (1 without it).
/// The runtime then runs `N` ranks as threads of this process instead of
/// launching processes (see [`crate::backend::local`]).
pub fn local_job_size() -> Result<Option<usize>, CommError> {
    if var(BACKEND).as_deref() != Some("local") {
        return Ok(None);
    }
    let size = match var(NP) {
        Some(np) => parse_num(NP, &np)?,
        None => 1,
    };
    if size == 0 {
        return Err(env_err(format!("{NP}=0: a job needs at least one rank")));
    }
    Ok(Some(size))
}

/// Decodes a secret given as 64 hex digits.
pub fn decode_secret(hexed: &str) -> Result<[u8; SECRET_LEN], CommError> {
    let bytes =
        hex::decode(hexed.trim()).map_err(|e| env_err(format!("{SECRET} is not hex: {e}")))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        env_err(format!(
            "{SECRET} has {} bytes, expected {SECRET_LEN}",
            b.len()
        ))
    })
}

/// A fresh random per-job secret.
pub fn new_secret() -> std::io::Result<[u8; SECRET_LEN]> {
    let mut secret = [0u8; SECRET_LEN];
    getrandom::getrandom(&mut secret).map_err(std::io::Error::other)?;
    Ok(secret)
}

/// `MTTL_SPIN_US`: how long a blocked receive spins before parking.
pub fn spin_time() -> Result<Duration, CommError> {
    match var(SPIN_US) {
        Some(v) => Ok(Duration::from_micros(parse_num(SPIN_US, &v)?)),
        None => Ok(Duration::from_micros(50)),
    }
}

/// `MTTL_MAX_MESSAGE`: the largest message in bytes.
pub fn max_message() -> Result<usize, CommError> {
    match var(MAX_MESSAGE) {
        Some(v) => parse_num(MAX_MESSAGE, &v),
        None => Ok(1 << 30),
    }
}

/// `MTTL_TCP_SNDBUF`: the send buffer size to ask for on every TCP link, in
/// bytes (`SO_SNDBUF`), or `None` (`0`) to leave it to the kernel.
pub fn tcp_send_buffer() -> Result<Option<usize>, CommError> {
    match var(TCP_SNDBUF) {
        Some(v) => Ok(Some(parse_num::<usize>(TCP_SNDBUF, &v)?).filter(|&n| n > 0)),
        None => Ok(Some(256 << 10)),
    }
}

/// The shortest `MTTL_LINK_TIMEOUT`: keepalive probes are timed in whole
/// seconds, and a link's first comes after at least a second of silence,
/// with three more before the limit.
pub const LINK_TIMEOUT_MIN: u64 = 5;

/// `MTTL_LINK_TIMEOUT`: how long a TCP link may show no sign of life from
/// its peer's host (no answer to keepalive probes while idle, no
/// acknowledgement of data sent to it) before the peer counts as lost.
pub fn link_timeout() -> Result<Duration, CommError> {
    var(LINK_TIMEOUT).map_or(Ok(Duration::from_secs(25)), |v| parse_link_timeout(&v))
}

fn parse_link_timeout(value: &str) -> Result<Duration, CommError> {
    let secs: u64 = parse_num(LINK_TIMEOUT, value)?;
    if secs < LINK_TIMEOUT_MIN {
        return Err(env_err(format!(
            "{LINK_TIMEOUT}={value:?} is too short: at least {LINK_TIMEOUT_MIN} seconds"
        )));
    }
    Ok(Duration::from_secs(secs))
}

/// `MTTL_CONNECT_TIMEOUT`: how long the bootstrap may take.
pub fn connect_timeout() -> Result<Duration, CommError> {
    match var(CONNECT_TIMEOUT) {
        Some(v) => Ok(Duration::from_secs_f64(parse_num(CONNECT_TIMEOUT, &v)?)),
        None => Ok(Duration::from_secs(30)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_timeouts_are_whole_seconds_from_the_minimum() {
        assert_eq!(parse_link_timeout("25").unwrap(), Duration::from_secs(25));
        assert_eq!(parse_link_timeout(" 5 ").unwrap(), Duration::from_secs(5));
        let short = parse_link_timeout("4").unwrap_err().to_string();
        assert!(
            short.contains("MTTL_LINK_TIMEOUT=\"4\" is too short"),
            "{short}"
        );
        let bad = parse_link_timeout("2.5").unwrap_err().to_string();
        assert!(bad.contains("is not a valid number"), "{bad}");
    }
}
