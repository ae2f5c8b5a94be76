//! Benchmark: predicted run time of a kernel at growing rank counts on
//! several networks, and what the prediction costs (the issue's
//! measurement d).
//!
//! ```text
//! cargo build --release -p mttl-trace -p mttl-sim --examples
//! target/release/examples/predict_scale --trace DIR --skeleton cg --class C
//!     [--sizes 16,64,256,1024] [--profiles gige,k-torus] [--bin target/release]
//!     [--work /tmp/mttl-predict] [--csv FILE] [--keep] [--eager-limit BYTES]
//! ```
//!
//! `DIR` is a real trace (`docs/prediction.md`: recorded with
//! `MTTL_AGGREGATE=0 MTTL_TRACE_FLUSH=local`). For each size N the program
//! makes N pseudo traces with `mttl-trace scale --to N --skeleton KERNEL
//! --class CLASS DIR`, then simulates them with `mttl-sim --profile P
//! --json --summary` for each profile. Each step is a child process, timed
//! by its own CPU time (user + system) and peak resident memory, both from
//! `wait4`, so that other load on the machine counts less. The skeleton is
//! a parameter: any kernel `mttl-trace scale` knows can be measured.
//!
//! Prints one row per (size, profile): the predicted time (the slowest
//! rank's finish), the pseudo traces' operations, the CPU time and peak
//! memory of making and of simulating them, and the simulator's events per
//! CPU second; with `--csv` the same rows as CSV. The pseudo traces of a
//! size are deleted after it (3 GB of text at 1,024 ranks of CG) unless
//! `--keep`.
//!
//! Every message is simulated eager (`-S` 2^40, or `--eager-limit`): mttl's
//! backends buffer what they send, so a send never waits for its receive,
//! and a trace's blocking sends to each other (CG's transpose exchange)
//! would deadlock under rendezvous.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

