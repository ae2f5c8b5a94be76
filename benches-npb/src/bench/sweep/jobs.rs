//! Configurations and the worker jobs that measure them: which
//! configurations this build can run, starting a configuration's two-rank
//! job (`PROGRAM SUBCOMMAND --worker CONFIG --out FILE ...`), the results
//! file its rank 0 writes and the orchestrator reads, and what every
//! worker does the same way (joining the job, checking its kind and size).
//!
//! The results file is private to one invocation (a temporary directory):
//! rank 0 encodes `(config, backend, samples)` with bincode, and the
//! orchestrator checks the name before it believes the samples.

use std::path::{Path, PathBuf};

use mttl::bincode::{self, Decode, Encode};
use mttl_comm::launch::{self, BackendKind, HostSlot, JobSpec};
use mttl_comm::{AnyComm, Comm};

use super::{Sweeps, Swept};
use crate::bench::error::BenchError;

/// What a configuration is: how the tables and `--backends` name it, what
/// runs, and how its job starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The name `--backends` and `--worker` take.
    pub name: &'static str,
    /// Its column in the tables.
    pub column: &'static str,
    /// Whether it runs on MPI (and so needs the cargo feature `mpi`).
    pub mpi: bool,
    /// Environment its ranks get besides the launcher's.
    pub env: &'static [(&'static str, &'static str)],
    /// One line saying what runs.
    pub description: &'static str,
}

