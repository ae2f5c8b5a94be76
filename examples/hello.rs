//! Hello from every node: node 0's main invokes `hello` on each node and
//! prints what comes back.
//!
//! ```text
//! cargo run --example hello                       # one node
//! MTTL_NP=4 cargo run --example hello             # four nodes on TCP
//! mttlrun -n 4 -- target/debug/examples/hello
//! ```

#[mttl::remote]
fn hello(from: usize) -> String {
    format!(
        "hello from rank {} of {} ({} backend), asked by rank {from}",
        mttl::rank(),
        mttl::size(),
        mttl::backend_name()
    )
}

#[mttl::main]
fn main() {
    for node in 0..mttl::size() {
        println!("{}", mttl::invoke(node, hello, (mttl::rank(),)));
    }
}
