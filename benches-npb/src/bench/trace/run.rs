//! One measured run of a workload: the job started as a child process with
//! the tracing settings of its column, its own time read from what it
//! prints, its peak memory from the kernel's accounting of the child's
//! process tree (`wait4`: the largest resident set of the child and of
//! every descendant it waited for, which covers a launcher and its ranks),
//! and, when traced, the trace measured with `mttl-trace` (size, the
//! reconstructed time of the timed region, the clock condition).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::worker::{Program, RESULT_PREFIX};
use crate::bench::BenchError;
use crate::npb::drivers::TIMED_REGION;

/// A workload's job: which program, on how many ranks and which backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Job {
    /// NPB (`cg`, `is` with a class) or one of the small programs.
    pub(crate) what: Workload,
    /// Ranks.
    pub(crate) np: usize,
    /// `tcp` or `mpi`.
    pub(crate) backend: &'static str,
}

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Workload {
    /// `npb KERNEL -c CLASS`.
    Npb {
        /// `cg` or `is`.
        kernel: &'static str,
        /// The class letter.
        class: char,
    },
    /// A small program of [`super::worker`].
    Small {
        /// Which.
        program: Program,
        /// Its `--iters`.
        iters: u64,
        /// Its `--size`.
        size: u64,
    },
}

/// How a run traces: the environment of its column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tracing {
    /// `MTTL_TRACE_FLUSH`.
    pub(crate) flush: String,
    /// `MTTL_TRACE_BUFFER`.
    pub(crate) buffer: String,
    /// `MTTL_TRACE_THRESHOLD`, if set.
    pub(crate) threshold: Option<String>,
    /// `MTTL_TRACE_RESYNC`.
    pub(crate) resync: &'static str,
    /// `MTTL_TRACE_LEVEL`, if set.
    pub(crate) level: Option<&'static str>,
}

/// What one run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Measured {
    /// The program's own time of its timed part (the slowest rank's), s.
    pub(crate) seconds: f64,
    /// The matrix product's block products (the slowest rank's), s.
    pub(crate) compute: Option<f64>,
    /// The matrix product's mean block product right after a trace write
    /// (all ranks), s; `None` without a write.
    pub(crate) block_after_flush: Option<f64>,
    /// The same of the other block products.
    pub(crate) block_other: Option<f64>,
    /// The largest resident set of the job's processes, bytes.
    pub(crate) peak_rss: u64,
    /// The trace's bytes on disk.
    pub(crate) trace_bytes: u64,
    /// The timed region's time with suspensions and lone writes removed
    /// (the slowest rank's), s.
    pub(crate) reconstructed: Option<f64>,
    /// Clock-condition violations left after correction, and messages
    /// without a pair.
    pub(crate) violations: Option<u64>,
    /// The suspensions (synchronized writes) of the rank that had most.
    pub(crate) suspensions: Option<u64>,
    /// The largest rank's trace file, bytes.
    pub(crate) largest_file: u64,
}

impl Measured {
    /// As a JSON object (the `--results` file).
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "seconds": self.seconds,
            "compute_seconds": self.compute,
            "block_after_flush_seconds": self.block_after_flush,
            "block_other_seconds": self.block_other,
            "peak_rss_bytes": self.peak_rss,
            "trace_bytes": self.trace_bytes,
            "reconstructed_seconds": self.reconstructed,
            "violations": self.violations,
            "suspensions": self.suspensions,
            "largest_file_bytes": self.largest_file,
        })
    }

    /// Back from [`Measured::to_json`]; `None` if `v` is not one.
    pub(crate) fn from_json(v: &Value) -> Option<Measured> {
        Some(Measured {
            seconds: v["seconds"].as_f64()?,
            compute: v["compute_seconds"].as_f64(),
            block_after_flush: v["block_after_flush_seconds"].as_f64(),
            block_other: v["block_other_seconds"].as_f64(),
            peak_rss: v["peak_rss_bytes"].as_u64()?,
            trace_bytes: v["trace_bytes"].as_u64()?,
            reconstructed: v["reconstructed_seconds"].as_f64(),
            violations: v["violations"].as_u64(),
            suspensions: v["suspensions"].as_u64(),
            largest_file: v["largest_file_bytes"].as_u64().unwrap_or(0),
        })
    }
}

/// Where the programs are: `npb`, `mttl-trace` and this `mttl-bench`.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) npb: PathBuf,
    pub(crate) mttl_trace: PathBuf,
    pub(crate) bench: PathBuf,
}

