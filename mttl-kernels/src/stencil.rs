//! The 1-D stencil of `examples/stencil.rs`: a rod of `CELLS` cells per
//! node, advanced `STEPS` times; each step a node writes its edge cells
//! into its neighbours' ghost cells and meets the others at a barrier.
//!
//! Work per node is constant (weak scaling): a job of N nodes has N blocks.

/// Cells per node.
pub const CELLS: usize = 100;
/// Time steps.
pub const STEPS: usize = 1000;

/// The global index of the first cell of `node`'s block.
pub fn first_cell(node: usize) -> usize {
    node * CELLS
}

/// The neighbours `node` of `nodes` writes its edge cells to, left first:
/// its left edge to `node - 1`, its right edge to `node + 1`, where they
/// exist.
pub fn neighbours(node: usize, nodes: usize) -> impl Iterator<Item = usize> {
    let left = node.checked_sub(1);
    let right = (node + 1 < nodes).then_some(node + 1);
    left.into_iter().chain(right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_have_one_neighbour_and_the_inside_two() {
        assert_eq!(neighbours(0, 1).count(), 0);
        assert_eq!(neighbours(0, 4).collect::<Vec<_>>(), vec![1]);
        assert_eq!(neighbours(2, 4).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(neighbours(3, 4).collect::<Vec<_>>(), vec![2]);
        assert_eq!(first_cell(3), 300);
    }
}
