//! The paper's figure 3: node 0 calls `foo(1, 2)` on node 1 and prints the
//! result (`invoke(i, 1, foo, 1, 2)` in MPC++; here `invoke(1, foo, (1, 2))`).
//!
//! ```text
//! MTTL_NP=2 cargo run --example fig3
//! ```

#[mttl::remote]
fn foo(a: i32, b: i32) -> i32 {
    println!("foo({a}, {b}) runs on rank {}", mttl::rank());
    a + b
}

#[mttl::main]
fn main() {
    let node = 1 % mttl::size();
    let r = mttl::invoke(node, foo, (1, 2));
    println!("invoke({node}, foo, (1, 2)) = {r}");
    assert_eq!(r, 3);
}
