//! What recording costs: a one-rank mttl program opening and closing a
//! user region (two events, each with its name looked up) `N` times,
//! untraced, traced into memory, and traced with the `local` policy and a
//! 1 MiB buffer (so the cost of writing the file is included). Prints ns
//! per site untraced and ns per recorded event traced.
//!
//! `cargo run --release -p mttl-trace --example record_cost`

use std::time::Instant;

const N: u64 = 2_000_000;

fn run(label: &str, env: &[(&str, &str)]) {
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    let label = label.to_owned();
    let code = mttl_core::start(move || {
        let t = Instant::now();
        for _ in 0..N {
            let _r = mttl_core::trace::region("r");
        }
        let ns = t.elapsed().as_nanos() as f64 / (2 * N) as f64;
        println!("{label:<36} {ns:>6.1} ns per event site");
    });
    assert_eq!(code, 0);
    for (k, _) in env {
        std::env::remove_var(k);
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("mttl-record-cost-{}", std::process::id()));
    let d = dir.to_str().expect("a UTF-8 temporary directory");
    run("untraced", &[]);
    run(
        "traced, memory, 256 MiB buffer",
        &[
            ("MTTL_TRACE", d),
            ("MTTL_TRACE_FLUSH", "memory"),
            ("MTTL_TRACE_BUFFER", "256M"),
        ],
    );
    run(
        "traced, local, 1 MiB buffer",
        &[
            ("MTTL_TRACE", d),
            ("MTTL_TRACE_FLUSH", "local"),
            ("MTTL_TRACE_BUFFER", "1M"),
        ],
    );
    let bytes: u64 = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "last trace: {bytes} bytes for {} events ({:.2} bytes per event)",
        2 * N,
        bytes as f64 / (2 * N) as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
