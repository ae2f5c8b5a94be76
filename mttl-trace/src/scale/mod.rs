//! Pseudo traces (`mttl-trace scale`): a real run of N ranks turned into
//! time-independent traces of N' ranks, by the SCAMP method.
//!
//! 1. A *skeleton* of the kernel ([`Skeleton`]) gives, for any rank of any
//!    job size, the rank's messages in program order (peer, bytes, tag) and
//!    the points where the kernel computes ([`Step::Compute`]), using the
//!    kernel's own partition and partner functions (`mttl-kernels`) and
//!    [`runtime`]'s model of how mttl turns calls into messages. It runs no
//!    computation.
//! 2. The real trace is checked against the skeleton at its own size: every
//!    rank's messages, stream by stream ([`streams`]), must be the
//!    skeleton's. A trace of another program, another class, or recorded
//!    with batching on, is refused with its first difference.
//! 3. Every rank r' of N' is mapped to the real rank `m = r' · N / N'`
//!    (block mapping: the real rank whose share of the data held r''s).
//!    The computation of phase j (from the j-th compute point of the
//!    skeleton to the next) is the real rank m's: the sum of its `calc`s
//!    between the ends of the messages that precede the j-th and the
//!    (j+1)-th compute points, located in m's trace by their position in
//!    their stream. It is scaled by the work per rank, `work(r', N') /
//!    work(m, N)`, and written at r''s j-th compute point.
//!
//! The streams of a rank are its messages grouped by direction, peer and
//! tag: within one, order is fixed by the runtime (FIFO per source,
//! destination and tag); between two, a real run interleaves as the timing
//! falls (the handler serves requests whenever a thread waits), so two runs
//! of one program differ there, and so may a pseudo trace.

mod cg;
mod is;
mod runtime;
mod stencil;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::ti::{TiOp, TiTrace};

/// One step of a skeleton: a message operation, or a point where the
/// kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A message operation.
    Op(TiOp),
    /// The kernel computes here (a phase begins).
    Compute,
}

/// The kernels with a skeleton.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// NPB CG (`npb cg`, the mttl driver).
    Cg,
    /// NPB IS (`npb is`, the mttl driver).
    Is,
    /// The 1-D stencil (`examples/stencil.rs`).
    Stencil,
}

impl std::str::FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cg" => Ok(Kernel::Cg),
            "is" => Ok(Kernel::Is),
            "stencil" => Ok(Kernel::Stencil),
            _ => Err(format!("no skeleton `{s}`: use cg, is or stencil")),
        }
    }
}

/// A skeleton made ready for one real trace (what it learned from it).
#[derive(Debug, Clone)]
pub(crate) enum Skeleton {
    Cg(cg::Cg),
    Is(is::Is),
    Stencil(stencil::Stencil),
}

impl Skeleton {
    fn steps(&self, rank: usize, size: usize) -> Result<Vec<Step>, String> {
        match self {
            Skeleton::Cg(k) => k.steps(rank, size),
            Skeleton::Is(k) => k.steps(rank, size),
            Skeleton::Stencil(k) => Ok(k.steps(rank, size)),
        }
    }

    fn work(&self, rank: usize, size: usize) -> f64 {
        match self {
            Skeleton::Cg(k) => k.work(rank, size),
            Skeleton::Is(k) => k.work(size),
            Skeleton::Stencil(_) => 1.0,
        }
    }
}

/// What `scale` needs besides the trace.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// The kernel.
    pub kernel: Kernel,
    /// NPB class letter (CG, IS).
    pub class: Option<char>,
    /// The number of ranks to make.
    pub to: usize,
}

/// Why a trace cannot be scaled.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// The options do not fit the kernel.
    #[error("{0}")]
    Options(String),
    /// A pseudo trace could not be written.
    #[error("{0}")]
    Write(String),
    /// The real trace is not the skeleton's program at its own size.
    #[error("the trace does not match the {kernel} skeleton: {what}")]
    Mismatch {
        /// The kernel.
        kernel: &'static str,
        /// The first difference.
        what: String,
    },
}

fn kernel_name(k: Kernel) -> &'static str {
    match k {
        Kernel::Cg => "cg",
        Kernel::Is => "is",
        Kernel::Stencil => "stencil",
    }
}

