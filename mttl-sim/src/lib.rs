//! `mttl-sim`: predicts the run time of a message-passing schedule on a
//! machine described by LogGOPS parameters.
//!
//! A schedule lists, per rank, sends, receives and computations with the
//! dependencies between them (LogGOPSim's GOAL format). The simulator plays
//! it under the LogGOPS model — L latency, o CPU overhead and O per byte, g
//! NIC gap and G per byte, eager messages up to S bytes and rendezvous above
//! — with MPI matching (source, tag, wildcards; posted and unexpected queues
//! in order), and reports when each rank finishes. Its rules are those of
//! LogGOPSim (spcl/LogGOPSim), so that both give identical times; the
//! [`engine`] module states them step by step.
//!
//! ```
//! use mttl_sim::{input, simulate, Params};
//! let text = b"num_ranks 2\nrank 0 { l1: send 8b to 1 tag 0\n}\nrank 1 { l1: recv 8b from 0 tag 0\n}\n";
//! let sched = input::goal::parse("ex.goal".as_ref(), text).unwrap();
//! let report = simulate(&sched, &Params::default());
//! // the receiver pays o after the message's o + L: 1500 + 2500 + 1500 + 7 * 6
//! assert_eq!(report.ranks[1].finish, 5542);
//! ```
//!
//! Layout: [`schedule`] is the in-memory schedule every [`input`] format
//! builds; [`engine`] runs it on an `event_queue`, with `waiting` holding
//! the events whose resources are busy and `match_queue` the posted and
//! unexpected queues; `tie_order` reproduces the reference's issue
//! order among simultaneous operations. Beyond LogGOPS, [`params`] holds
//! named network profiles, [`fit`] fits parameters to a `mttl-bench comm`
//! result and [`torus`] routes messages on a torus with shared links;
//! [`timeline`] records a run and writes it for Perfetto's UI.

pub mod engine;
pub mod error;
mod event_queue;
pub mod fit;
pub mod input;
mod match_queue;
pub mod params;
pub mod schedule;
mod tie_order;
pub mod timeline;
pub mod torus;
mod waiting;

pub use engine::{simulate, simulate_on, simulate_traced, Blocked, Deadlock, RankTimes, Report};
pub use error::{InputError, SimError};
pub use params::{Params, Profile};
pub use schedule::{DepKind, NewOp, Op, OpId, OpKind, Schedule, ScheduleBuilder};
pub use torus::Torus;