/// The environment that puts raw MPI on Open MPI's TCP transport.
pub const OMPI_TCP: &[(&str, &str)] = &[("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "tcp,self")];

/// A configuration of a subcommand: something measured by one job,
/// described by its [`Spec`] (declared with `bench_configs!`).
pub trait BenchConfig: Copy + PartialEq + 'static {
    /// What it is.
    fn spec(self) -> &'static Spec;

    /// The name `--backends` and `--worker` take.
    fn name(self) -> &'static str {
        self.spec().name
    }

    /// Its column in the tables.
    fn column(self) -> &'static str {
        self.spec().column
    }

    /// One line saying what runs.
    fn description(self) -> &'static str {
        self.spec().description
    }

    /// Whether it runs on MPI (and so needs the cargo feature `mpi`).
    fn needs_mpi(self) -> bool {
        self.spec().mpi
    }

    /// Environment its ranks get besides the launcher's.
    fn job_env(self) -> Vec<(String, String)> {
        let env = self.spec().env.iter();
        env.map(|&(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    /// The backend its mttl ranks run on: `mpi` or `tcp`.
    fn backend(self) -> &'static str {
        if self.needs_mpi() {
            "mpi"
        } else {
            "tcp"
        }
    }

    /// Whether this build can run it.
    fn available(self) -> bool {
        cfg!(feature = "mpi") || !self.needs_mpi()
    }
}

/// Declares a subcommand's configurations: a `clap::ValueEnum` enum with
/// one variant per row (its doc comment is the option's help), its
/// [`BenchConfig`] implementation, and `ALL`, every variant in row (table)
/// order. A row reads `Variant => name, column, needs MPI, environment,
/// description;`.
macro_rules! bench_configs {
    ($(#[$em:meta])* pub enum $ty:ident { $(
        $(#[$vm:meta])* $v:ident => $name:literal, $col:literal, $mpi:literal, $env:expr,
        $desc:expr;
    )* }) => {
        $(#[$em])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
        pub enum $ty { $($(#[$vm])* $v,)* }

        impl $ty {
            /// Every configuration, in table order.
            pub const ALL: &'static [$ty] = &[$($ty::$v),*];
        }

        impl $crate::bench::sweep::jobs::BenchConfig for $ty {
            fn spec(self) -> &'static $crate::bench::sweep::jobs::Spec {
                match self { $($ty::$v => &$crate::bench::sweep::jobs::Spec {
                    name: $name, column: $col, mpi: $mpi, env: $env, description: $desc,
                },)* }
            }
        }
    };
}
pub(crate) use bench_configs;

/// Checks that every configuration of `C` is named as clap names it (a
/// test of a `bench_configs!` table).
#[cfg(test)]
pub(crate) fn assert_named_as_clap_does<C: BenchConfig + clap::ValueEnum + std::fmt::Debug>() {
    for c in C::value_variants() {
        assert_eq!(C::from_str(c.name(), false).as_ref(), Ok(c), "{c:?}");
    }
}

/// The command that rebuilds `mttl-bench BENCH` with MPI.
pub fn mpi_build_hint(bench: &str) -> String {
    format!("cargo run --release -p benches-npb --features mpi --bin mttl-bench -- {bench}")
}

/// The configurations `asked` for (`--backends`), without repeats and
/// checked against this build, or every one of `all` this build has.
pub fn chosen_configs<C: BenchConfig>(
    bench: &str,
    asked: Option<&[C]>,
    all: &[C],
) -> Result<Vec<C>, BenchError> {
    let Some(asked) = asked else {
        return Ok(all.iter().copied().filter(|c| c.available()).collect());
    };
    let mut chosen = Vec::new();
    for &config in asked {
        if !config.available() {
            return Err(BenchError::Usage(format!(
                "configuration {} needs MPI, and this mttl-bench was built without the \
                 `mpi` feature; rebuild with `{}`",
                config.name(),
                mpi_build_hint(bench)
            )));
        }
        if !chosen.contains(&config) {
            chosen.push(config);
        }
    }
    Ok(chosen)
}

/// The options of every subcommand that sweeps worker jobs (`comm`,
/// `rwrite`, `runtime`), flattened into its arguments; `SETTLE` is the
/// default of `--settle`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs<C: clap::ValueEnum + Clone + Send + Sync + 'static, const SETTLE: u32 = 10> {
    /// Print one JSON document on stdout instead of the tables (`comm`
    /// prints them on stderr).
    #[arg(long)]
    pub json: bool,
    /// Before each run, wait up to this many seconds for other processes to
    /// leave the CPUs idle (this machine may be shared; 0: do not wait).
    /// Default: 10 (runtime: 3).
    #[arg(long, value_name = "SECS", value_parser = |t: &str| parse_seconds(t, 3600))]
    pub settle: Option<f64>,
    /// Sweeps per configuration; the best is kept.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Configurations to measure, comma-separated. Default: every one this
    /// build has (the MPI ones need the cargo feature `mpi`).
    #[arg(long, value_delimiter = ',')]
    pub backends: Option<Vec<C>>,
    /// Run as a worker rank of this configuration (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    pub worker: Option<C>,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    pub out: Option<PathBuf>,
    /// Run each two-rank job across these hosts, rank 0 on the first
    /// (`mttlrun --hosts`; e.g. mttl-netlab's `mttl-h0,mttl-h1`, from inside
    /// `mttl-netlab exec mttl-h0`, which sets the remote shell).
    #[arg(long, value_name = "H0,H1")]
    pub hosts: Option<String>,
}

/// The hosts of `--hosts LIST` for two-rank jobs: one or two.
pub fn job_hosts(list: &str) -> Result<Vec<HostSlot>, BenchError> {
    let hosts = launch::parse_host_list(list)
        .map_err(|e| BenchError::Usage(format!("--hosts {list}: {e}")))?;
    if hosts.len() > 2 {
        return Err(BenchError::Usage(format!(
            "--hosts {list}: the jobs have 2 ranks; give one or two hosts (rank 0 on the first)"
        )));
    }
    Ok(hosts)
}

impl<C: BenchConfig + clap::ValueEnum + Send + Sync, const SETTLE: u32> SweepArgs<C, SETTLE> {
    /// The configuration and results file of a worker rank, if this
    /// process is one (`--worker`).
    pub fn worker(&self) -> Option<(C, &Path)> {
        Some((self.worker?, self.out.as_deref()?))
    }

    /// `--settle`, or its default.
    pub fn settle(&self) -> f64 {
        self.settle.unwrap_or(f64::from(SETTLE))
    }

    /// Steps 1 to 3 of the [engine](super) for `mttl-bench BENCH`: the
    /// configurations asked for (of `all`), each run a job of this program
    /// with `args(config, sweep)` after the common ones, unless `local`
    /// measures it in this process; a disturbed run is repeated up to
    /// `retries` times.
    pub fn sweep<R: Decode<()>>(
        &self,
        bench: &'static str,
        all: &[C],
        retries: usize,
        args: impl Fn(C, usize) -> Vec<String>,
        mut local: impl FnMut(C) -> Option<Measured<R>>,
    ) -> Result<Swept<C, Measured<R>>, BenchError> {
        let configs = chosen_configs(bench, self.backends.as_deref(), all)?;
        let mut workers = Workers::new(bench)?;
        if let Some(list) = &self.hosts {
            workers.hosts = job_hosts(list)?;
        }
        let sweeps = Sweeps {
            bench: &format!("mttl-bench {bench}"),
            configs: &configs,
            reps: self.reps,
            settle: self.settle(),
            retries,
            keep_going: false,
        };
        sweeps.run(
            |c| c.name().to_owned(),
            |&config, sweep, attempt| match local(config) {
                Some(measured) => Ok(measured),
                None => {
                    let tag = format!("{}-{sweep}-{attempt}", config.name());
                    workers.run(config, &tag, &args(config, sweep))
                }
            },
        )
    }
}

/// Where a subcommand's worker jobs run and leave their results: this
/// program, and a temporary directory removed when dropped.
#[derive(Debug)]
pub struct Workers {
    bench: &'static str,
    program: PathBuf,
    dir: PathBuf,
    /// Where the jobs' ranks run (`--hosts`); empty: on this machine.
    pub hosts: Vec<HostSlot>,
}

impl Workers {
    /// The workers of `mttl-bench BENCH`.
    pub fn new(bench: &'static str) -> Result<Workers, BenchError> {
        let program = std::env::current_exe().map_err(|source| BenchError::Io {
            what: "find the path of",
            path: PathBuf::from("this program"),
            source,
        })?;
        let dir = std::env::temp_dir().join(format!("mttl-bench-{bench}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| BenchError::Io {
            what: "create the temporary directory",
            path: dir.clone(),
            source,
        })?;
        Ok(Workers {
            bench,
            program,
            dir,
            hosts: Vec::new(),
        })
    }

    /// A results file of its own for run `tag`.
    pub fn out(&self, tag: &str) -> PathBuf {
        self.dir.join(format!("{tag}.out"))
    }

    /// Runs `config`'s two-rank job once with `args` after the common
    /// ones, and reads what its rank 0 wrote.
    pub fn run<C: BenchConfig, R: Decode<()>>(
        &self,
        config: C,
        tag: &str,
        args: &[String],
    ) -> Result<Measured<R>, BenchError> {
        let out = self.out(tag);
        let mut all = vec![
            self.bench.to_owned(),
            "--worker".to_owned(),
            config.name().to_owned(),
            "--out".to_owned(),
            out.to_string_lossy().into_owned(),
        ];
        all.extend_from_slice(args);
        let mut spec = JobSpec::new(2, &self.program).args(all);
        if config.needs_mpi() {
            spec.backend = BackendKind::Mpi;
        }
        spec.extra_env = config.job_env();
        spec.hosts = self.hosts.clone();
        self.launch(config.name(), config.needs_mpi(), &spec)?;
        read_results(config.name(), &out)
    }

    /// Runs `spec` to its end; a job that cannot start or does not succeed
    /// is an error naming `config`.
    pub fn launch(
        &self,
        config: &'static str,
        mpi: bool,
        spec: &JobSpec,
    ) -> Result<(), BenchError> {
        let outcome = launch::run(spec).map_err(|source| BenchError::Launch { config, source })?;
        if !outcome.success() {
            return Err(BenchError::WorkerFailed {
                config,
                code: outcome.exit_code,
                hint: if mpi {
                    " (is `mpirun`, or $MTTL_MPIRUN when set, the mpirun of the MPI this \
                     program was built against?)"
                } else {
                    ""
                },
            });
        }
        Ok(())
    }

    /// This program.
    pub fn program(&self) -> &Path {
        &self.program
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Rank 0's results file: `samples` of `config`, measured on `backend`.
pub fn write_results<R: Encode>(
    config: &str,
    backend: &str,
    samples: &R,
    out: &Path,
) -> Result<(), BenchError> {
    let bytes = bincode::encode_to_vec((config, backend, samples), bincode::config::standard())
        .map_err(|e| BenchError::Check(format!("could not encode the results: {e}")))?;
    std::fs::write(out, bytes).map_err(|source| BenchError::Io {
        what: "write the results file",
        path: out.to_owned(),
        source,
    })
}

/// A results file's samples, with the backend their worker ran on.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured<S> {
    pub backend: String,
    pub samples: S,
}

/// Reads the results file `config`'s worker wrote at `path`.
pub fn read_results<R: Decode<()>>(
    config: &'static str,
    path: &Path,
) -> Result<Measured<R>, BenchError> {
    let bad = |detail: String| BenchError::BadResults {
        config,
        path: path.to_owned(),
        detail,
    };
    let bytes = std::fs::read(path).map_err(|source| BenchError::Io {
        what: "read the results file",
        path: path.to_owned(),
        source,
    })?;
    let ((named, backend, samples), _): ((String, String, R), usize) =
        bincode::decode_from_slice(&bytes, bincode::config::standard())
            .map_err(|e| bad(e.to_string()))?;
    if named != config {
        return Err(bad(format!("it names configuration {named:?}")));
    }
    Ok(Measured { backend, samples })
}

/// Writes `value` as JSON to `path` (the `load` workers' results).
pub fn write_json(value: &serde_json::Value, path: &Path) -> Result<(), BenchError> {
    std::fs::write(path, value.to_string()).map_err(|source| BenchError::Io {
        what: "write the results file",
        path: path.to_owned(),
        source,
    })
}

/// Reads a JSON results file.
pub fn read_json(config: &'static str, path: &Path) -> Result<serde_json::Value, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        what: "read the results file",
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| BenchError::BadResults {
        config,
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// The error of a worker whose job is of the wrong kind or size.
fn wrong_job(config: &'static str, size: usize, backend: &str, wanted: &str) -> BenchError {
    BenchError::Setup {
        config,
        detail: format!(
            "the job runs {size} ranks on the {backend} backend instead of 2 on {wanted}"
        ),
    }
}

/// Joins a two-rank job of mttl's comm layer on `backend`.
pub fn join_comm(config: &'static str, backend: &str) -> Result<AnyComm, BenchError> {
    let comm = AnyComm::init()?;
    if comm.backend_name() != backend || comm.size() != 2 {
        return Err(wrong_job(config, comm.size(), comm.backend_name(), backend));
    }
    Ok(comm)
}

/// Runs `body` on rank 0 of a two-rank mttl program on `backend` (the
/// other rank serves) and writes what it measured to `out`.
pub fn mttl_program<R: Encode + 'static>(
    config: &'static str,
    backend: &'static str,
    out: &Path,
    body: impl FnOnce() -> Result<R, String> + Send + 'static,
) -> Result<(), BenchError> {
    let out = out.to_owned();
    let code = mttl::start(move || -> Result<(), String> {
        let (running, size) = (mttl::backend_name(), mttl::size());
        if running != backend || size != 2 {
            return Err(wrong_job(config, size, running, backend).to_string());
        }
        write_results(config, running, &body()?, &out).map_err(|e| e.to_string())
    });
    if code == 0 {
        Ok(())
    } else {
        Err(BenchError::Setup {
            config,
            detail: format!("the mttl program exited with status {code}"),
        })
    }
}

/// The refusal of a raw MPI worker in a build without MPI.
pub fn no_mpi(config: &'static str, bench: &str) -> BenchError {
    BenchError::Setup {
        config,
        detail: format!(
            "this build has no MPI; rebuild with `{}`",
            mpi_build_hint(bench)
        ),
    }
}

/// A raw rsmpi worker of a two-rank job: initialises MPI at `FUNNELED`
/// (as mttl's MPI backend does), checks the job has two ranks, runs
/// `measure` on `MPI_COMM_WORLD`, and on rank 0 writes what it returns to
/// `out`; MPI is finalised after `measure` is done.
#[cfg(feature = "mpi")]
pub fn raw_mpi_worker<R: Encode>(
    config: &'static str,
    out: &Path,
    measure: impl FnOnce(mpi::topology::SimpleCommunicator) -> Result<R, BenchError>,
) -> Result<(), BenchError> {
    use mpi::topology::Communicator;
    let setup = |detail: String| BenchError::Setup { config, detail };
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| setup("MPI was already initialised in this process".into()))?;
    let world = universe.world();
    if world.size() != 2 {
        return Err(setup(format!(
            "the MPI job has {} ranks instead of 2 (was this program started by the mpirun \
             of the MPI it was built against?)",
            world.size()
        )));
    }
    let rank = world.rank();
    let results = measure(world)?;
    if rank == 0 {
        write_results(config, "rsmpi", &results, out)?;
    }
    drop(universe);
    Ok(())
}

/// Parses a number of seconds to wait, 0 to `max` (`--settle`).
pub fn parse_seconds(text: &str, max: u32) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=f64::from(max)).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to {max}"
        )),
    }
}

