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
    /// Their lines.
    lines: LineRuns,
    /// While the input is a chain, its dependencies are in `Op::next`
    /// instead of `deps`.
    chain: bool,
    /// All dependencies as (dependent, prerequisite, kind), indices into
    /// `ops`, in input order (once the input is not a chain).
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
            lines: LineRuns::default(),
            chain: true,
            deps: Vec::new(),
            blocks: vec![None; num_ranks as usize],
            current: None,
        }
    }

    /// The number of ranks the schedule declares.
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }

    /// Reserves room for `n` more operations.
    pub fn reserve(&mut self, n: usize) {
        self.ops.reserve_exact(n);
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
        self.lines.push(self.ops.len() as u32, line);
        self.ops.push(Op {
            size,
            peer,
            tag,
            rank,
            kind,
            cpu,
            nic,
            next: None,
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
        let (dependent, prerequisite) = (b.start + dependent, b.start + prerequisite);
        if self.chain {
            // Only a link to the operation just before, which has no
            // dependent yet, keeps the chain: then `dependent` has no
            // prerequisite yet either.
            let pre = &mut self.ops[prerequisite as usize];
            if dependent == prerequisite + 1 && pre.next.is_none() {
                pre.next = Some(kind);
                return Ok(());
            }
            self.leave_chain();
        }
        self.deps.push((dependent, prerequisite, kind));
        Ok(())
    }

    /// Moves the links stated so far into `deps` (in operation order: each
    /// operation has at most one, so every row keeps the input's order).
    fn leave_chain(&mut self) {
        self.chain = false;
        for (i, op) in self.ops.iter_mut().enumerate() {
            if let Some(kind) = op.next.take() {
                self.deps.push((i as u32 + 1, i as u32, kind));
            }
        }
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
            mut lines,
            chain,
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
            // A link joins two operations of one block, which stay adjacent.
            let mut new_id = vec![0u32; total];
            let mut reordered = Vec::with_capacity(total);
            let mut new_lines = LineRuns::default();
            for b in &blocks {
                for old in b.start..b.end {
                    new_id[old as usize] = reordered.len() as u32;
                    new_lines.push(reordered.len() as u32, lines.get(old));
                    reordered.push(ops[old as usize]);
                }
            }
            ops = reordered;
            lines = new_lines;
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
        if chain {
            // Links only point forward: no cycle.
            return Ok(Schedule {
                source,
                ops,
                lines,
                rank_start,
                rows: None,
                ncpus,
                nnics,
            });
        }
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
            lines,
            rank_start,
            rows: Some(Rows {
                dep_count,
                done_row,
                done_dep,
                start_row,
                start_dep,
            }),
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
    let Some(rows) = s.rows() else {
        return Ok(());
    };
    let mut count = rows.dep_count.clone();
    let mut stack: Vec<OpId> = (0..s.num_ops() as OpId)
        .filter(|&i| count[i as usize] == 0)
        .collect();
    let mut seen = 0usize;
    while let Some(id) = stack.pop() {
        seen += 1;
        for &d in rows
            .done_dependents(id)
            .iter()
            .chain(rows.start_dependents(id))
        {
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
        for &d in rows
            .done_dependents(id)
            .iter()
            .chain(rows.start_dependents(id))
        {
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
        .map(|&i| format!("line {}", s.line(i)))
        .collect();
    Err(InputError::new(
        &s.source,
        s.line(cycle[0]),
        format!(
            "dependency cycle in rank {}: the operations at {} wait for each other",
            first.rank,
            lines.join(" -> ")
        ),
    ))
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
