//! Checked conversions between MPI ranks (`int`) and layout ranks (`u32`).

use ::mpi::Rank;

use crate::error::{Error, Result};

/// The layout rank of an MPI rank: MPI ranks are `int`, layout ranks `u32`.
///
/// # Errors
/// [`Error::NegativeRank`] for a negative rank (MPI's `MPI_PROC_NULL` and
/// friends).
///
/// ```
/// use rank_layout::mpi::{from_mpi_rank, to_mpi_rank};
/// assert_eq!(from_mpi_rank(7)?, 7);
/// assert!(from_mpi_rank(-1).is_err());
/// assert_eq!(to_mpi_rank(7)?, 7);
/// assert!(to_mpi_rank(u32::MAX).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub fn from_mpi_rank(rank: Rank) -> Result<u32> {
    u32::try_from(rank).map_err(|_| Error::NegativeRank {
        rank: i64::from(rank),
    })
}

/// The MPI rank of a layout rank.
///
/// # Errors
/// [`Error::Overflow`] for a rank beyond MPI's `int`.
pub fn to_mpi_rank(rank: u32) -> Result<Rank> {
    Rank::try_from(rank).map_err(|_| Error::Overflow {
        what: format!("rank {rank} as an MPI int"),
    })
}
