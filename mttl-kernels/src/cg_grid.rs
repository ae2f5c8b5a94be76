//! CG's process grid: which block of the matrix a process owns and whom it
//! exchanges with (NPB-MPI's `setup_proc_info` and `setup_submatrix_info`).
//!
//! All indices here are 0-based and ranges half-open.
//!
//! 1. `nprocs = 2^k` processes form `nprows × npcols` with
//!    `nprows = 2^(k/2)` and `npcols = 2^(k − k/2)`: square, or twice as
//!    wide as tall. Rank `me` sits at row `me / npcols`, column `me % npcols`.
//! 2. Process `(r, c)` owns the matrix rows of row block `r` and the columns
//!    of column block `c`. Vectors indexed by column (`x`, `z`, `p`, `q`,
//!    `r`) hold its column block; the mat-vec result `w` its row block.
//! 3. When the grid is not square, the columns are first cut into `nprows`
//!    pieces exactly like the rows, and each piece is halved between the
//!    even and odd column of a pair, so column block `c` is half `c % 2` of
//!    row block `c / 2`.
//! 4. The row reduction of `w` runs `l2npcols = log2(npcols)` exchange steps,
//!    nearest partner first ([`CgGrid::reduce_steps`] is in that order). In a
//!    square grid every step is a full-length exchange-and-add (a butterfly
//!    allreduce). Otherwise the first step (with partner `me ^ 1`) is a
//!    reduce-scatter: the even process keeps the first half of its rows
//!    (`send_start = 0`, `send_len = ⌈n/2⌉`), the odd one the second; the
//!    later steps exchange only that half.
//! 5. After the reduction the process holds the full sums of rows
//!    `send_start .. send_start + send_len` of its block; it sends them to
//!    the transpose processor [`CgGrid::exch_proc`], whose column block is
//!    exactly those rows, and receives its own column block from it
//!    (`exch_recv_len` values). With a 1 × 2 grid the transpose processor is
//!    the process itself.
//! 6. Scalar sums use the same partners in the opposite order (farthest
//!    first), adding the partner's value after the process's own; each sum is
//!    then identical on every process of a row, and every row computes the
//!    same one.
//!
//! NPB's names, for readers of `cg.f` (NPB's step `i` of `1..=l2npcols` is
//! `reduce_steps[l2npcols − i]` here, and `sum_partners[i − 1]`):
//!
//! | NPB | here |
//! |---|---|
//! | `firstrow..lastrow`, `firstcol..lastcol` | [`CgGrid::rows`], [`CgGrid::cols`] (0-based, half-open) |
//! | `reduce_exch_proc(i)` | [`ReduceStep::partner`], [`CgGrid::sum_partners`] |
//! | `reduce_send_starts(i)`, `reduce_send_lengths(i)` | [`ReduceStep::send`] |
//! | `reduce_recv_starts(i)`, `reduce_recv_lengths(i)` | [`ReduceStep::recv`] |
//! | `send_start`, `send_len` | [`CgGrid::send_start`], [`CgGrid::send_len`] |
//! | `exch_proc`, `exch_recv_length` | [`CgGrid::exch_proc`], [`CgGrid::exch_recv_len`] |

use std::fmt;
use std::ops::Range;

/// One exchange step of the row reduction, as seen by one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceStep {
    /// The process to exchange with (same process row).
    pub partner: usize,
    /// The part of the local `w` sent to the partner.
    pub send: Range<usize>,
    /// The part of the local `w` that the partner's values are added to.
    pub recv: Range<usize>,
}

/// Why a process grid cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GridError {
    /// CG needs a power-of-two number of processes.
    NotPowerOfTwo {
        /// The number of processes asked for.
        nprocs: usize,
    },
    /// The rank is not below the number of processes.
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
        /// The number of processes.
        nprocs: usize,
    },
    /// More process rows or columns than matrix rows.
    TooManyProcesses {
        /// The number of processes asked for.
        nprocs: usize,
        /// The order of the matrix.
        na: usize,
    },
}

impl fmt::Display for GridError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GridError::NotPowerOfTwo { nprocs } => write!(
                f,
                "CG needs a power-of-two number of processes, got {nprocs}"
            ),
            GridError::RankOutOfRange { rank, nprocs } => {
                write!(f, "rank {rank} is out of range for {nprocs} processes")
            }
            GridError::TooManyProcesses { nprocs, na } => write!(
                f,
                "{nprocs} processes are too many for a CG matrix of order {na}"
            ),
        }
    }
}