impl Tools {
    /// The tools beside this program, or in `dir`; an error naming the
    /// one missing and how to build it.
    pub(crate) fn find(dir: Option<&Path>) -> Result<Tools, BenchError> {
        let bench = std::env::current_exe().map_err(|source| BenchError::Io {
            what: "find the path of",
            path: PathBuf::from("this program"),
            source,
        })?;
        let dir = match dir {
            Some(d) => d.to_owned(),
            None => bench.parent().map(Path::to_owned).unwrap_or_default(),
        };
        let tools = Tools {
            npb: dir.join("npb"),
            mttl_trace: dir.join("mttl-trace"),
            bench,
        };
        for p in [&tools.npb, &tools.mttl_trace] {
            if !p.is_file() {
                return Err(BenchError::Usage(format!(
                    "{} is missing: `mttl-bench trace` runs it; build it with `cargo build \
                     --release --workspace --all-features --bins` (or name its directory \
                     with --tools)",
                    p.display()
                )));
            }
        }
        Ok(tools)
    }
}

/// A failed run, as an error naming the job.
fn failed(job: &Job, detail: String) -> BenchError {
    BenchError::Usage(format!(
        "{} on {} ranks ({}): {detail}",
        job.label(),
        job.np,
        job.backend
    ))
}

impl Job {
    /// The job's key in a `--results` file: workload, size, backend, ranks.
    pub(crate) fn key(&self) -> String {
        let size = match self.what {
            Workload::Npb { .. } => String::new(),
            Workload::Small { iters, size, .. } => format!(" {iters}x{size}"),
        };
        format!("{}{size} {} {}", self.label(), self.backend, self.np)
    }

    /// The workload's name in the tables.
    pub(crate) fn label(&self) -> String {
        match self.what {
            Workload::Npb { kernel, class } => format!("{} {class}", kernel.to_uppercase()),
            Workload::Small { program, .. } => match program {
                Program::Pingpong => "pingpong".to_owned(),
                Program::Matmul => "matmul".to_owned(),
                Program::Heavy => "heavy".to_owned(),
                Program::Events => "events".to_owned(),
            },
        }
    }

