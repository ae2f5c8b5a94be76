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
//! Memory is linear: 32 bytes per operation and 4 per dependency edge, plus
//! one line number per operation so reports can point into the input.

use std::path::PathBuf;

use crate::error::InputError;

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

/// One operation of one rank.
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
    /// The input line that stated it (1-based; 0 when the format has none).
    pub line: u32,
    /// Send, recv or calc.
    pub kind: OpKind,
    /// CPU (overhead resource) the operation runs on.
    pub cpu: u8,
    /// NIC (gap resource) the operation uses.
    pub nic: u8,
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
    /// `rank_start[r]..rank_start[r + 1]` are rank `r`'s operations.
    rank_start: Vec<OpId>,
    /// Number of unsatisfied dependencies of each operation at the start.
    dep_count: Vec<u32>,
    /// Compressed rows of "requires" dependents.
    done_row: Vec<u32>,
    done_dep: Vec<OpId>,
    /// Compressed rows of "irequires" dependents.
    start_row: Vec<u32>,
    start_dep: Vec<OpId>,
    ncpus: usize,
    nnics: usize,
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

    /// Initial number of unsatisfied dependencies of each operation.
    pub(crate) fn dep_counts(&self) -> &[u32] {
        &self.dep_count
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

/// Collects operations and dependencies from a parser, then validates them.
///
/// Ranks may be given in any order (one block each); [`ScheduleBuilder::finish`]
/// numbers operations rank by rank, so a second input format only has to
/// call `begin_rank`, `add_op`, `add_dep` and `end_rank`.
#[derive(Debug)]
pub struct ScheduleBuilder {
    source: PathBuf,
    num_ranks: u32,
    /// All operations, block after block in the order the input gave them.
    ops: Vec<Op>,
    /// All dependencies as (dependent, prerequisite, kind), indices into
    /// `ops`, in input order.
    deps: Vec<(u32, u32, DepKind)>,
    /// Per rank, its block: the range of `ops` and the header's line.
    blocks: Vec<Option<Block>>,
    current: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    start: u32,
    end: u32,
    line: u32,
}

impl ScheduleBuilder {
    /// A builder for `num_ranks` ranks read from `source`.
    pub fn new(source: impl Into<PathBuf>, num_ranks: u32) -> Self {
        ScheduleBuilder {
            source: source.into(),
            num_ranks,
            ops: Vec::new(),
            deps: Vec::new(),
            blocks: vec![None; num_ranks as usize],
            current: None,
        }
    }

    /// The number of ranks the schedule declares.
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }

    fn err(&self, line: u32, msg: String) -> InputError {
        InputError::new(&self.source, line, msg)
    }

    /// Starts the block of `rank` (stated at `line`); later operations belong to it.
    pub fn begin_rank(&mut self, rank: u32, line: u32) -> Result<(), InputError> {
        if rank >= self.num_ranks {
            return Err(self.err(
                line,
                format!(
                    "rank {rank} is outside the schedule's {} ranks",
                    self.num_ranks
                ),
            ));
        }
        if let Some(b) = &self.blocks[rank as usize] {
            return Err(self.err(
                line,
                format!("rank {rank} already has a block (line {})", b.line),
            ));
        }
        let at = self.ops.len() as u32;
        self.blocks[rank as usize] = Some(Block {
            start: at,
            end: at,
            line,
        });
        self.current = Some(rank);
        Ok(())
    }

    /// Adds an operation, stated at `line`, to the current rank; returns its
    /// index in the rank.
    pub fn add_op(&mut self, op: NewOp, line: u32) -> Result<u32, InputError> {
        let NewOp {
            kind,
            size,
            peer,
            tag,
            cpu,
            nic,
        } = op;
        let Some(rank) = self.current else {
            return Err(self.err(line, "operation outside a `rank N { ... }` block".into()));
        };
        match kind {
            OpKind::Send if peer >= self.num_ranks => {
                return Err(self.err(
                    line,
                    format!(
                        "send to rank {peer}, but the schedule has {} ranks",
                        self.num_ranks
                    ),
                ))
            }
            OpKind::Recv if peer != ANY_SOURCE && peer >= self.num_ranks => {
                return Err(self.err(
                    line,
                    format!(
                        "receive from rank {peer}, but the schedule has {} ranks",
                        self.num_ranks
                    ),
                ))
            }
            _ => {}
        }
        // Ids must stay below u32::MAX, which marks "none" in places.
        if self.ops.len() >= (u32::MAX - 1) as usize {
            return Err(self.err(line, "too many operations for the simulator".into()));
        }
        self.ops.push(Op {
            size,
            peer,
            tag,
            rank,
            line,
            kind,
            cpu,
            nic,
        });
        let block = self.blocks[rank as usize]
            .as_mut()
            .expect("the current rank has a block");
        block.end = self.ops.len() as u32;
        Ok(block.end - 1 - block.start)
    }

    /// States that `dependent` (an index of the current rank) waits for `prerequisite`.
    pub fn add_dep(
        &mut self,
        dependent: u32,
        prerequisite: u32,
        kind: DepKind,
        line: u32,
    ) -> Result<(), InputError> {
        let Some(rank) = self.current else {
            return Err(self.err(line, "dependency outside a `rank N { ... }` block".into()));
        };
        let b = self.blocks[rank as usize].expect("the current rank has a block");
        let n = b.end - b.start;
        if dependent >= n || prerequisite >= n {
            return Err(self.err(
                line,
                "dependency names an operation that does not exist".into(),
            ));
        }
        self.deps
            .push((b.start + dependent, b.start + prerequisite, kind));
        Ok(())
    }

    /// Ends the current rank's block.
    pub fn end_rank(&mut self) {
        self.current = None;
    }

    /// Checks completeness and acyclicity and lays the schedule out.
    pub fn finish(self) -> Result<Schedule, InputError> {
        let missing: Vec<u32> = (0..self.num_ranks)
            .filter(|&r| self.blocks[r as usize].is_none())
            .collect();
        if !missing.is_empty() {
            let shown: Vec<String> = missing.iter().take(10).map(|r| r.to_string()).collect();
            let more = if missing.len() > 10 { ", ..." } else { "" };
            return Err(self.err(
                0,
                format!(
                    "the schedule declares {} ranks but {} of them have no block: {}{more}",
                    self.num_ranks,
                    missing.len(),
                    shown.join(", ")
                ),
            ));
        }
        let ScheduleBuilder {
            source,
            mut ops,
            mut deps,
            blocks,
            ..
        } = self;
        let blocks: Vec<Block> = blocks.into_iter().flatten().collect();
        let total = ops.len();
        // Blocks given out of rank order: renumber so that ranks are contiguous
        // in rank order (a stable move, so input order within a rank stays).
        let in_order = blocks
            .iter()
            .scan(0u32, |next, b| {
                let ok = b.start == *next;
                *next = b.end;
                Some(ok)
            })
            .all(|ok| ok);
        if !in_order {
            let mut new_id = vec![0u32; total];
            let mut reordered = Vec::with_capacity(total);
            for b in &blocks {
                for old in b.start..b.end {
                    new_id[old as usize] = reordered.len() as u32;
                    reordered.push(ops[old as usize]);
                }
            }
            ops = reordered;
            for d in &mut deps {
                d.0 = new_id[d.0 as usize];
                d.1 = new_id[d.1 as usize];
            }
        }
        let mut rank_start = Vec::with_capacity(blocks.len() + 1);
        let mut at = 0u32;
        for b in &blocks {
            rank_start.push(at);
            at += b.end - b.start;
        }
        rank_start.push(at);
        let ncpus = ops.iter().map(|o| o.cpu as usize + 1).max().unwrap_or(1);
        let nnics = ops.iter().map(|o| o.nic as usize + 1).max().unwrap_or(1);
        // Compressed rows: count, prefix-sum, then place in input order.
        let mut dep_count = vec![0u32; total];
        let mut done_row = vec![0u32; total + 1];
        let mut start_row = vec![0u32; total + 1];
        for &(dependent, pre, kind) in &deps {
            dep_count[dependent as usize] += 1;
            match kind {
                DepKind::Requires => done_row[pre as usize + 1] += 1,
                DepKind::IRequires => start_row[pre as usize + 1] += 1,
            }
        }
        for i in 0..total {
            done_row[i + 1] += done_row[i];
            start_row[i + 1] += start_row[i];
        }
        let mut done_dep = vec![0; done_row[total] as usize];
        let mut start_dep = vec![0; start_row[total] as usize];
        let mut done_fill = done_row.clone();
        let mut start_fill = start_row.clone();
        for &(dependent, pre, kind) in &deps {
            let (fill, list) = match kind {
                DepKind::Requires => (&mut done_fill, &mut done_dep),
                DepKind::IRequires => (&mut start_fill, &mut start_dep),
            };
            let slot = &mut fill[pre as usize];
            list[*slot as usize] = dependent;
            *slot += 1;
        }
        drop(deps);
        let sched = Schedule {
            source,
            ops,
            rank_start,
            dep_count,
            done_row,
            done_dep,
            start_row,
            start_dep,
            ncpus,
            nnics,
        };
        check_acyclic(&sched)?;
        Ok(sched)
    }
}