impl std::error::Error for GridError {}

/// One process's place in CG's process grid and its communication schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgGrid {
    /// Number of processes.
    pub nprocs: usize,
    /// This process's rank.
    pub me: usize,
    /// Process rows.
    pub nprows: usize,
    /// Process columns (`nprows` or `2 · nprows`).
    pub npcols: usize,
    /// This process's grid row.
    pub proc_row: usize,
    /// This process's grid column.
    pub proc_col: usize,
    /// Global matrix rows owned.
    pub rows: Range<usize>,
    /// Global matrix columns owned.
    pub cols: Range<usize>,
    /// Start, in the local `w`, of the rows this process finishes and sends
    /// to its transpose processor.
    pub send_start: usize,
    /// Number of those rows.
    pub send_len: usize,
    /// The transpose processor.
    pub exch_proc: usize,
    /// Values received from the transpose processor (the column count).
    pub exch_recv_len: usize,
    /// log2(npcols): exchange steps of a row reduction.
    pub l2npcols: usize,
    /// The row reduction schedule, in execution order (nearest partner first).
    pub reduce_steps: Vec<ReduceStep>,
    /// Partners of the scalar sums, in execution order (farthest first).
    pub sum_partners: Vec<usize>,
}

/// Splits `n` items into `parts` nearly equal blocks and returns block `i`:
/// the first `n % parts` blocks get one item more.
fn block(n: usize, parts: usize, i: usize) -> Range<usize> {
    let size = n / parts;
    let rem = n % parts;
    if i < rem {
        let start = i * (size + 1);
        start..start + size + 1
    } else {
        let start = rem * (size + 1) + (i - rem) * size;
        start..start + size
    }
}

impl CgGrid {
    /// The grid position and schedule of rank `me` of `nprocs` for a matrix
    /// of order `na`.
    pub fn new(na: usize, nprocs: usize, me: usize) -> Result<Self, GridError> {
        if !nprocs.is_power_of_two() {
            return Err(GridError::NotPowerOfTwo { nprocs });
        }
        if me >= nprocs {
            return Err(GridError::RankOutOfRange { rank: me, nprocs });
        }
        let log_p = nprocs.trailing_zeros() as usize;
        let nprows = 1usize << (log_p / 2);
        let npcols = 1usize << (log_p - log_p / 2);
        if npcols > na {
            return Err(GridError::TooManyProcesses { nprocs, na });
        }
        let proc_row = me / npcols;
        let proc_col = me % npcols;
        let square = nprows == npcols;

        // Step 1-3 of the module doc. The evenly divisible case gives the
        // same blocks as the general formula.
        let rows = block(na, nprows, proc_row);
        let cols = if square {
            block(na, npcols, proc_col)
        } else {
            let piece = block(na, npcols / 2, proc_col / 2);
            let len = piece.len();
            let first_half = (len - 1) / 2 + 1;
            if me % 2 == 0 {
                piece.start..piece.start + first_half
            } else {
                piece.start + first_half..piece.end
            }
        };
        let nrows = rows.len();

        let (send_start, send_len) = if square {
            (0, nrows)
        } else if me % 2 == 0 {
            (0, nrows.div_ceil(2))
        } else {
            (nrows.div_ceil(2), nrows / 2)
        };

        let exch_proc = if square {
            (me % nprows) * nprows + me / nprows
        } else {
            2 * ((me / 2 % nprows) * nprows + me / 2 / nprows) + me % 2
        };

        let l2npcols = npcols.trailing_zeros() as usize;

        // NPB numbers the steps i = 1..=l2npcols with partner distance
        // npcols / 2^i and runs the vector reduction from i = l2npcols down.
        let partner_at = |i: usize| {
            let div = npcols >> (i - 1);
            let j = (proc_col + div / 2) % div + proc_col / div * div;
            proc_row * npcols + j
        };
        let sum_partners: Vec<usize> = (1..=l2npcols).map(partner_at).collect();
        let own_half = send_start..send_start + send_len;
        let reduce_steps = (1..=l2npcols)
            .rev()
            .map(|i| {
                let send = if square {
                    0..nrows
                } else if i == l2npcols {
                    // Reduce-scatter step: send the half the partner keeps.
                    if me % 2 == 0 {
                        send_start + send_len..nrows
                    } else {
                        0..send_start
                    }
                } else {
                    own_half.clone()
                };
                ReduceStep {
                    partner: partner_at(i),
                    send,
                    recv: own_half.clone(),
                }
            })
            .collect();

        Ok(Self {
            nprocs,
            me,
            nprows,
            npcols,
            proc_row,
            proc_col,
            exch_recv_len: cols.len(),
            rows,
            cols,
            send_start,
            send_len,
            exch_proc,
            l2npcols,
            reduce_steps,
            sum_partners,
        })
    }

