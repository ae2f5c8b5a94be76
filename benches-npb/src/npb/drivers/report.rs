//! What a benchmark run reports: NPB's standard report (`print_results`),
//! or one JSON document for machines.
//!
//! Both variants of a kernel build the same [`Outcome`] on rank 0, so their
//! reports differ only in the variant and backend lines.

use std::fmt;
use std::io::Write as _;

use serde_json::{json, Value};

use crate::npb::cg::CgIteration;
use crate::npb::is::PartialFailure;
use crate::npb::Class;

/// The version NPB's report names: the reference the core reproduces.
const NPB_VERSION: &str = "3.4";

/// An NPB kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Kernel {
    /// Conjugate gradient.
    Cg,
    /// Integer sort.
    Is,
}

impl Kernel {
    /// The kernel's name as NPB prints it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Cg => "CG",
            Kernel::Is => "IS",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a kernel's processes communicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Variant {
    /// The paper's style on mttl: tasks invoked from node 0, remote writes,
    /// mttl collectives.
    Mttl,
    /// A straight port of NPB's MPI structure onto rsmpi (the baseline).
    Mpi,
}

impl Variant {
    /// The name `--variant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Mttl => "mttl",
            Variant::Mpi => "mpi",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What decides a run's verification.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// CG: the final zeta against the official one.
    Cg {
        /// ‖r‖ and zeta of every timed iteration (rank 0's).
        trace: Vec<CgIteration>,
        /// The official zeta.
        zeta_verify: f64,
    },
    /// IS: passed partial and full tests, summed over the processes.
    Is {
        /// Tests passed.
        passed: usize,
        /// Tests a successful run passes.
        required: usize,
    },
}

/// One benchmark run, as rank 0 reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The kernel.
    pub kernel: Kernel,
    /// The problem class.
    pub class: Class,
    /// The variant that ran.
    pub variant: Variant,
    /// The communication backend (`"tcp"` or `"mpi"`).
    pub backend: String,
    /// Number of processes.
    pub nprocs: usize,
    /// NPB's "Size": the matrix order (CG) or the number of keys (IS).
    pub size: usize,
    /// Timed iterations.
    pub iterations: usize,
    /// "Time in seconds": the timed loop, slowest process.
    pub seconds: f64,
    /// Untimed set-up (matrix or key generation), slowest process.
    pub setup_seconds: f64,
    /// "Mop/s total".
    pub mops: f64,
    /// Whether the run verified.
    pub verified: bool,
    /// The numbers behind `verified`.
    pub check: Check,
}

impl Outcome {
    /// A CG run: `trace` is rank 0's, the times the slowest process's.
    pub fn cg(
        class: Class,
        variant: Variant,
        backend: &str,
        nprocs: usize,
        trace: Vec<CgIteration>,
        seconds: f64,
        setup_seconds: f64,
    ) -> Outcome {
        let params = class.cg();
        let zeta = trace.last().map_or(f64::NAN, |it| it.zeta);
        Outcome {
            kernel: Kernel::Cg,
            class,
            variant,
            backend: backend.to_owned(),
            nprocs,
            size: params.na,
            iterations: params.niter,
            seconds,
            setup_seconds,
            mops: params.mops(seconds),
            verified: trace.len() == params.niter && params.verify(zeta),
            check: Check::Cg {
                trace,
                zeta_verify: params.zeta_verify,
            },
        }
    }

    /// An IS run: `passed` summed over the processes.
    ///
    /// # Panics
    ///
    /// If IS has no parameters for `class` (drivers check that first).
    #[allow(clippy::too_many_arguments)]
    pub fn is(
        class: Class,
        variant: Variant,
        backend: &str,
        nprocs: usize,
        passed: usize,
        seconds: f64,
        setup_seconds: f64,
    ) -> Outcome {
        let params = class.is().expect("drivers check the class first");
        let required = params.passes_required(nprocs);
        Outcome {
            kernel: Kernel::Is,
            class,
            variant,
            backend: backend.to_owned(),
            nprocs,
            size: params.total_keys(),
            iterations: crate::npb::class::IS_ITERATIONS,
            seconds,
            setup_seconds,
            mops: params.mops(seconds),
            verified: passed == required,
            check: Check::Is { passed, required },
        }
    }