#[derive(Debug)]
struct Options {
    trace: PathBuf,
    skeleton: String,
    class: Option<String>,
    sizes: Vec<u32>,
    profiles: Vec<String>,
    bin: PathBuf,
    work: PathBuf,
    csv: Option<PathBuf>,
    keep: bool,
    eager_limit: u64,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        trace: PathBuf::new(),
        skeleton: String::new(),
        class: None,
        sizes: vec![16, 64, 256, 1024],
        profiles: vec!["gige".into(), "k-torus".into()],
        bin: PathBuf::from("target/release"),
        work: std::env::temp_dir().join("mttl-predict"),
        csv: None,
        keep: false,
        eager_limit: 1 << 40,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--keep" {
            o.keep = true;
            continue;
        }
        let v = args.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--trace" => o.trace = v.into(),
            "--skeleton" => o.skeleton = v,
            "--class" => o.class = Some(v),
            "--sizes" => {
                o.sizes = v
                    .split(',')
                    .map(|s| {
                        s.parse::<u32>()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or(format!("--sizes: `{s}` is not a positive rank count"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--profiles" => o.profiles = v.split(',').map(str::to_string).collect(),
            "--bin" => o.bin = v.into(),
            "--work" => o.work = v.into(),
            "--csv" => o.csv = Some(v.into()),
            "--eager-limit" => {
                o.eager_limit = v
                    .parse()
                    .map_err(|_| format!("--eager-limit: `{v}` is not a byte count"))?
            }
            _ => return Err(format!("unknown argument `{a}` (see the file's header)")),
        }
    }
    if o.trace.as_os_str().is_empty() || o.skeleton.is_empty() {
        return Err("--trace DIR and --skeleton KERNEL are required".into());
    }
    Ok(o)
}

/// What a child process cost, and what it printed.
#[derive(Debug)]
struct Run {
    cpu_s: f64,
    peak_rss: u64,
    stdout: String,
}

/// Runs `cmd` to its end and measures it with `wait4`.
fn measured(mut cmd: Command) -> Result<Run, String> {
    let shown = format!("{cmd:?}");
    let out_file = tempfile_in(&std::env::temp_dir())?;
    let child = cmd
        .stdout(
            std::fs::File::create(&out_file).map_err(|e| format!("{}: {e}", out_file.display()))?,
        )
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{shown}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `status` and `ru` are valid and writable; `pid` is our child,
    // which nothing else waits for (`child` is dropped without waiting).
    let rc = unsafe { libc::wait4(pid, &mut status, 0, ru.as_mut_ptr()) };
    drop(child);
    if rc != pid {
        return Err(format!("{shown}: wait4 failed"));
    }
    // SAFETY: wait4 succeeded and filled `ru` (zeroed is valid anyway).
    let ru = unsafe { ru.assume_init() };
    let stdout = std::fs::read_to_string(&out_file).unwrap_or_default();
    let _ = std::fs::remove_file(&out_file);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{shown} failed (wait status {status})"));
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok(Run {
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        peak_rss: ru.ru_maxrss as u64 * 1024,
        stdout,
    })
}

/// A fresh file name in `dir` for a child's output.
fn tempfile_in(dir: &Path) -> Result<PathBuf, String> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(dir.join(format!("predict-scale-{}-{n}.out", std::process::id())))
}

/// The number in `text` just before `word` (`..., 152330615 operations written`).
fn number_before(text: &str, word: &str) -> Option<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words.iter().position(|w| w.trim_end_matches(',') == word)?;
    words.get(at.checked_sub(1)?)?.parse().ok()
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    ranks: u32,
    ops: u64,
    scale: (f64, u64),
    profile: String,
    predicted_ns: u64,
    events: u64,
    sim: (f64, u64),
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("predict_scale: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("predict_scale: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(o: &Options) -> Result<(), String> {
    std::fs::create_dir_all(&o.work).map_err(|e| format!("{}: {e}", o.work.display()))?;
    let class = o.class.as_deref().unwrap_or("-");
    println!(
        "{:<8} {:<5} {:>6} {:>13} {:<12} {:>14} {:>8} {:>9} {:>8} {:>9} {:>12}",
        "skeleton",
        "class",
        "ranks",
        "operations",
        "profile",
        "predicted ms",
        "scale s",
        "scale MB",
        "sim s",
        "sim MB",
        "events/s"
    );
    let mut rows = Vec::new();
    for &n in &o.sizes {
        let out = o.work.join(format!("{}-{class}-{n}", o.skeleton));
        let _ = std::fs::remove_dir_all(&out);
        let mut scale = Command::new(o.bin.join("mttl-trace"));
        scale.arg("scale").arg("--to").arg(n.to_string());
        scale.arg("--skeleton").arg(&o.skeleton);
        if let Some(c) = &o.class {
            scale.arg("--class").arg(c);
        }
        scale.arg(&o.trace).arg(&out);
        let made = measured(scale)?;
        let ops = number_before(&made.stdout, "operations").unwrap_or(0);
        for profile in &o.profiles {
            let mut sim = Command::new(o.bin.join("mttl-sim"));
            sim.arg(&out)
                .args(["--profile", profile, "--json", "--summary", "-S"])
                .arg(o.eager_limit.to_string());
            let r = measured(sim)?;
            let v: serde_json::Value = serde_json::from_str(&r.stdout)
                .map_err(|e| format!("mttl-sim's JSON: {e}: {}", r.stdout))?;
            let row = Row {
                ranks: n,
                ops,
                scale: (made.cpu_s, made.peak_rss),
                profile: profile.clone(),
                predicted_ns: v["max_ns"].as_u64().unwrap_or(0),
                events: v["events"].as_u64().unwrap_or(0),
                sim: (r.cpu_s, r.peak_rss),
            };
            println!(
                "{:<8} {:<5} {:>6} {:>13} {:<12} {:>14.3} {:>8.2} {:>9.1} {:>8.2} {:>9.1} {:>12.0}",
                o.skeleton,
                class,
                row.ranks,
                row.ops,
                row.profile,
                row.predicted_ns as f64 / 1e6,
                row.scale.0,
                row.scale.1 as f64 / 1e6,
                row.sim.0,
                row.sim.1 as f64 / 1e6,
                row.events as f64 / row.sim.0.max(1e-9)
            );
            rows.push(row);
        }
        if !o.keep {
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    if let Some(path) = &o.csv {
        let mut text = String::from(
            "skeleton,class,ranks,operations,profile,predicted_ns,scale_cpu_s,scale_peak_bytes,sim_cpu_s,sim_peak_bytes,events\n",
        );
        for r in &rows {
            text += &format!(
                "{},{class},{},{},{},{},{:.3},{},{:.3},{},{}\n",
                o.skeleton,
                r.ranks,
                r.ops,
                r.profile,
                r.predicted_ns,
                r.scale.0,
                r.scale.1,
                r.sim.0,
                r.sim.1,
                r.events
            );
        }
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_operation_count_of_scale() {
        let out = "1024 ranks, 152330615 operations written to x (from 2 real ranks)\n";
        assert_eq!(number_before(out, "operations"), Some(152_330_615));
        assert_eq!(number_before(out, "ranks"), Some(1024));
        assert_eq!(number_before("nothing here", "operations"), None);
    }
}
