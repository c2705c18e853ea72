//! Integer conversions that cannot lose a value on the targets the crate
//! builds for, in one place: clippy's cast lints deny `as` between integer
//! types everywhere else (Cargo.toml).
//!
//! Ranks, sizes and indices are `u32`, lengths in memory `usize`, and the
//! crate builds only where pointers have 32 or 64 bits, so a `u32` fits in
//! a `usize` and a `usize` in a `u64` (asserted below at compile time).
//! These are `as` casts under the hood, free in the enumeration loops where
//! a `try_from` would add a branch.

const _: () = assert!(usize::BITS >= 32 && usize::BITS <= 64);

/// `x` as an index or a length: lossless, `usize` has at least 32 bits.
#[inline(always)]
pub(crate) const fn to_usize(x: u32) -> usize {
    x as usize
}

/// A length or an index in memory as a `u64`: lossless, `usize` has at
/// most 64 bits.
#[inline(always)]
pub(crate) const fn to_u64(x: usize) -> u64 {
    x as u64
}

/// A `u64` count of places that is at most the length of a slice in memory
/// (the caller's invariant), as a `usize`: it fits, as that length does.
// The one cast that would truncate a larger value; every caller states why
// its value is bounded by a length.
#[allow(clippy::cast_possible_truncation)]
#[inline(always)]
pub(crate) const fn len_usize(x: u64) -> usize {
    x as usize
}

/// The low 32 bits of `x`: rank arithmetic wraps modulo 2^32, and a value
/// known to be below 2^32 is kept whole.
#[allow(clippy::cast_possible_truncation)]
#[inline(always)]
pub(crate) const fn low32(x: u64) -> u32 {
    x as u32
}

/// A `u64` index or count as a `usize`, `usize::MAX` when it does not fit
/// (only where pointers have 32 bits): a lookup with it finds nothing.
#[inline]
pub(crate) fn saturating_usize(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}