/// A rank's messages by stream: (is a receive, peer, tag) to the stream's
/// operations in order.
pub fn streams(ops: &[TiOp]) -> BTreeMap<(bool, u32, u64), Vec<TiOp>> {
    let mut out: BTreeMap<_, Vec<TiOp>> = BTreeMap::new();
    for &op in ops {
        if let Some(k) = stream_key(&op) {
            out.entry(k).or_default().push(op);
        }
    }
    out
}

fn stream_key(op: &TiOp) -> Option<(bool, u32, u64)> {
    match *op {
        TiOp::Calc(_) => None,
        TiOp::Send { peer, tag, .. } | TiOp::Isend { peer, tag, .. } => Some((false, peer, tag)),
        TiOp::Recv { peer, tag, .. } => Some((true, peer, tag)),
    }
}

/// The first difference between two ranks' streams, if any.
pub fn first_stream_difference(a: &[TiOp], b: &[TiOp]) -> Option<String> {
    let (sa, sb) = (streams(a), streams(b));
    for (k, va) in &sa {
        let dir = if k.0 { "from" } else { "to" };
        let Some(vb) = sb.get(k) else {
            return Some(format!(
                "{} messages {dir} {} tag {} on one side only",
                va.len(),
                k.1,
                k.2
            ));
        };
        if let Some(i) = (0..va.len().min(vb.len())).find(|&i| va[i] != vb[i]) {
            return Some(format!(
                "message {i} {dir} {} tag {}: `{}` against `{}`",
                k.1, k.2, va[i], vb[i]
            ));
        }
        if va.len() != vb.len() {
            return Some(format!(
                "{} against {} messages {dir} {} tag {}",
                va.len(),
                vb.len(),
                k.1,
                k.2
            ));
        }
    }
    sb.iter().find(|(k, _)| !sa.contains_key(k)).map(|(k, v)| {
        format!(
            "{} messages {} {} tag {} on one side only",
            v.len(),
            if k.0 { "from" } else { "to" },
            k.1,
            k.2
        )
    })
}

fn ops_of(steps: &[Step]) -> Vec<TiOp> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Op(op) => Some(*op),
            Step::Compute => None,
        })
        .collect()
}

/// The computation of one phase of a real rank: the `calc` that preceded
/// each of its messages, by the message's place in the phase, and what no
/// message of the pseudo rank takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Phase {
    /// (is a receive, tag, occurrence in the phase) to the ns before it.
    before: HashMap<(bool, u64, usize), u64>,
    /// Every calc of the phase, ns.
    total: u64,
}

/// A message's place in its phase, whatever its peer: (is a receive, tag,
/// how many such came before it in the phase).
fn place(op: &TiOp, seen: &mut HashMap<(bool, u64), usize>) -> Option<(bool, u64, usize)> {
    let (recv, _, tag) = stream_key(op)?;
    let i = seen.entry((recv, tag)).or_insert(0);
    *i += 1;
    Some((recv, tag, *i - 1))
}

/// The phases of a real rank: `steps` is the skeleton of that rank, `real`
/// its TI trace (see the module docs, step 3).
fn phases(steps: &[Step], real: &[TiOp]) -> Vec<Phase> {
    // Per compute point, the (stream, index in it) of the message before it.
    let mut seen: HashMap<(bool, u32, u64), usize> = HashMap::default();
    let mut last = None;
    let mut bounds = Vec::new();
    for s in steps {
        match s {
            Step::Op(op) => {
                let k = stream_key(op).expect("a message");
                let i = seen.entry(k).or_insert(0);
                last = Some((k, *i));
                *i += 1;
            }
            Step::Compute => bounds.push(last),
        }
    }
    // Where each of those messages is in the real trace.
    let mut at: HashMap<((bool, u32, u64), usize), usize> = HashMap::default();
    let mut counts: HashMap<(bool, u32, u64), usize> = HashMap::default();
    for (pos, op) in real.iter().enumerate() {
        if let Some(k) = stream_key(op) {
            let i = counts.entry(k).or_insert(0);
            at.insert((k, *i), pos + 1);
            *i += 1;
        }
    }
    let mut starts: Vec<usize> = Vec::with_capacity(bounds.len());
    for b in &bounds {
        let p = b.and_then(|b| at.get(&b).copied()).unwrap_or(0);
        starts.push(p.max(starts.last().copied().unwrap_or(0)));
    }
    let mut out = Vec::with_capacity(starts.len());
    for (j, &s) in starts.iter().enumerate() {
        let e = starts.get(j + 1).copied().unwrap_or(real.len());
        let mut phase = Phase::default();
        let mut seen = HashMap::default();
        let mut pending = 0;
        for op in &real[s..e] {
            match op {
                TiOp::Calc(ns) => {
                    pending += ns;
                    phase.total += ns;
                }
                _ => {
                    if let Some(p) = place(op, &mut seen) {
                        phase.before.insert(p, pending);
                    }
                    pending = 0;
                }
            }
        }
        out.push(phase);
    }
    out
}