    /// The command of one run, tracing into `dir` if given.
    fn command(&self, tools: &Tools, trace: Option<(&Path, &Tracing)>) -> Command {
        let mut cmd;
        match self.what {
            Workload::Npb { kernel, class } => {
                cmd = Command::new(&tools.npb);
                cmd.args([kernel, "-c", &class.to_string(), "-n", &self.np.to_string()])
                    .args(["--backend", self.backend, "--json"]);
            }
            Workload::Small {
                program,
                iters,
                size,
            } => {
                cmd = Command::new(&tools.bench);
                let name = clap::ValueEnum::to_possible_value(&program)
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default();
                cmd.args(["trace", "--worker", &name])
                    .args(["--iters", &iters.to_string(), "--size", &size.to_string()])
                    .env("MTTL_NP", self.np.to_string())
                    .env("MTTL_BACKEND", self.backend);
            }
        }
        for var in [
            "MTTL_TRACE",
            "MTTL_TRACE_FLUSH",
            "MTTL_TRACE_BUFFER",
            "MTTL_TRACE_THRESHOLD",
            "MTTL_TRACE_RESYNC",
            "MTTL_TRACE_LEVEL",
            "MTTL_NP",
            "MTTL_RANK",
        ] {
            if !(var == "MTTL_NP" && matches!(self.what, Workload::Small { .. })) {
                cmd.env_remove(var);
            }
        }
        if let Some((dir, t)) = trace {
            cmd.env("MTTL_TRACE", dir)
                .env("MTTL_TRACE_FLUSH", &t.flush)
                .env("MTTL_TRACE_BUFFER", &t.buffer)
                .env("MTTL_TRACE_RESYNC", t.resync);
            if let Some(th) = &t.threshold {
                cmd.env("MTTL_TRACE_THRESHOLD", th);
            }
            if let Some(level) = t.level {
                cmd.env("MTTL_TRACE_LEVEL", level);
            }
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs the job once, traced into `dir` (emptied first) if `trace`;
    /// with `analyse`, the trace is reconstructed and checked too.
    pub(crate) fn measure(
        &self,
        tools: &Tools,
        trace: Option<(&Path, &Tracing)>,
        analyse: bool,
    ) -> Result<Measured, BenchError> {
        if let Some((dir, _)) = trace {
            let _ = std::fs::remove_dir_all(dir);
        }
        let mut cmd = self.command(tools, trace);
        let (status, peak_rss, stdout, stderr) = run_measured(&mut cmd)
            .map_err(|e| failed(self, format!("cannot run {:?}: {e}", cmd.get_program())))?;
        if !status_ok(status) {
            return Err(failed(
                self,
                format!("the job failed (wait status {status}):\n{stderr}"),
            ));
        }
        let doc = result_doc(&stdout, self.what).ok_or_else(|| {
            failed(
                self,
                format!("no result in its output:\n{stdout}\n{stderr}"),
            )
        })?;
        let seconds = doc["seconds"]
            .as_f64()
            .ok_or_else(|| failed(self, format!("no seconds in {doc}")))?;
        if matches!(self.what, Workload::Npb { .. }) && doc["verified"] != Value::Bool(true) {
            return Err(failed(self, format!("the run did not verify: {doc}")));
        }
        let mut m = Measured {
            seconds,
            compute: doc["compute_seconds"].as_f64(),
            block_after_flush: doc["blocks"]["after_flush_mean_seconds"].as_f64(),
            block_other: doc["blocks"]["other_mean_seconds"].as_f64(),
            peak_rss,
            ..Measured::default()
        };
        if let Some((dir, _)) = trace {
            m.trace_bytes = dir_bytes(dir);
            m.largest_file = largest_file(dir);
            if !analyse {
                return Ok(m);
            }
            let rec = self.tool(tools, "reconstruct", dir)?;
            m.reconstructed = rec["regions"].as_array().and_then(|regions| {
                regions
                    .iter()
                    .filter(|g| g["name"] == TIMED_REGION)
                    .filter_map(|g| g["reconstructed_ns"].as_f64())
                    .reduce(f64::max)
                    .map(|ns| ns / 1e9)
            });
            m.suspensions = rec["ranks"]
                .as_array()
                .and_then(|ranks| ranks.iter().filter_map(|r| r["suspensions"].as_u64()).max());
            let check = self.tool(tools, "check", dir)?;
            m.violations = ["violations_after", "unmatched_sends", "unmatched_receives"]
                .iter()
                .map(|k| check[k].as_u64())
                .sum();
        }
        Ok(m)
    }

    /// `mttl-trace COMMAND --json DIR`'s document.
    fn tool(&self, tools: &Tools, command: &str, dir: &Path) -> Result<Value, BenchError> {
        let out = Command::new(&tools.mttl_trace)
            .args([command, "--json"])
            .arg(dir)
            .output()
            .map_err(|e| failed(self, format!("cannot run mttl-trace {command}: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).map_err(|e| {
            failed(
                self,
                format!(
                    "mttl-trace {command} {} gave no JSON ({e}): {}",
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        })
    }
}

/// The result object in a run's stdout: npb's JSON line, or a worker's
/// [`RESULT_PREFIX`] line.
fn result_doc(stdout: &str, what: Workload) -> Option<Value> {
    stdout.lines().find_map(|l| {
        let json = match what {
            Workload::Npb { .. } => l.trim().starts_with('{').then_some(l.trim())?,
            Workload::Small { .. } => l.strip_prefix(RESULT_PREFIX)?,
        };
        serde_json::from_str(json).ok()
    })
}

/// The sizes of the files in `dir`, bytes (none if it cannot be read).
fn file_sizes(dir: &Path) -> Vec<u64> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .collect()
        })
        .unwrap_or_default()
}

/// The bytes of the files in `dir`.
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    file_sizes(dir).iter().sum()
}

/// The largest file in `dir`, bytes.
fn largest_file(dir: &Path) -> u64 {
    file_sizes(dir).into_iter().max().unwrap_or(0)
}

/// Whether a `wait4` status is an exit with status 0.
pub(crate) fn status_ok(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Runs `cmd` to its end: its wait status, the largest resident set of its
/// process tree in bytes, its stdout and stderr.
pub(crate) fn run_measured(cmd: &mut Command) -> std::io::Result<(i32, u64, String, String)> {
    let mut child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    // Read both pipes on their own threads so that neither fills.
    let out = child.stdout.take().map(read_all);
    let err = child.stderr.take().map(read_all);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our child, not yet waited for (`child.wait` is
        // never called); `status` and `usage` are valid and writable.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (join(out), join(err));
    // ru_maxrss is in KiB on Linux.
    Ok((status, usage.ru_maxrss as u64 * 1024, stdout, stderr))
}

fn read_all(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}
