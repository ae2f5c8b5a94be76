//! The in-memory schedule every input format is turned into.
//!
//! A [`Schedule`] holds, for `num_ranks` ranks, their operations (send, recv,
//! calc) and the dependencies between operations of the same rank. Parsers
//! never build it directly: they feed a [`ScheduleBuilder`], which checks what
//! a single statement cannot (peers in range, every rank present, no
//! dependency cycle) and lays the graph out for the engine.
//!
//! Invariants of a built schedule:
//! 1. operations are numbered globally (`OpId`), rank by rank, in the order
//!    the input gave them; `rank_ops(r)` is a contiguous range;
//! 2. the dependents of an operation are stored in compressed rows, once for
//!    "requires" (run after it is done) and once for "irequires" (run after it
//!    started), each in the order the input stated them; that order decides
//!    which operations become executable first, so it is part of the model;
//! 3. every peer is a rank of the schedule (or `ANY_SOURCE` on a receive),
//!    and the dependency graph of every rank is acyclic.
//!
//! **Chains.** A schedule in which every dependency links an operation to
//! the one stated just before it in its rank, each operation having at most
//! one such dependent (a trace: a rank's operations in program order), is
//! kept as a *chain*: each operation says in [`Op::next`] whether the next
//! one requires or irequires it, and there are no rows. The builder keeps
//! that form while the input allows it and turns it into rows at the first
//! dependency that breaks it; the engine runs both alike.
//!
//! Memory is linear: 24 bytes per operation, plus 4 per dependency edge and
//! 12 per operation for the rows when the schedule is not a chain. Lines
//! are kept as runs (an operation stated on the line after the one before
//! it extends the run), so a trace costs a few bytes per rank for them.

use std::path::PathBuf;

mod builder;

pub use builder::ScheduleBuilder;

/// Index of an operation in a [`Schedule`] (global over all ranks).
pub type OpId = u32;

/// Wildcard source of a receive (GOAL writes it `-1`).
pub const ANY_SOURCE: u32 = u32::MAX;
/// Wildcard tag (GOAL writes it `-1`).
pub const ANY_TAG: u32 = u32::MAX;

/// What an operation does.
///
/// The discriminant order matters: when several operations of a rank become
/// executable together, the engine issues sends before receives before
/// computations, as the reference simulator does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum OpKind {
    /// Send `size` bytes to `peer` with `tag`.
    Send = 1,
    /// Receive `size` bytes from `peer` (or `ANY_SOURCE`) with `tag` (or `ANY_TAG`).
    Recv = 2,
    /// Compute locally for `size` nanoseconds.
    Calc = 3,
}

/// One operation of one rank (24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Bytes for send and recv, nanoseconds for calc.
    pub size: u64,
    /// Destination (send) or source (recv); 0 for calc.
    pub peer: u32,
    /// Message tag; 0 for calc.
    pub tag: u32,
    /// The rank that executes the operation.
    pub rank: u32,
    /// Send, recv or calc.
    pub kind: OpKind,
    /// CPU (overhead resource) the operation runs on.
    pub cpu: u8,
    /// NIC (gap resource) the operation uses.
    pub nic: u8,
    /// In a chain schedule, how the rank's next operation depends on this
    /// one (`None` in a schedule kept as rows).
    pub next: Option<DepKind>,
}

/// An operation as a parser states it (its rank is the block being built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOp {
    /// Send, recv or calc.
    pub kind: OpKind,
    /// Bytes, or nanoseconds for calc.
    pub size: u64,
    /// Destination or source rank (`ANY_SOURCE` allowed on a receive).
    pub peer: u32,
    /// Tag (`ANY_TAG` allowed).
    pub tag: u32,
    /// CPU index.
    pub cpu: u8,
    /// NIC index.
    pub nic: u8,
}

/// How a dependency orders two operations of one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepKind {
    /// `a requires b`: `a` may start once `b` is done.
    Requires,
    /// `a irequires b`: `a` may start once `b` has started.
    IRequires,
}

/// A validated schedule ready for simulation; see the module docs.
#[derive(Debug)]
pub struct Schedule {
    /// Where the schedule came from, for messages.
    pub source: PathBuf,
    ops: Vec<Op>,
    /// The line that stated each operation, as runs.
    lines: LineRuns,
    /// `rank_start[r]..rank_start[r + 1]` are rank `r`'s operations.
    rank_start: Vec<OpId>,
    /// The dependency rows; `None` for a chain (see the module docs).
    rows: Option<Rows>,
    ncpus: usize,
    nnics: usize,
}