/// Rank r''s operations: the skeleton's `steps` with the computation of
/// the real rank's `phases` (scaled by `ratio`): before each message the
/// calc that preceded the message in the same place of the real phase, and
/// at the phase's compute point the rest of the phase's computation.
fn with_times(steps: &[Step], phases: &[Phase], ratio: f64) -> Vec<TiOp> {
    let scaled = |ns: u64| (ns as f64 * ratio).round() as u64;
    let mut ops = Vec::with_capacity(steps.len() + phases.len());
    let mut phase = 0;
    let mut i = 0;
    while i < steps.len() {
        let Step::Compute = steps[i] else {
            if let Step::Op(op) = steps[i] {
                ops.push(op);
            }
            i += 1;
            continue;
        };
        let end = steps[i + 1..]
            .iter()
            .position(|s| *s == Step::Compute)
            .map_or(steps.len(), |p| i + 1 + p);
        let real = &phases[phase];
        let mut seen = HashMap::default();
        let before: Vec<u64> = steps[i + 1..end]
            .iter()
            .map(|s| match s {
                Step::Op(op) => place(op, &mut seen)
                    .and_then(|p| real.before.get(&p).copied())
                    .unwrap_or(0),
                Step::Compute => 0,
            })
            .collect();
        let rest = scaled(real.total.saturating_sub(before.iter().sum()));
        if rest > 0 {
            ops.push(TiOp::Calc(rest));
        }
        for (s, ns) in steps[i + 1..end].iter().zip(before) {
            if let Step::Op(op) = s {
                let ns = scaled(ns);
                if ns > 0 {
                    ops.push(TiOp::Calc(ns));
                }
                ops.push(*op);
            }
        }
        phase += 1;
        i = end;
    }
    ops
}

/// A skeleton ready for `real`: what it needs to learn from the trace.
fn prepare(opts: &ScaleOptions, real: &TiTrace) -> Result<Skeleton, ScaleError> {
    let class = || {
        opts.class.ok_or_else(|| {
            ScaleError::Options(format!(
                "--skeleton {} needs --class (S, W, A, B, C, D)",
                kernel_name(opts.kernel)
            ))
        })
    };
    let mismatch = |what: String| ScaleError::Mismatch {
        kernel: kernel_name(opts.kernel),
        what,
    };
    Ok(match opts.kernel {
        Kernel::Stencil => Skeleton::Stencil(stencil::Stencil::learn(real).map_err(mismatch)?),
        Kernel::Cg => Skeleton::Cg(cg::Cg::new(class()?, real).map_err(ScaleError::Options)?),
        Kernel::Is => Skeleton::Is(is::Is::new(class()?, real).map_err(ScaleError::Options)?),
    })
}

