//! A 1-D heat-diffusion stencil on global memory, checked against the same
//! computation done serially.
//!
//! The rod is cut into one block of `CELLS` cells per node, each kept in a
//! `GlobalArray<f64>` with ghost cells for the neighbours' edge values. It
//! starts with an uneven temperature profile (so every halo carries data
//! from the first step on); its left end is held at 100 degrees, its right
//! end at 0. Every step, on every node:
//!
//! 1. write this block's edge cells into the neighbours' ghost cells with
//!    `nwrite` (no waiting);
//! 2. `barrier()`, which fences first: when it returns, every node's halo
//!    writes are in place;
//! 3. compute the block's next values from its cells and ghost cells.
//!
//! The ghost cells come in two sets, used on even and odd steps: a node
//! that runs ahead writes the next step's halos while its slower
//! neighbour still reads this step's, and the barrier of each step keeps
//! every node within one step of the others.
//!
//! ```text
//! cargo run --example stencil                  # one node
//! MTTL_NP=4 cargo run --example stencil        # four nodes on TCP
//! ```

use std::cell::RefCell;
use std::rc::Rc;

use mttl::{GlobalArray, GlobalPtr};
// The decomposition (cells per node, steps, who writes to whom) is shared
// with `mttl-trace scale --skeleton stencil`, which computes the pseudo
// traces of larger jobs from it.
use mttl_kernels::stencil::{first_cell, neighbours, CELLS, STEPS};
/// Diffusion number (stable below 0.5).
const ALPHA: f64 = 0.25;
/// Temperatures held at the rod's ends.
const HOT: f64 = 100.0;
const COLD: f64 = 0.0;

/// Layout of a node's array: the left ghost cells (even and odd steps),
/// the block's cells, the right ghost cells.
const LEFT: usize = 0;
const FIRST: usize = 2;
const RIGHT: usize = FIRST + CELLS;
const LEN: usize = RIGHT + 2;

thread_local! {
    /// This node's block (every mttl thread of a node shares one OS thread).
    static BLOCK: RefCell<Option<Rc<GlobalArray<f64>>>> = const { RefCell::new(None) };
}

fn block() -> Rc<GlobalArray<f64>> {
    BLOCK
        .with(|b| b.borrow().clone())
        .expect("setup ran on this node")
}

/// The starting temperature of cell `i` of the whole rod.
fn initial(i: usize) -> f64 {
    (i * 7919 % 101) as f64
}

/// Registers this node's block at its starting temperatures; returns its
/// pointer.
#[mttl::remote]
fn setup() -> GlobalPtr<f64> {
    let a = Rc::new(GlobalArray::<f64>::new(LEN));
    let start = first_cell(mttl::rank());
    for (i, cell) in a.borrow_mut()[FIRST..RIGHT].iter_mut().enumerate() {
        *cell = initial(start + i);
    }
    let p = a.global_ptr();
    BLOCK.with(|b| *b.borrow_mut() = Some(a));
    p
}

/// The time loop of one node (steps 1 to 3 of the module docs).
#[mttl::remote]
fn run(blocks: Vec<GlobalPtr<f64>>, steps: usize) {
    let (me, n) = (mttl::rank(), mttl::size());
    let block = block();
    for step in 0..steps {
        let set = step % 2;
        // 1. Halos out.
        let (first, last) = {
            let b = block.borrow();
            (b[FIRST], b[RIGHT - 1])
        };
        for next in neighbours(me, n) {
            // The left neighbour gets this block's first cell in its right
            // ghost cell, the right one the last cell in its left ghost.
            if next < me {
                blocks[next].add(RIGHT + set).nwrite(first);
            } else {
                blocks[next].add(LEFT + set).nwrite(last);
            }
        }
        // 2. Every halo of this step is in place once the barrier returns.
        mttl::barrier();
        // 3. The new values, from this node's memory only.
        let mut b = block.borrow_mut();
        let left = if me == 0 { HOT } else { b[LEFT + set] };
        let right = if me + 1 == n { COLD } else { b[RIGHT + set] };
        let old = b[FIRST..RIGHT].to_vec();
        step_cells(&old, left, right, &mut b[FIRST..RIGHT]);
    }
}

/// One step of the stencil on `old`, with the values beyond its ends.
fn step_cells(old: &[f64], left: f64, right: f64, new: &mut [f64]) {
    let last = old.len() - 1;
    for i in 0..old.len() {
        let l = if i == 0 { left } else { old[i - 1] };
        let r = if i == last { right } else { old[i + 1] };
        new[i] = old[i] + ALPHA * (l - 2.0 * old[i] + r);
    }
}

#[mttl::main]
fn main() -> Result<(), String> {
    let n = mttl::size();
    let blocks = mttl::spmd(setup, ());
    mttl::spmd(run, (blocks.clone(), STEPS));

    // Gather the rod by reading every block through its global pointer.
    let mut rod = Vec::with_capacity(n * CELLS);
    for p in &blocks {
        rod.extend(p.add(FIRST).read_vec(CELLS));
    }

    let mut serial: Vec<f64> = (0..n * CELLS).map(initial).collect();
    let mut next = serial.clone();
    for _ in 0..STEPS {
        step_cells(&serial, HOT, COLD, &mut next);
        std::mem::swap(&mut serial, &mut next);
    }

    let quarter = |v: &[f64]| -> Vec<String> {
        (0..=4)
            .map(|q| format!("{:.3}", v[(q * (v.len() - 1)) / 4]))
            .collect()
    };
    println!(
        "stencil: {n} nodes x {CELLS} cells, {STEPS} steps ({} backend)",
        mttl::backend_name()
    );
    println!(
        "temperature at 0, 1/4, 1/2, 3/4, 1 of the rod: {}",
        quarter(&rod).join(" ")
    );
    if rod != serial {
        let worst = rod
            .iter()
            .zip(&serial)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        return Err(format!(
            "the distributed result differs from the serial one (by up to {worst})"
        ));
    }
    println!("matches the serial computation exactly");
    Ok(())
}
