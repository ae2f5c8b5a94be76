//! The lab's errors: each says what is wrong and, where there is one, what to
//! do about it.

use crate::profile::ProfileError;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("mttl-netlab needs root (it creates network namespaces and links): run it as root, e.g. with sudo")]
    NotRoot,
    #[error(
        "`{0}` is not installed (not found on PATH): mttl-netlab needs iproute2's `ip` and `tc`"
    )]
    MissingTool(&'static str),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("--hosts {0}: the lab has 2 to {max} hosts", max = crate::lab::MAX_HOSTS)]
    HostCount(usize),
    #[error("the lab is already up with {hosts} hosts on profile {profile}; run `mttl-netlab down` first to change it (an identical `up` reuses it)")]
    AlreadyUp { hosts: usize, profile: String },
    #[error("leftovers of an earlier lab exist ({0}) without its state: run `mttl-netlab down` to remove them")]
    Leftovers(String),
    #[error("the lab is not up: run `mttl-netlab up --hosts N --profile P` first")]
    NotUp,
    #[error(
        "unknown host `{0}`: lab hosts are named mttl-h0, mttl-h1, ... (see `mttl-netlab status`)"
    )]
    UnknownHost(String),
    #[error("this kernel has no netem qdisc (`tc qdisc add ... netem` failed: {0}); use --wire user or --wire auto")]
    NoNetem(String),
    #[error("`{command}` failed: {why}")]
    Command { command: String, why: String },
    #[error("cannot enter network namespace {name}: {why}")]
    Namespace { name: String, why: String },
    #[error("cannot turn offloads off on {device}: {why}")]
    Offloads { device: String, why: String },
    #[error("the wire process {0}")]
    Wire(String),
    #[error("the lab's state in {path}: {why}")]
    State { path: String, why: String },
    #[error("the check's probe: {0}")]
    Probe(String),
    #[error("{0}")]
    Usage(String),
    #[error("internal error: {0}")]
    Internal(String),
}
