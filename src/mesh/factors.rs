//! One factorisation of a mesh's positions into named dims, first fastest.

use arrayvec::ArrayVec;

use crate::error::{Error, Result};
use crate::math::{Div, checked_product};
use crate::segment::{Digit, MAX_DIGITS};

/// Most dims of one factorisation (the digits of a box).
pub(crate) const MAX_DIMS: usize = MAX_DIGITS;

/// A rank's coordinates in one factorisation, by dim position.
pub(crate) type DimCoords = [u32; MAX_DIMS];

/// One named dim: its size, its stride (first dim 1) and a divider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Dim {
    pub name: String,
    pub digit: Digit,
    pub div: Div,
}

/// Named dims over positions `0..world`, first fastest: position =
/// `sum(coord[d] * stride[d])`, sizes `(a, b, c)` giving strides `(1, a, a*b)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Factors {
    pub dims: ArrayVec<Dim, MAX_DIMS>,
    pub world: u32,
}

/// Whether `name` is a name: ASCII letters, digits and `_`, not empty and
/// not starting with a digit (so that `-`, `:`, `,` and `=` can join names
/// in a specification).
pub(crate) fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Factors {
    /// The dims `dims` (name, size), first fastest; `place` names them in
    /// errors (`the mesh`, `view expert`).
    ///
    /// # Errors
    /// [`Error::NoDims`] for none, [`Error::BadName`],
    /// [`Error::DuplicateName`], [`Error::ZeroDim`], [`Error::TooManyDims`],
    /// [`Error::Overflow`] past `u32` ranks.
    pub fn new(dims: &[(String, u32)], place: &str) -> Result<Factors> {
        if dims.is_empty() {
            return Err(Error::NoDims {
                place: place.to_owned(),
            });
        }
        if dims.len() > MAX_DIMS {
            return Err(Error::TooManyDims {
                count: dims.len(),
                place: place.to_owned(),
                max: MAX_DIMS,
            });
        }
        let mut out: ArrayVec<Dim, MAX_DIMS> = ArrayVec::new();
        let mut stride = 1u32;
        for (i, (name, size)) in dims.iter().enumerate() {
            if !is_name(name) {
                return Err(Error::BadName {
                    what: "dim",
                    name: name.clone(),
                });
            }
            if dims.iter().take(i).any(|(other, _)| other == name) {
                return Err(Error::DuplicateName {
                    name: name.clone(),
                    place: place.to_owned(),
                });
            }
            if *size == 0 {
                return Err(Error::ZeroDim { name: name.clone() });
            }
            let _ = out.try_push(Dim {
                name: name.clone(),
                digit: Digit {
                    size: *size,
                    stride,
                },
                div: Div::new(*size),
            });
            // Sizes (a, b, c) => strides (1, a, a*b); the last product is
            // checked below.
            stride = stride.wrapping_mul(*size);
        }
        let world =
            checked_product(dims.iter().map(|(_, s)| *s)).ok_or_else(|| Error::Overflow {
                what: format!("{place} {}", spelled(dims)),
            })?;
        Ok(Factors { dims: out, world })
    }

    /// The position of the dim named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.dims.iter().position(|d| d.name == name)
    }

    /// The dims' names, joined by `, ` (for messages).
    pub fn names(&self) -> String {
        self.dims
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The coordinates of position `p < world`.
    #[inline]
    pub fn decode(&self, p: u32) -> DimCoords {
        let mut out = [0u32; MAX_DIMS];
        let mut rest = p;
        for (c, d) in out.iter_mut().zip(&self.dims) {
            let (q, r) = d.div.div_rem(rest);
            *c = r;
            rest = q;
        }
        out
    }

    /// The digits with whether each is in `mask` (bit `i` for dim `i`).
    pub fn digits(&self, mask: u32) -> ArrayVec<(Digit, bool), MAX_DIMS> {
        self.dims
            .iter()
            .enumerate()
            .map(|(i, d)| (d.digit, mask & (1 << i) != 0))
            .collect()
    }

    /// Per dim, the packed weight of its coordinate in the group number
    /// (high 32 bits) and in the position within the group (low 32 bits)
    /// of the dim set `mask`: members in dim order first fastest, groups
    /// numbered by the other dims, first fastest.
    pub fn weights(&self, mask: u32) -> [u64; MAX_DIMS] {
        let mut out = [0u64; MAX_DIMS];
        let (mut wi, mut wk) = (1u64, 1u64);
        for (i, (w, d)) in out.iter_mut().zip(&self.dims).enumerate() {
            if mask & (1 << i) != 0 {
                *w = wk;
                wk *= u64::from(d.digit.size);
            } else {
                *w = wi << 32;
                wi *= u64::from(d.digit.size);
            }
        }
        out
    }
}

/// `tp=2 * cp=4`: dims as a product, for messages.
pub(crate) fn spelled(dims: &[(String, u32)]) -> String {
    dims.iter()
        .map(|(n, s)| format!("{n}={s}"))
        .collect::<Vec<_>>()
        .join(" * ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["tp", "dp_shard", "_x", "a1"] {
            assert!(is_name(good), "{good}");
        }
        for bad in ["", "1a", "dp-cp", "a:b", "a b", "é"] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn strides_first_fastest() {
        let f = Factors::new(&[("a".into(), 2), ("b".into(), 3), ("c".into(), 4)], "m").unwrap();
        let strides: Vec<u32> = f.dims.iter().map(|d| d.digit.stride).collect();
        assert_eq!(strides, vec![1, 2, 6]);
        assert_eq!(f.decode(23)[..3], [1, 2, 3]);
    }
}
