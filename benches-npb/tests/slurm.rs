//! Slurm as a launcher, on a real one-node Slurm cluster that this test
//! starts and stops itself.
//!
//! 1. Make a private directory with a generated `slurm.conf` (this host as
//!    the one node, `MpiDefault=none` as many sites have it), a munge key and
//!    free ports; start `munged`, `slurmctld` and `slurmd` on them, as root.
//! 2. Wait until `sinfo` shows the node idle.
//! 3. Run what a user runs, each with a deadline: `srun --mpi=pmix -n 2` NPB
//!    CG and IS class S on the MPI backend (to verification, the backend
//!    chosen from srun's environment without flags); an example on 4 ranks
//!    with `--overcommit` on 2 CPUs; a batch script (`sbatch`) and an allocation (`salloc`),
//!    with `srun` and `mpirun` inside the allocation; and `srun -n 2` with the site's default plugin (`none`),
//!    which must fail quickly with mttl's message naming `--mpi=pmix`.
//! 4. Stop the daemons (also when a step failed: the cluster's `Drop`).
//!
//! Needs root and Debian's `slurmd slurmctld slurm-client munge`; `.ci/run`
//! installs them and runs this test (`cargo test -p benches-npb
//! --all-features --test slurm -- --ignored`).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

mod support;
use std::time::{Duration, Instant};

