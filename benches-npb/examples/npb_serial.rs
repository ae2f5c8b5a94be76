//! Single-process NPB CG and IS timings on the in-process driver, printed the
//! way NPB prints them, to compare with the reference binaries.
//!
//! ```text
//! cargo run --release -p benches-npb --example npb_serial -- --class A
//! cargo run --release -p benches-npb --example npb_serial -- --class B --kernel cg --procs 2
//! ```
//!
//! `--procs` runs that many virtual ranks as threads of this process (the
//! reference driver of the tests), which is useful for checking the parallel
//! decomposition, not for parallel timings. `--repeat` runs the benchmark
//! several times and reports each run and the best. The exit code is 1 if
//! any run fails verification.

use std::process::ExitCode;

use benches_npb::npb::{cg, is, sim, Class};
use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kernel {
    Cg,
    Is,
    Both,
}

#[derive(Debug, Parser)]
#[command(about = "NPB CG and IS on the in-process driver")]
struct Args {
    /// Problem class: S, W, A, B, C (D for CG only).
    #[arg(long, short, default_value = "S")]
    class: Class,
    /// Which benchmark to run.
    #[arg(long, short, value_enum, default_value = "both")]
    kernel: Kernel,
    /// Virtual ranks (a power of two).
    #[arg(long, short, default_value_t = 1)]
    procs: usize,
    /// Runs of each benchmark.
    #[arg(long, short, default_value_t = 1)]
    repeat: usize,
    /// Print every CG iteration's ‖r‖ and zeta.
    #[arg(long)]
    trace: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut ok = true;
    if matches!(args.kernel, Kernel::Cg | Kernel::Both) {
        ok &= run_cg(&args);
    }
    if matches!(args.kernel, Kernel::Is | Kernel::Both) {
        ok &= run_is(&args);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run_cg(args: &Args) -> bool {
    let params = args.class.cg();
    let nprocs = args.procs;
    println!("\n NAS Parallel Benchmarks 3.4 (mttl core) -- CG Benchmark\n");
    println!(" Size: {:>10}  (class {})", params.na, params.class);
    println!(" Iterations: {:>5}", params.niter);
    println!(" Number of processes: {:>5}", nprocs);
    println!(" Number of nonzeroes per row: {:>8}", params.nonzer);
    println!(" Eigenvalue shift: {:>9.3}", params.shift);

    let mut best = f64::INFINITY;
    let mut all_verified = true;
    for run in 1..=args.repeat {
        let runs = sim::run(nprocs, |c| {
            let me = c.rank();
            let result = cg::run_benchmark(c, params, nprocs, me);
            let secs = result.as_ref().map_or(0.0, |r| r.seconds);
            let max = c.max_f64(secs);
            result.map(|r| (r, max))
        });
        let (root, seconds) = match runs.into_iter().next() {
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                eprintln!(" error: {e}");
                return false;
            }
            None => return false,
        };
        if args.trace || run == 1 {
            println!("\n   iteration           ||r||                 zeta");
            for (i, it) in root.iterations.iter().enumerate() {
                if args.trace || i == 0 || i + 1 == root.iterations.len() {
                    println!(
                        "    {:5}       {:20.13e} {:19.13}",
                        i + 1,
                        it.rnorm,
                        it.zeta
                    );
                }
            }
        }
        let zeta = root.zeta();
        let verified = params.verify(zeta);
        all_verified &= verified;
        best = best.min(seconds);
        println!("\n Run {run}: initialization {:.3} s", root.setup_seconds);
        if verified {
            println!(" VERIFICATION SUCCESSFUL");
        } else {
            println!(
                " VERIFICATION FAILED (correct zeta is {:.13e})",
                params.zeta_verify
            );
        }
        println!(" Zeta is    {:.13e}", zeta);
        println!(" Error is   {:.13e}", params.error(zeta));
        println!(" Time in seconds = {:>24.2}", seconds);
        println!(" Mop/s total     = {:>24.2}", params.mops(seconds));
    }
    if args.repeat > 1 {
        println!(
            "\n CG class {} best of {}: {:.3} s, {:.2} Mop/s",
            params.class,
            args.repeat,
            best,
            params.mops(best)
        );
    }
    all_verified
}

fn run_is(args: &Args) -> bool {
    let params = match args.class.is() {
        Ok(p) => p,
        Err(e) => {
            eprintln!(" error: {e}");
            return false;
        }
    };
    let nprocs = args.procs;
    println!("\n NAS Parallel Benchmarks 3.4 (mttl core) -- IS Benchmark\n");
    println!(" Size:  {}  (class {})", params.total_keys(), params.class);
    println!(" Iterations:   {}", npb_iterations());
    println!(" Number of processes:     {}", nprocs);

    let mut best = f64::INFINITY;
    let mut all_verified = true;
    for run in 1..=args.repeat {
        let runs = sim::run(nprocs, |c| {
            let me = c.rank();
            let result = is::run_benchmark(c, params, nprocs, me);
            let secs = result.as_ref().map_or(0.0, |r| r.seconds);
            let max = c.max_f64(secs);
            result.map(|r| (r, max))
        });
        let mut passed = 0;
        let mut seconds = 0.0;
        let mut setup = 0.0;
        for r in runs {
            match r {
                Ok((r, max)) => {
                    for f in &r.failures {
                        println!(
                            " Failed partial verification: iteration {}, test key {}, rank {} (expected {})",
                            f.iteration, f.entry, f.found, f.expected
                        );
                    }
                    if !r.full.passed() {
                        println!(
                            " Full verify: {} keys out of sort, counts {}",
                            r.full.out_of_order,
                            if r.full.counts_ok { "ok" } else { "changed" }
                        );
                    }
                    passed += r.passed();
                    seconds = max;
                    setup = f64::max(setup, r.setup_seconds);
                }
                Err(e) => {
                    eprintln!(" error: {e}");
                    return false;
                }
            }
        }
        let verified = passed == params.passes_required(nprocs);
        all_verified &= verified;
        best = best.min(seconds);
        println!("\n Run {run}: key generation {:.3} s", setup);
        println!(
            " Verification    = {:>24} ({passed} of {} tests passed)",
            if verified {
                "SUCCESSFUL"
            } else {
                "UNSUCCESSFUL"
            },
            params.passes_required(nprocs)
        );
        println!(" Time in seconds = {:>24.2}", seconds);
        println!(" Mop/s total     = {:>24.2}", params.mops(seconds));
    }
    if args.repeat > 1 {
        println!(
            "\n IS class {} best of {}: {:.3} s, {:.2} Mop/s",
            params.class,
            args.repeat,
            best,
            params.mops(best)
        );
    }
    all_verified
}

fn npb_iterations() -> usize {
    benches_npb::npb::class::IS_ITERATIONS
}