    /// The process exit code: 0 if the run verified, else 1.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.verified)
    }

    /// Prints NPB's report on stdout: the kernel's own verification lines,
    /// then `print_results`'s block.
    pub fn print(&self) {
        print!("{}", self.report());
    }

    /// The text [`print`](Self::print) writes.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(String::new());
        line(format!(
            " NAS Parallel Benchmarks {NPB_VERSION} -- {} Benchmark",
            self.kernel
        ));
        line(String::new());
        line(format!(" Size: {:>12}  (class {})", self.size, self.class));
        line(format!(" Iterations: {:>5}", self.iterations));
        line(format!(" Number of processes: {:>5}", self.nprocs));
        match &self.check {
            Check::Cg { trace, zeta_verify } => {
                line(String::new());
                line("   iteration           ||r||                 zeta".into());
                for (it, step) in trace.iter().enumerate() {
                    line(format!(
                        "    {:>5}       {:>20.13e} {:>20.13}",
                        it + 1,
                        step.rnorm,
                        step.zeta
                    ));
                }
                let zeta = trace.last().map_or(f64::NAN, |it| it.zeta);
                line(String::new());
                line(" Benchmark completed".into());
                if self.verified {
                    line(" VERIFICATION SUCCESSFUL".into());
                } else {
                    line(" VERIFICATION FAILED".into());
                }
                line(format!(" Zeta is    {zeta:20.13e}"));
                line(format!(
                    " Error is   {:20.13e}",
                    ((zeta - zeta_verify) / zeta_verify).abs()
                ));
                if !self.verified {
                    line(format!(" The correct zeta is {zeta_verify:20.13e}"));
                }
            }
            Check::Is { passed, required } => {
                line(String::new());
                line(format!(" Tests passed: {passed} of {required}"));
            }
        }
        line(String::new());
        line(String::new());
        line(format!(" {} Benchmark Completed.", self.kernel));
        let field = |label: &str, value: String| format!(" {label:<16}={value:>25}");
        line(field("Class", self.class.to_string()));
        line(field("Size", self.size.to_string()));
        line(field("Iterations", self.iterations.to_string()));
        line(field("Time in seconds", format!("{:.2}", self.seconds)));
        line(field("Total processes", self.nprocs.to_string()));
        line(field("Mop/s total", format!("{:.2}", self.mops)));
        line(field(
            "Mop/s/process",
            format!("{:.2}", self.mops / self.nprocs as f64),
        ));
        line(field(
            "Operation type",
            match self.kernel {
                Kernel::Cg => "floating point",
                Kernel::Is => "keys ranked",
            }
            .into(),
        ));
        line(field(
            "Verification",
            if self.verified {
                "SUCCESSFUL"
            } else {
                "UNSUCCESSFUL"
            }
            .into(),
        ));
        line(field("Version", NPB_VERSION.into()));
        line(field("Variant", self.variant.to_string()));
        line(field("Comm backend", self.backend.clone()));
        line(String::new());
        out
    }

    /// The run as one JSON object.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "kernel": self.kernel.name(),
            "class": self.class.to_string(),
            "variant": self.variant.name(),
            "backend": self.backend,
            "nprocs": self.nprocs,
            "size": self.size,
            "iterations": self.iterations,
            "seconds": self.seconds,
            "setup_seconds": self.setup_seconds,
            "mops": self.mops,
            "verified": self.verified,
        });
        match &self.check {
            Check::Cg { trace, zeta_verify } => {
                v["zeta"] = json!(trace.last().map(|it| it.zeta));
                v["zeta_verify"] = json!(zeta_verify);
                v["rnorm_first"] = json!(trace.first().map(|it| it.rnorm));
            }
            Check::Is { passed, required } => {
                v["tests_passed"] = json!(passed);
                v["tests_required"] = json!(required);
            }
        }
        v
    }
}

/// Prints, on stderr, the partial verification tests process `me` failed,
/// as NPB does where they happen, one write per line.
pub fn report_failures(me: usize, failures: &[PartialFailure]) {
    for f in failures {
        // One write per line: ranks share the pipe.
        let line = format!(
            "Failed partial verification: iteration {}, processor {me}, test key {}: rank {} instead of {}\n",
            f.iteration, f.entry, f.found, f.expected
        );
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg_s(zeta: f64) -> Outcome {
        let trace = vec![CgIteration { rnorm: 1e-13, zeta }; 15];
        Outcome::cg(Class::S, Variant::Mttl, "tcp", 2, trace, 0.5, 0.1)
    }

    #[test]
    fn the_report_has_npb_fields_and_verdict() {
        let ok = cg_s(8.597_177_507_864_8);
        assert!(ok.verified);
        assert_eq!(ok.exit_code(), 0);
        let text = ok.report();
        assert!(text.contains(" Class           =                        S\n"));
        assert!(text.contains(" Time in seconds =                     0.50\n"));
        assert!(text.contains(" Total processes =                        2\n"));
        assert!(text.contains(" Verification    =               SUCCESSFUL\n"));
        assert!(text.contains(" Mop/s total     ="));

        let bad = cg_s(8.6);
        assert!(!bad.verified);
        assert_eq!(bad.exit_code(), 1);
        assert!(bad
            .report()
            .contains(" Verification    =             UNSUCCESSFUL\n"));
        assert_eq!(bad.to_json()["verified"], json!(false));
    }

    #[test]
    fn is_verifies_on_the_full_count_only() {
        let p = Class::S.is().unwrap();
        let ok = Outcome::is(
            Class::S,
            Variant::Mpi,
            "mpi",
            4,
            p.passes_required(4),
            0.1,
            0.0,
        );
        assert!(ok.verified);
        assert_eq!(ok.to_json()["tests_required"], json!(54));
        let bad = Outcome::is(Class::S, Variant::Mpi, "mpi", 4, 53, 0.1, 0.0);
        assert!(!bad.verified);
        assert!(bad.report().contains("Tests passed: 53 of 54"));
    }
}