/// How long one srun, sbatch or salloc may take before the test fails.
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the daemons may take to show an idle node.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A one-node Slurm cluster of this test's own: its daemons stop on drop.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Cluster {
    /// Steps 1 and 2.
    fn start() -> Cluster {
        let dir = std::env::temp_dir().join(format!("mttl-slurm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(sub)).expect("creating the cluster's directory");
        }
        set_mode(&dir, 0o700);
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .expect("reading /dev/urandom for the munge key");
        std::fs::write(&key, &bytes).expect("writing the munge key");
        set_mode(&key, 0o600);

        let host = hostname();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (ctld_port, slurmd_port) = (free_port(), free_port());
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=mttltest\n\
                 SlurmctldHost={host}\n\
                 SlurmUser=root\n\
                 SlurmdUser=root\n\
                 AuthType=auth/munge\n\
                 AuthInfo=socket={d}/munge.sock\n\
                 StateSaveLocation={d}/state\n\
                 SlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\n\
                 SlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldPort={ctld_port}\n\
                 SlurmdPort={slurmd_port}\n\
                 SlurmctldLogFile={d}/slurmctld.log\n\
                 SlurmdLogFile={d}/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_CPU\n\
                 MpiDefault=none\n\
                 ReturnToService=2\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 NodeName={host} CPUs={cpus} State=UNKNOWN\n\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n"
            ),
        )
        .expect("writing slurm.conf");

        let mut cluster = Cluster {
            dir: dir.clone(),
            conf,
            daemons: Vec::new(),
        };
        // Foreground daemons (-D / --foreground), so that they are this
        // test's children and stop with it.
        cluster.daemon(Command::new("munged").args([
            "--foreground",
            "--force",
            &format!("--socket={d}/munge.sock"),
            &format!("--key-file={}", key.display()),
            &format!("--pid-file={d}/munged.pid"),
            &format!("--log-file={d}/munged.log"),
            &format!("--seed-file={d}/munge.seed"),
        ]));
        wait_for(&format!("munged's socket in {d}"), || {
            dir.join("munge.sock").exists()
        });
        let conf = cluster.conf.display().to_string();
        cluster.daemon(Command::new("slurmctld").args(["-D", "-f", &conf]));
        cluster.daemon(Command::new("slurmd").args(["-D", "-f", &conf]));
        wait_for("an idle node in sinfo", || {
            cluster
                .command("sinfo", &["-h", "-o", "%t"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        cluster
    }

    fn daemon(&mut self, cmd: &mut Command) {
        let name = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e} (is Slurm installed?)"));
        self.daemons.push(child);
    }

    /// A Slurm client command for this cluster.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("SLURM_CONF", &self.conf)
            .env_remove("MTTL_NP")
            .env_remove("MTTL_BACKEND")
            .current_dir(&self.dir);
        cmd
    }

    /// Runs a client command to its end or [`STEP_TIMEOUT`], and says
    /// what the cluster's logs say if it did not end in time.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        support::run_within(&mut self.command(program, args), STEP_TIMEOUT).unwrap_or_else(|out| {
            panic!(
                "{program} {} did not end within {STEP_TIMEOUT:?}\n{}\n{}",
                args.join(" "),
                text(&out),
                self.logs()
            )
        })
    }

    fn logs(&self) -> String {
        ["slurmctld.log", "slurmd.log"]
            .iter()
            .map(|log| {
                let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                format!(
                    "--- last lines of {log}:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Cluster {
    /// Step 4.
    fn drop(&mut self) {
        let _ = self.command("scancel", &["--full", "--user=root"]).status();
        for child in self.daemons.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

fn hostname() -> String {
    let out = Command::new("hostname").output().expect("running hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port")
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + START_TIMEOUT;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "no {what} after {START_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout:\n{}\n--- stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_verified(out: &Output, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("SUCCESSFUL") && stdout.contains("mpi"),
        "{what} did not verify on the MPI backend:\n{}",
        text(out)
    );
}

/// The root crate's examples, built by `cargo test --workspace` next to
/// this package's binaries.
fn example(name: &str) -> PathBuf {
    let npb = PathBuf::from(env!("CARGO_BIN_EXE_npb"));
    let path = npb
        .parent()
        .expect("npb's directory")
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: build the examples first (`cargo build --examples --features mpi`)",
        path.display()
    );
    path
}

#[test]
#[ignore = "needs root and Slurm (slurmd, slurmctld, munge): .ci/run installs them and runs it"]
fn slurm_launches_mttl_jobs() {
    let cluster = Cluster::start();
    let npb = env!("CARGO_BIN_EXE_npb");

    // Step 3: srun with PMIx runs both kernels on the MPI backend.
    for kernel in ["cg", "is"] {
        let out = cluster.run(
            "srun",
            &["--mpi=pmix", "-n", "2", npb, kernel, "--class", "S"],
        );
        assert_verified(
            &out,
            &format!("srun --mpi=pmix -n 2 npb {kernel} --class S"),
        );
    }

    // Four ranks on fewer CPUs.
    let hello = example("hello");
    let hello = hello.to_str().expect("a UTF-8 path");
    let out = cluster.run("srun", &["--mpi=pmix", "--overcommit", "-n", "4", hello]);
    assert!(out.status.success(), "hello on 4 ranks:\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for rank in 0..4 {
        assert!(
            stdout.contains(&format!("rank {rank}")),
            "hello on 4 ranks did not hear from rank {rank}:\n{}",
            text(&out)
        );
    }

    // A batch script and an allocation, as the README suggests.
    let script = cluster.dir.join("cg.sbatch");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -n 2\n#SBATCH -o {}/cg.out\nsrun --mpi=pmix {npb} cg --class S\n",
            cluster.dir.display()
        ),
    )
    .expect("writing the batch script");
    let out = cluster.run(
        "sbatch",
        &["--wait", script.to_str().expect("a UTF-8 path")],
    );
    let batch_out = std::fs::read_to_string(cluster.dir.join("cg.out")).unwrap_or_default();
    assert!(
        out.status.success() && batch_out.contains("SUCCESSFUL"),
        "sbatch --wait cg.sbatch:\n{}\n--- cg.out:\n{batch_out}",
        text(&out)
    );
    let out = cluster.run(
        "salloc",
        &["-n", "2", "srun", "--mpi=pmix", npb, "is", "--class", "S"],
    );
    assert_verified(&out, "salloc -n 2 srun --mpi=pmix npb is --class S");
    let out = cluster.run(
        "salloc",
        &[
            "-n",
            "2",
            "mpirun",
            "--allow-run-as-root",
            npb,
            "cg",
            "--class",
            "S",
        ],
    );
    assert_verified(&out, "salloc -n 2 mpirun npb cg --class S");

    // The site's default plugin (none): mttl's message names the fix.
    let started = Instant::now();
    let out = cluster.run("srun", &["-n", "2", npb, "cg", "--class", "S"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("--mpi=pmix")
            && stderr.contains("MpiDefault=pmix"),
        "srun without --mpi=pmix should fail naming the fix:\n{}",
        text(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the wrong plugin took {:?} to fail",
        started.elapsed()
    );
}