/// Parses a byte count such as `8`, `64K`, `1MiB` (K, M, G multiply by
/// 1024, 1024², 1024³), from 1 to `max`.
pub fn parse_size(text: &str, max: u64) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => {
            return Err(format!(
                "{text:?} is not a size: use bytes, optionally followed by K, M or G"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size: it does not start with a number"))?;
    let size = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if size == 0 || size > max {
        return Err(format!(
            "{text:?} is outside the sizes measured, 1 byte to {}",
            size_label(max)
        ));
    }
    Ok(size)
}

/// A size as a short label: `8`, `4K`, `16M`.
pub fn size_label(size: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if size >= 1 << shift && size % (1 << shift) == 0 {
            return format!("{}{suffix}", size >> shift);
        }
    }
    size.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        let max = 256 << 20;
        assert_eq!(parse_size("8", max), Ok(8));
        assert_eq!(parse_size("64K", max), Ok(64 << 10));
        assert_eq!(parse_size("1MiB", max), Ok(1 << 20));
        assert_eq!(parse_size("16m", max), Ok(16 << 20));
        assert!(parse_size("0", max).is_err());
        assert!(parse_size("1G", max).is_err());
        assert!(parse_size("K", max).is_err());
        assert!(parse_size("8 bytes", max).is_err());
        assert_eq!(size_label(4096), "4K");
        assert_eq!(size_label(16 << 20), "16M");
        assert_eq!(size_label(1000), "1000");
    }

    #[test]
    fn job_hosts_take_one_or_two_hosts() {
        let two = job_hosts("mttl-h0, mttl-h1").expect("two hosts");
        let names: Vec<String> = two.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["mttl-h0", "mttl-h1"]);
        assert_eq!(job_hosts("a").expect("one host").len(), 1);
        let e = job_hosts("a,b,c").expect_err("three hosts for two ranks");
        assert!(e.to_string().contains("give one or two hosts"), "{e}");
        assert!(job_hosts(",").is_err(), "no host at all");
    }

    #[test]
    fn results_files_round_trip_and_name_their_configuration() {
        let dir = std::env::temp_dir().join(format!("sweep-jobs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.out");
        let samples = vec![(8u64, vec![1.5f64, 2.5])];
        write_results("tcp", "tcp", &samples, &path).unwrap();
        let read = read_results::<Vec<(u64, Vec<f64>)>>("tcp", &path).unwrap();
        assert_eq!((read.backend.as_str(), read.samples), ("tcp", samples));
        let e = read_results::<Vec<(u64, Vec<f64>)>>("mpi", &path).unwrap_err();
        assert!(e.to_string().contains("\"tcp\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