    /// Number of local rows (length of `w`).
    pub fn nrows(&self) -> usize {
        self.rows.len()
    }

    /// Number of local columns (length of the column vectors).
    pub fn ncols(&self) -> usize {
        self.cols.len()
    }

    /// The local rows finished by the row reduction and sent to the
    /// transpose processor.
    pub fn send_range(&self) -> Range<usize> {
        self.send_start..self.send_start + self.send_len
    }

    /// The largest vector any single exchange of this process carries.
    pub fn max_exchange_len(&self) -> usize {
        self.nrows().max(self.ncols())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grids(na: usize, nprocs: usize) -> Vec<CgGrid> {
        (0..nprocs)
            .map(|me| CgGrid::new(na, nprocs, me).unwrap())
            .collect()
    }

    #[test]
    fn shapes_follow_npb() {
        let shape = |p| {
            let g = CgGrid::new(1400, p, 0).unwrap();
            (g.nprows, g.npcols, g.l2npcols)
        };
        assert_eq!(shape(1), (1, 1, 0));
        assert_eq!(shape(2), (1, 2, 1));
        assert_eq!(shape(4), (2, 2, 1));
        assert_eq!(shape(8), (2, 4, 2));
        assert_eq!(shape(32), (4, 8, 3));
        assert_eq!(
            CgGrid::new(1400, 6, 0),
            Err(GridError::NotPowerOfTwo { nprocs: 6 })
        );
        assert!(CgGrid::new(1400, 4, 4).is_err());
    }

    #[test]
    fn blocks_tile_the_matrix() {
        for na in [1400, 7000, 14_000, 75_000, 1001] {
            for p in [1, 2, 4, 8, 16, 32, 64] {
                let gs = grids(na, p);
                for row in 0..gs[0].nprows {
                    // Every process row covers every column exactly once, in order.
                    let mut next = 0;
                    for g in gs.iter().filter(|g| g.proc_row == row) {
                        assert_eq!(g.cols.start, next, "na {na} p {p}");
                        next = g.cols.end;
                        assert!(!g.cols.is_empty());
                    }
                    assert_eq!(next, na);
                }
            }
        }
    }

    #[test]
    fn every_exchange_is_matched_by_the_partner() {
        for na in [1400, 7000, 1001, 75_000] {
            for p in [1, 2, 4, 8, 16, 32, 64] {
                let gs = grids(na, p);
                for g in &gs {
                    assert_eq!(g.reduce_steps.len(), g.l2npcols);
                    for (s, step) in g.reduce_steps.iter().enumerate() {
                        let peer = &gs[step.partner];
                        let back = &peer.reduce_steps[s];
                        assert_eq!(back.partner, g.me);
                        assert_eq!(peer.rows, g.rows);
                        // What the partner sends is what this process adds up.
                        assert_eq!(back.send, step.recv, "na {na} p {p} me {}", g.me);
                    }
                    // The finished rows are exactly the transpose partner's columns.
                    let t = &gs[g.exch_proc];
                    assert_eq!(t.exch_proc, g.me);
                    let sent =
                        g.rows.start + g.send_start..g.rows.start + g.send_start + g.send_len;
                    assert_eq!(sent, t.cols, "na {na} p {p} me {}", g.me);
                    assert_eq!(t.exch_recv_len, g.send_len);
                    for (s, &partner) in g.sum_partners.iter().enumerate() {
                        assert_eq!(gs[partner].sum_partners[s], g.me);
                        assert_eq!(gs[partner].proc_row, g.proc_row);
                    }
                }
            }
        }
    }

    #[test]
    fn two_processes_transpose_to_themselves() {
        for me in 0..2 {
            let g = CgGrid::new(1400, 2, me).unwrap();
            assert_eq!(g.exch_proc, me);
            assert_eq!(g.reduce_steps[0].partner, 1 - me);
        }
    }
}