/// Makes the pseudo traces of `opts.to` ranks from the real trace `real`
/// (the module docs say how), handing each rank's operations to `out` in
/// rank order, so that no more than one rank is held in memory.
pub fn scale(
    real: &TiTrace,
    opts: &ScaleOptions,
    mut out: impl FnMut(usize, &[TiOp]) -> Result<(), String>,
) -> Result<(), ScaleError> {
    let n = real.ranks.len();
    if n == 0 || opts.to == 0 {
        return Err(ScaleError::Options(
            "both the trace and --to need at least one rank".into(),
        ));
    }
    let kernel = kernel_name(opts.kernel);
    let skel = prepare(opts, real)?;
    let mismatch = |what: String| ScaleError::Mismatch { kernel, what };
    // Step 2, and each real rank's phases.
    let mut phases = Vec::with_capacity(n);
    for (m, ops) in real.ranks.iter().enumerate() {
        let steps = skel
            .steps(m, n)
            .map_err(|e| ScaleError::Options(format!("at the trace's size {n}: {e}")))?;
        if let Some(d) = first_stream_difference(&ops_of(&steps), ops) {
            return Err(mismatch(format!(
                "rank {m} of {n}: {d} (skeleton against trace; record with \
                 MTTL_AGGREGATE=0 and MTTL_TRACE_FLUSH=memory or local, see docs/prediction.md)"
            )));
        }
        phases.push(self::phases(&steps, ops));
    }
    for r in 0..opts.to {
        let m = r * n / opts.to;
        let steps = skel
            .steps(r, opts.to)
            .map_err(|e| ScaleError::Options(format!("at --to {}: {e}", opts.to)))?;
        let computes = steps.iter().filter(|s| **s == Step::Compute).count();
        if computes != phases[m].len() {
            return Err(mismatch(format!(
                "rank {r} of {} has {computes} compute phases but rank {m} of {n} has {}",
                opts.to,
                phases[m].len()
            )));
        }
        let ratio = skel.work(r, opts.to) / skel.work(m, n);
        let ops = with_times(&steps, &phases[m], ratio);
        out(r, &ops).map_err(ScaleError::Write)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(peer: u32, tag: u64) -> TiOp {
        TiOp::Send {
            peer,
            bytes: 8,
            tag,
        }
    }
    fn recv(peer: u32, tag: u64) -> TiOp {
        TiOp::Recv {
            peer,
            bytes: 8,
            tag,
        }
    }

    #[test]
    fn streams_ignore_the_interleaving_of_peers_but_not_the_order_within_one() {
        let a = [send(1, 3), recv(2, 3), send(1, 4), TiOp::Calc(5)];
        let b = [recv(2, 3), send(1, 4), send(1, 3)];
        assert_eq!(first_stream_difference(&a, &b), None);
        let c = [send(1, 3), recv(2, 3), send(1, 4), send(1, 3)];
        let d = first_stream_difference(&a, &c).unwrap();
        assert!(d.contains("1 against 2 messages to 1 tag 3"), "{d}");
    }

    #[test]
    fn a_phase_gives_each_message_the_calc_before_it_in_the_same_place() {
        let steps = [
            Step::Compute,
            Step::Op(send(1, 3)),
            Step::Op(recv(1, 3)),
            Step::Compute,
            Step::Op(send(1, 3)),
            Step::Op(recv(1, 3)),
            Step::Compute,
        ];
        // The real rank took its first receive after a calc of 7.
        let real = [
            TiOp::Calc(2),
            send(1, 3),
            TiOp::Calc(7),
            recv(1, 3),
            TiOp::Calc(10),
            send(1, 3),
            recv(1, 3),
            TiOp::Calc(100),
        ];
        let p = phases(&steps, &real);
        assert_eq!(
            p.iter().map(|p| p.total).collect::<Vec<_>>(),
            vec![9, 10, 100]
        );
        // At the same size, the real rank's times come back where they were.
        assert_eq!(with_times(&steps, &p, 1.0), real.to_vec());
        // A pseudo rank talking to rank 2 instead takes the same times, halved.
        let other: Vec<Step> = steps
            .iter()
            .map(|s| match s {
                Step::Op(TiOp::Send { tag, .. }) => Step::Op(send(2, *tag)),
                Step::Op(TiOp::Recv { tag, .. }) => Step::Op(recv(2, *tag)),
                s => *s,
            })
            .collect();
        let ops = with_times(&other, &p, 0.5);
        assert_eq!(ops[0], TiOp::Calc(1));
        assert_eq!(ops[2], TiOp::Calc(4));
        assert_eq!(ops.last(), Some(&TiOp::Calc(50)));
    }
}