/// Rejects a schedule whose dependencies form a cycle: its operations could
/// never start, and the run would end as a confusing deadlock instead.
///
/// Kahn's algorithm over both kinds of edges; what remains unsorted contains
/// a cycle, which is then walked to name its operations.
fn check_acyclic(s: &Schedule) -> Result<(), InputError> {
    let mut count = s.dep_counts().to_vec();
    let mut stack: Vec<OpId> = (0..s.num_ops() as OpId)
        .filter(|&i| count[i as usize] == 0)
        .collect();
    let mut seen = 0usize;
    while let Some(id) = stack.pop() {
        seen += 1;
        for &d in s.done_dependents(id).iter().chain(s.start_dependents(id)) {
            count[d as usize] -= 1;
            if count[d as usize] == 0 {
                stack.push(d);
            }
        }
    }
    if seen == s.num_ops() {
        return Ok(());
    }
    // Every remaining operation has a remaining prerequisite; following
    // prerequisites backwards must revisit an operation, which closes a cycle.
    let mut prereq = vec![u32::MAX; s.num_ops()];
    for id in 0..s.num_ops() as OpId {
        if count[id as usize] == 0 {
            continue;
        }
        for &d in s.done_dependents(id).iter().chain(s.start_dependents(id)) {
            if count[d as usize] > 0 {
                prereq[d as usize] = id;
            }
        }
    }
    let start = (0..s.num_ops())
        .find(|&i| count[i] > 0)
        .expect("an unsorted op") as OpId;
    let mut visited = rustc_hash::FxHashMap::default();
    let mut path = Vec::new();
    let mut cur = start;
    while !visited.contains_key(&cur) {
        visited.insert(cur, path.len());
        path.push(cur);
        cur = prereq[cur as usize];
    }
    let cycle = &path[visited[&cur]..];
    let first = s.op(cycle[0]);
    let lines: Vec<String> = cycle
        .iter()
        .rev()
        .map(|&i| format!("line {}", s.op(i).line))
        .collect();
    Err(InputError::new(
        &s.source,
        first.line,
        format!(
            "dependency cycle in rank {}: the operations at {} wait for each other",
            first.rank,
            lines.join(" -> ")
        ),
    ))
}

impl std::fmt::Display for Op {
    /// The operation as GOAL would state it, with where it was stated.
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
            )?,
            OpKind::Recv => write!(
                f,
                "recv {}b from {} tag {}",
                self.size,
                wild(self.peer),
                wild(self.tag)
            )?,
            OpKind::Calc => write!(f, "calc {}", self.size)?,
        }
        write!(f, " (rank {}, line {})", self.rank, self.line)
    }
}
