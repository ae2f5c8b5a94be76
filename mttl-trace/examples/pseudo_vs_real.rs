//! Pseudo traces against real ones, as figures (measure (b) of the
//! prediction issue; `docs/benchmarks.md` has the results and the method).
//!
//! For the stencil example, NPB CG and NPB IS (class given), records real traces
//! of 2, 4 and 8 ranks (`MTTL_AGGREGATE=0`, `MTTL_TRACE_FLUSH=local`),
//! makes pseudo traces 2 -> 4 and 4 -> 8, and prints for each whether
//! every rank's messages equal the real run's stream by stream, and the
//! simulated times (default LogGOPS parameters) of the real trace of N'
//! ranks, of the same trace in the skeleton's order (pseudo N' -> N': each
//! rank's own times, the receives where the skeleton puts them rather than
//! where the handler took them), and of the pseudo traces, with the pseudo
//! traces' difference from both. Then the time
//! `scale` takes for `--big-to` ranks of the CG trace given by `--big`.
//!
//! ```text
//! cargo build --release --examples && cargo build --release -p benches-npb
//! cargo run --release -p mttl-trace --example pseudo_vs_real -- \
//!     [--class S] [--repeat 3] [--big DIR --big-class C --big-to 1024]
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use mttl_trace::scale::{first_stream_difference, scale, Kernel, ScaleOptions};
use mttl_trace::ti::TiWriter;
use mttl_trace::TiTrace;

#[derive(Parser)]
struct Args {
    /// CG's and IS's class.
    #[arg(long, default_value = "S")]
    class: char,
    /// Recordings of each size.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Where the binaries are (target/release).
    #[arg(long, default_value = "target/release")]
    bin: PathBuf,
    /// A real CG trace to time `scale` on.
    #[arg(long)]
    big: Option<PathBuf>,
    /// Its class.
    #[arg(long, default_value = "C")]
    big_class: char,
    /// Ranks to make from it.
    #[arg(long, default_value_t = 1024)]
    big_to: usize,
}

fn tmp(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mttl-pvr-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn record(mut cmd: Command, n: usize, what: &str) -> TiTrace {
    let dir = tmp(what);
    let out = cmd
        .env("MTTL_NP", n.to_string())
        .env("MTTL_TRACE", &dir)
        .env("MTTL_AGGREGATE", "0")
        .env("MTTL_TRACE_FLUSH", "local")
        .output()
        .expect("the kernel's binary runs");
    assert!(out.status.success(), "{what} failed: {out:?}");
    let t = mttl_trace::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    TiTrace::from_trace(&t)
}

fn simulate(t: &TiTrace, what: &str) -> f64 {
    let d = tmp(what);
    t.write_dir(&d).expect("a temporary directory");
    let sched = mttl_sim::input::load(&d).unwrap_or_else(|e| panic!("{e}"));
    let r = mttl_sim::simulate(&sched, &mttl_sim::Params::default());
    assert!(r.deadlock.is_none(), "{what}: deadlock");
    let _ = std::fs::remove_dir_all(&d);
    r.max.0 as f64 / 1e6
}

fn pseudo(real: &TiTrace, kernel: Kernel, class: Option<char>, to: usize) -> TiTrace {
    let mut out = TiTrace::default();
    let opts = ScaleOptions { kernel, class, to };
    scale(real, &opts, |_, ops| {
        out.ranks.push(ops.to_vec());
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    out
}

fn kernel_rows(name: &str, kernel: Kernel, class: Option<char>, run: &dyn Fn(usize) -> TiTrace) {
    let real: Vec<(usize, TiTrace)> = [2, 4, 8].into_iter().map(|n| (n, run(n))).collect();
    for (from, to) in [(0, 1), (1, 2)] {
        let (n, ref small) = real[from];
        let (n2, ref large) = real[to];
        let p = pseudo(small, kernel, class, n2);
        let same = p
            .ranks
            .iter()
            .zip(&large.ranks)
            .all(|(a, b)| first_stream_difference(a, b).is_none());
        let t_real = simulate(large, "real");
        let t_order = simulate(&pseudo(large, kernel, class, n2), "order");
        let t_pseudo = simulate(&p, "pseudo");
        let diff = |t: f64| (t_pseudo / t - 1.0) * 100.0;
        println!(
            "{name:<10} {n:>2} -> {n2:<2} {:<8} {t_real:>10.3} {t_order:>10.3} {t_pseudo:>10.3} \
             {:>+8.1}% {:>+8.1}%",
            if same { "yes" } else { "NO" },
            diff(t_real),
            diff(t_order),
        );
    }
}

fn main() {
    let a = Args::parse();
    let stencil = a.bin.join("examples/stencil");
    let npb = a.bin.join("npb");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# load average: {}", load.trim());
    println!(
        "{:<10} {:<8} {:<8} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "kernel", "N -> N'", "streams", "real ms", "order ms", "pseudo ms", "vs real", "vs order"
    );
    let cg = format!("cg {}", a.class);
    let is = format!("is {}", a.class);
    for _ in 0..a.repeat {
        kernel_rows("stencil", Kernel::Stencil, None, &|n| {
            record(Command::new(&stencil), n, "stencil")
        });
        kernel_rows(&cg, Kernel::Cg, Some(a.class), &|n| {
            let mut c = Command::new(&npb);
            c.args(["cg", "--class", &a.class.to_string(), "-n", &n.to_string()]);
            record(c, n, "cg")
        });
        kernel_rows(&is, Kernel::Is, Some(a.class), &|n| {
            let mut c = Command::new(&npb);
            c.args(["is", "--class", &a.class.to_string(), "-n", &n.to_string()]);
            record(c, n, "is")
        });
    }
    if let Some(big) = &a.big {
        big_scale(big, a.big_class, a.big_to);
    }
}

/// Times `scale` of the CG trace in `dir` to `to` ranks, files written.
fn big_scale(dir: &Path, class: char, to: usize) {
    let t0 = Instant::now();
    let trace = mttl_trace::read_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    let real = TiTrace::from_trace(&trace);
    let read = t0.elapsed().as_secs_f64();
    let out = tmp("big");
    let mut w = TiWriter::new(&out, to).expect("a temporary directory");
    let mut ops = 0usize;
    let t1 = Instant::now();
    let opts = ScaleOptions {
        kernel: Kernel::Cg,
        class: Some(class),
        to,
    };
    scale(&real, &opts, |r, list| {
        ops += list.len();
        w.write_rank(r, list).map_err(|e| e.to_string())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let made = t1.elapsed().as_secs_f64();
    let bytes: u64 = std::fs::read_dir(&out)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "scale CG {class} {} -> {to} ranks: reading and exporting the trace {read:.2} s, \
         making and writing the pseudo traces {made:.2} s ({ops} operations, {:.0} MB)",
        real.ranks.len(),
        bytes as f64 / 1e6
    );
    let t2 = Instant::now();
    let sched = mttl_sim::input::load(&out).unwrap_or_else(|e| panic!("{e}"));
    let loaded = t2.elapsed().as_secs_f64();
    let r = mttl_sim::simulate(&sched, &mttl_sim::Params::default());
    println!(
        "simulated: {:.3} s predicted; loading {loaded:.2} s, simulating {:.2} s ({} events)",
        r.max.0 as f64 / 1e9,
        r.seconds,
        r.events
    );
    let _ = std::fs::remove_dir_all(&out);
}
