//! mttl-netlab: one Linux machine as a small cluster, for running mttl jobs
//! across "hosts" joined by emulated networks (100Base-T, Gigabit and 10
//! Gigabit Ethernet, Myrinet-2000, or any rate and latency).
//!
//! Hosts are network namespaces (`mttl-h0`, `mttl-h1`, ...) on one subnet,
//! each linked to a switch by a veth pair. Rate, latency and a bounded
//! queue come from kernel netem where the kernel has it, else from the
//! user-space wire, a forwarder that paces and delays every frame. See
//! [`lab`] for what `up` makes and how `down` finds it, [`link`] for the
//! link model, [`wire`] for the forwarder, [`calibrate`] for taking its own cost out, [`check`] for the faithfulness
//! check and [`rsh`] for launching across hosts with `mttlrun`.
#![cfg(target_os = "linux")]

pub mod calibrate;
pub mod check;
mod error;
pub mod lab;
pub mod link;
pub mod profile;
pub mod rsh;
mod sys;
pub mod wire;

pub use error::LabError;
pub use profile::Profile;
