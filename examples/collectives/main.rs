//! Collectives from every node: node 0's main runs `tour` on every node
//! (`mttl::spmd`); each node calls the same collectives in the same order,
//! and node 0 prints what it got back.
//!
//! ```text
//! cargo run --example collectives                          # one node
//! MTTL_NP=4 cargo run --example collectives                # four nodes on TCP
//! MTTL_NP=4 cargo run --release --example collectives -- --latency 20000
//! ```
//!
//! `--latency [ITERS]` also times barrier and allreduce: the slowest node's
//! mean over ITERS back-to-back calls (default 10 000), after a warm-up
//! (see `latency.rs`).

mod latency;

#[mttl::remote]
fn tour() -> Vec<String> {
    let (me, n) = (mttl::rank(), mttl::size());
    let mut lines = Vec::new();

    mttl::barrier();
    lines.push(format!("barrier: all {n} nodes met"));

    let sum = mttl::allreduce_sum(me as u64 + 1);
    let min = mttl::allreduce_min(100.0 - me as f64);
    let max = mttl::allreduce_max(me as i32 * 10);
    lines.push(format!(
        "allreduce of rank+1: sum {sum}; min of 100-rank {min}; max of rank*10 {max}"
    ));

    let mut histogram = [me as i32, 1, 2 * me as i32];
    mttl::allreduce_sum_slice(&mut histogram);
    lines.push(format!(
        "element-wise sum of [rank, 1, 2*rank]: {histogram:?}"
    ));

    let names = mttl::allreduce(format!("r{me} "), |a, b| a + &b);
    lines.push(format!("allreduce of strings by concatenation: {names:?}"));

    let squares = mttl::reduce(n - 1, (me * me) as u64, |a, b| a + b);
    let squares = mttl::broadcast(n - 1, squares.unwrap_or_default());
    lines.push(format!(
        "reduce of rank^2 at rank {}, broadcast back: {squares}",
        n - 1
    ));

    let greeting = mttl::broadcast(
        0,
        if me == 0 {
            vec!["hello".to_owned(), "from".to_owned(), "rank 0".to_owned()]
        } else {
            Vec::new()
        },
    );
    lines.push(format!("broadcast from rank 0: {greeting:?}"));

    if let Some(hosts) = mttl::gather(0, format!("rank {me} pid {}", std::process::id())) {
        lines.push(format!("gather at rank 0: {hosts:?}"));
    }
    let everyone = mttl::allgather(me * 100);
    lines.push(format!("allgather of rank*100: {everyone:?}"));

    let mail = mttl::alltoall((0..n).map(|to| format!("{me}->{to}")).collect());
    lines.push(format!("alltoall, what rank {me} received: {mail:?}"));
    lines
}

#[mttl::remote]
fn latencies(iters: usize) -> Vec<String> {
    let mut lines = vec![format!(
        "latency on {} nodes ({} backend), slowest node's mean of {iters}:",
        mttl::size(),
        mttl::backend_name()
    )];
    let barrier = latency::barrier_latency(iters);
    lines.push(format!("  barrier                  {barrier:>10.2?}"));
    for len in [1, 1024] {
        let all = latency::allreduce_latency(len, iters);
        let tree = latency::reduce_broadcast_latency(len, iters);
        lines.push(format!("  allreduce of {len:>4} f64     {all:>10.2?}"));
        lines.push(format!("  reduce+broadcast {len:>4} f64 {tree:>10.2?}"));
    }
    lines
}

#[mttl::main]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for line in &mttl::spmd(tour, ())[0] {
        println!("{line}");
    }
    if let Some(i) = args.iter().position(|a| a == "--latency") {
        let iters = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        for line in &mttl::spmd(latencies, (iters,))[0] {
            println!("{line}");
        }
    }
}