/// The dependencies of a schedule that is not a chain, as compressed rows.
#[derive(Debug)]
pub(crate) struct Rows {
    /// Number of unsatisfied dependencies of each operation at the start.
    pub(crate) dep_count: Vec<u32>,
    /// Compressed rows of "requires" dependents.
    done_row: Vec<u32>,
    done_dep: Vec<OpId>,
    /// Compressed rows of "irequires" dependents.
    start_row: Vec<u32>,
    start_dep: Vec<OpId>,
}

impl Rows {
    /// Brings the row heads of `id` into the cache ([`crate::engine`]'s
    /// look-ahead).
    #[inline]
    pub(crate) fn prefetch(&self, id: OpId) {
        crate::engine::prefetch(&self.done_row[id as usize]);
        crate::engine::prefetch(&self.start_row[id as usize]);
    }

    /// Operations that wait for `id` to be done, in input order.
    #[inline]
    pub(crate) fn done_dependents(&self, id: OpId) -> &[OpId] {
        let i = id as usize;
        &self.done_dep[self.done_row[i] as usize..self.done_row[i + 1] as usize]
    }

    /// Operations that wait for `id` to start, in input order.
    #[inline]
    pub(crate) fn start_dependents(&self, id: OpId) -> &[OpId] {
        let i = id as usize;
        &self.start_dep[self.start_row[i] as usize..self.start_row[i + 1] as usize]
    }
}

/// Input lines of operations, as runs of consecutive lines: run `i` says
/// that operation `start[i]` was stated on `line[i]`, and each following
/// operation up to the next run on the line after.
#[derive(Debug, Default)]
struct LineRuns {
    start: Vec<OpId>,
    line: Vec<u32>,
}

impl LineRuns {
    fn push(&mut self, id: OpId, line: u32) {
        if let (Some(&s), Some(&l)) = (self.start.last(), self.line.last()) {
            if u64::from(l) + u64::from(id - s) == u64::from(line) {
                return;
            }
        }
        self.start.push(id);
        self.line.push(line);
    }

    fn get(&self, id: OpId) -> u32 {
        let i = self.start.partition_point(|&s| s <= id);
        if i == 0 {
            return 0;
        }
        self.line[i - 1] + (id - self.start[i - 1])
    }
}

impl Schedule {
    /// Number of ranks.
    pub fn num_ranks(&self) -> usize {
        self.rank_start.len() - 1
    }

    /// Number of operations over all ranks.
    pub fn num_ops(&self) -> usize {
        self.ops.len()
    }

    /// CPUs per rank: one more than the highest `cpu` any operation names.
    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    /// NICs per rank: one more than the highest `nic` any operation names.
    pub fn nnics(&self) -> usize {
        self.nnics
    }

    /// The operation `id`.
    #[inline]
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id as usize]
    }

    /// The global ids of rank `r`'s operations.
    pub fn rank_ops(&self, r: usize) -> std::ops::Range<OpId> {
        self.rank_start[r]..self.rank_start[r + 1]
    }

    /// The input line that stated operation `id` (1-based; 0 when the
    /// format has none).
    pub fn line(&self, id: OpId) -> u32 {
        self.lines.get(id)
    }

    /// Operation `id` as GOAL would state it, with its rank and line.
    pub fn describe(&self, id: OpId) -> String {
        let op = self.op(id);
        format!("{op} (rank {}, line {})", op.rank, self.line(id))
    }

    /// Whether the schedule is kept as a chain (see the module docs).
    pub fn is_chain(&self) -> bool {
        self.rows.is_none()
    }

    /// The dependency rows, `None` for a chain.
    #[inline]
    pub(crate) fn rows(&self) -> Option<&Rows> {
        self.rows.as_ref()
    }

    /// Whether operation `id` waits for nothing at the start.
    pub(crate) fn initially_ready(&self, id: OpId) -> bool {
        match &self.rows {
            Some(rows) => rows.dep_count[id as usize] == 0,
            None => {
                let r = self.ops[id as usize].rank as usize;
                id == self.rank_start[r] || self.ops[id as usize - 1].next.is_none()
            }
        }
    }
}

impl std::fmt::Display for Op {
    /// The operation as GOAL would state it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wild = |v: u32| {
            if v == u32::MAX {
                "-1".to_string()
            } else {
                v.to_string()
            }
        };
        match self.kind {
            OpKind::Send => write!(
                f,
                "send {}b to {} tag {}",
                self.size,
                self.peer,
                wild(self.tag)
            ),
            OpKind::Recv => write!(
                f,
                "recv {}b from {} tag {}",
                self.size,
                wild(self.peer),
                wild(self.tag)
            ),
            OpKind::Calc => write!(f, "calc {}", self.size),
        }
    }
}
