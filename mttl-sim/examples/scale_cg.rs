//! Benchmark: how `mttl-sim` scales on a schedule shaped like NPB CG.
//!
//! ```text
//! cargo build --release -p mttl-sim --examples
//! target/release/examples/scale_cg [--ranks 1024] [--iters 75] [--inner 25] [--na 150000]
//!     [--profile NAME]
//! ```
//!
//! Builds, in memory (no text to parse), the communication of NPB CG's
//! conjugate-gradient kernel on a 2-D process grid as the reference code
//! arranges it (defaults: class C, 75 iterations of 25 CG steps, 150,000
//! rows), then simulates it with LogGOPSim's default parameters or those of
//! `--profile` (`k-torus` on the most cube-like 3-D torus). Per CG
//! step each rank: computes its block of the matrix-vector product; sums
//! the partial vector across its grid row in log2(columns) exchanges with
//! the partner whose column differs in one bit; swaps the result with its
//! transpose partner; and makes two dot products, each a log2(columns)
//! exchange of 8 bytes. Each outer iteration adds the residual's norm and
//! two more dot products. Exchanges are a send and a receive both waiting
//! for the previous step. It prints the schedule's size, the time to build
//! and to simulate it, the events and the peak memory (`VmHWM`), so that
//! runs at several rank counts show whether memory grows linearly.

use std::time::Instant;

use mttl_sim::{simulate_on, DepKind, NewOp, OpKind, Params, Profile, ScheduleBuilder, Torus};

struct Shape {
    profile: Option<&'static Profile>,
    ranks: u32,
    iters: u32,
    inner: u32,
    na: u64,
}

fn parse_args() -> Result<Shape, String> {
    let mut s = Shape {
        profile: None,
        ranks: 1024,
        iters: 75,
        inner: 25,
        na: 150_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().ok_or(format!("{a} needs a value"))?;
        if a == "--profile" {
            s.profile = Some(Profile::named(&v).ok_or(format!("no profile `{v}`"))?);
            continue;
        }
        let n: u64 = v
            .parse()
            .map_err(|_| format!("{a}: `{v}` is not a whole number"))?;
        let small = || u32::try_from(n).map_err(|_| format!("{a}: {n} is too large"));
        match a.as_str() {
            "--ranks" => s.ranks = small()?,
            "--iters" => s.iters = small()?,
            "--inner" => s.inner = small()?,
            "--na" => s.na = n,
            _ => return Err(format!("unknown argument `{a}` (see the file's header)")),
        }
    }
    if !s.ranks.is_power_of_two() {
        return Err(format!(
            "--ranks {}: CG runs on a power of two ranks",
            s.ranks
        ));
    }
    Ok(s)
}

/// One rank's operations, chained: every step waits for the previous one.
struct Chain<'a> {
    b: &'a mut ScheduleBuilder,
    prev: Vec<u32>,
}

impl Chain<'_> {
    fn after_prev(&mut self, op: NewOp) -> Result<u32, String> {
        let id = self.b.add_op(op, 0).map_err(|e| e.to_string())?;
        for &p in &self.prev {
            self.b
                .add_dep(id, p, DepKind::Requires, 0)
                .map_err(|e| e.to_string())?;
        }
        Ok(id)
    }

    fn calc(&mut self, ns: u64) -> Result<(), String> {
        let op = NewOp {
            kind: OpKind::Calc,
            size: ns,
            peer: 0,
            tag: 0,
            cpu: 0,
            nic: 0,
        };
        self.prev = vec![self.after_prev(op)?];
        Ok(())
    }

    fn exchange(&mut self, peer: u32, bytes: u64, tag: u32) -> Result<(), String> {
        let op = |kind| NewOp {
            kind,
            size: bytes,
            peer,
            tag,
            cpu: 0,
            nic: 0,
        };
        let s = self.after_prev(op(OpKind::Send))?;
        let r = self.after_prev(op(OpKind::Recv))?;
        self.prev = vec![s, r];
        Ok(())
    }
}

fn build(sh: &Shape) -> Result<mttl_sim::Schedule, String> {
    let log2 = sh.ranks.trailing_zeros();
    // NPB's grid: columns = rows, or twice as many for an odd power of two.
    let l2cols = log2.div_ceil(2);
    let cols = 1u32 << l2cols;
    let rows = sh.ranks / cols;
    let local_rows = sh.na / u64::from(rows);
    // Work per CG step and rank: NPB's matrix has about 240 nonzeros per
    // row (36 M for class C), 2 flops each, taken at 2 flops per ns.
    let matvec_ns = 240 * sh.na / u64::from(sh.ranks);
    let mut b = ScheduleBuilder::new("cg-like (generated)", sh.ranks);
    for rank in 0..sh.ranks {
        b.begin_rank(rank, 0).map_err(|e| e.to_string())?;
        let (row, col) = (rank / cols, rank % cols);
        // The transpose partner: the same place in the transposed grid.
        let transpose = if rows == cols {
            col * cols + row
        } else {
            (col / 2) * cols + row * 2 + col % 2
        };
        let mut c = Chain {
            b: &mut b,
            prev: Vec::new(),
        };
        let mut tag = 0u32;
        let mut reduce = |c: &mut Chain<'_>, bytes: u64| -> Result<(), String> {
            for i in 0..l2cols {
                let peer = row * cols + (col ^ (1 << i));
                c.exchange(peer, bytes, tag % 1000)?;
                tag += 1;
            }
            Ok(())
        };
        for _ in 0..sh.iters {
            for _ in 0..sh.inner {
                c.calc(matvec_ns.max(1))?;
                reduce(&mut c, local_rows * 8)?;
                if transpose != rank {
                    c.exchange(transpose, local_rows * 8, 1000)?;
                }
                reduce(&mut c, 8)?;
                reduce(&mut c, 8)?;
            }
            c.calc(matvec_ns.max(1))?;
            reduce(&mut c, local_rows * 8)?;
            if transpose != rank {
                c.exchange(transpose, local_rows * 8, 1000)?;
            }
            reduce(&mut c, 8)?;
            reduce(&mut c, 8)?;
        }
        b.end_rank();
    }
    b.finish().map_err(|e| e.to_string())
}

/// Peak resident memory of this process, bytes (Linux; 0 elsewhere).
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn main() -> std::process::ExitCode {
    let sh = match parse_args() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scale_cg: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let t0 = Instant::now();
    let sched = match build(&sh) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scale_cg: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let built = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let params = sh.profile.map_or(Params::default(), |p| p.params);
    let torus = match sh.profile.and_then(|p| p.hop_latency) {
        Some(hop) => match Torus::new(Torus::cube_for(sched.num_ranks()), hop, sched.num_ranks()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("scale_cg: {e}");
                return std::process::ExitCode::from(1);
            }
        },
        None => None,
    };
    let report = simulate_on(&sched, &params, torus);
    let simulated = t1.elapsed().as_secs_f64();
    let rss = peak_rss();
    println!("| ranks | operations | events | build s | simulate s | events/s | peak RSS MB | bytes/op | predicted ms | deadlock |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {built:.2} | {simulated:.2} | {:.2e} | {:.0} | {:.0} | {:.3} | {} |",
        sh.ranks,
        sched.num_ops(),
        report.events,
        report.events as f64 / simulated,
        rss as f64 / 1e6,
        rss as f64 / sched.num_ops() as f64,
        report.max.0 as f64 / 1e6,
        if report.deadlock.is_some() {
            "YES"
        } else {
            "no"
        },
    );
    if report.deadlock.is_some() {
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
