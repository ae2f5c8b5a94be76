//! [`ScheduleBuilder`]: what a parser feeds, and the checks and layout that
//! turn it into a [`Schedule`] (the parent module states the invariants).

use std::path::PathBuf;

use super::{DepKind, LineRuns, NewOp, Op, OpId, OpKind, Rows, Schedule, ANY_SOURCE};
use crate::error::InputError;

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
