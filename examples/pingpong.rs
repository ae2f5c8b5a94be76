//! Ping-pong between rank 0 and rank 1 on mttl's communication layer:
//! round-trip time and bandwidth for sizes from 8 B to 4 MiB, every byte
//! checked.
//!
//! ```text
//! cargo run --release --example pingpong -- -n 2                 # TCP, launches itself
//! cargo run --release --example pingpong -- -n 2 --backend mpi   # needs --features mpi
//! mttlrun -n 2 -- target/release/examples/pingpong               # or any launcher
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mttl::comm::launch::{self, BackendKind, JobSpec};
use mttl::comm::{AnyComm, Comm};

const SIZES: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = launch_if_asked(&args) {
        return code;
    }
    match pingpong() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `-n N [--backend B]` outside a job: run this program as an N-rank job.
fn launch_if_asked(args: &[String]) -> Option<ExitCode> {
    let in_job =
        std::env::var_os("MTTL_RANK").is_some() || mttl::comm::env::mpi_launcher_var().is_some();
    if in_job {
        return None;
    }
    let np: usize = match args.iter().position(|a| a == "-n") {
        Some(i) => match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(n) => n,
            None => {
                eprintln!("pingpong: -n needs a number of ranks");
                return Some(ExitCode::FAILURE);
            }
        },
        None => return None,
    };
    let backend = match args.iter().position(|a| a == "--backend") {
        Some(i) => match args.get(i + 1).map(|b| b.parse::<BackendKind>()) {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                eprintln!("pingpong: {e}");
                return Some(ExitCode::FAILURE);
            }
            None => {
                eprintln!("pingpong: --backend needs tcp or mpi");
                return Some(ExitCode::FAILURE);
            }
        },
        None => BackendKind::Tcp,
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("pingpong: cannot find my own executable: {e}");
            return Some(ExitCode::FAILURE);
        }
    };
    let mut spec = JobSpec::new(np, exe);
    spec.backend = backend;
    match launch::run(&spec) {
        Ok(outcome) => Some(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8)),
        Err(e) => {
            eprintln!("pingpong: {e}");
            Some(ExitCode::FAILURE)
        }
    }
}

fn pingpong() -> Result<(), Box<dyn std::error::Error>> {
    let mut comm = AnyComm::init()?;
    let (me, size) = (comm.rank(), comm.size());
    if size < 2 {
        println!("pingpong needs 2 ranks: run it with `-n 2` (or under mttlrun/mpirun)");
        return Ok(());
    }
    if me == 0 {
        println!(
            "mttl ping-pong, {} backend, {size} ranks (rank 0 <-> rank 1)",
            comm.backend_name()
        );
        println!(
            "{:>10} {:>10} {:>14} {:>12}",
            "bytes", "reps", "round trip us", "MB/s"
        );
    }
    let timeout = Some(Duration::from_secs(60));
    for &len in SIZES {
        let reps = (20_000_000 / (len + 1000)).clamp(10, 20_000);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let start = Instant::now();
            for _ in 0..reps {
                if me == 0 {
                    comm.send(1, 1, &data)?;
                    let m = comm.recv_from(1, timeout)?.ok_or("no reply within 60 s")?;
                    if m.data != data {
                        return Err(format!("the echo of {len} bytes came back different").into());
                    }
                } else if me == 1 {
                    let m = comm.recv_from(0, timeout)?.ok_or("no ping within 60 s")?;
                    comm.send(0, 1, &m.data)?;
                }
            }
            best = best.min(start.elapsed().as_secs_f64() / reps as f64);
        }
        if me == 0 {
            let mbs = 2.0 * len as f64 / best / 1e6;
            println!("{len:>10} {reps:>10} {:>14.2} {mbs:>12.1}", best * 1e6);
        }
    }
    comm.finish()?;
    Ok(())
}
