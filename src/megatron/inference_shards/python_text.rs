//! Python's `str.strip()` and `int(text)` on text, as Megatron-Core's
//! parser of `--inference-shards` applies them (CPython 3.12, Unicode
//! 15.0), so that the same text is read the same way.

/// CPython's `str.isspace()` (`Py_UNICODE_ISSPACE`): the characters of
/// bidirectional type WS, B or S, or of category Zs. Rust's
/// `char::is_whitespace` lacks the four ASCII separators U+001C..U+001F.
pub(crate) fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `text.strip()`.
pub(crate) fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// The zero of every run of decimal digits (Unicode category Nd, each run
/// `0..9` in order) in Unicode 15.0, CPython 3.12's: `int()` reads any of
/// them as the ASCII digit. Generated with
/// `[c for c in range(0x110000) if unicodedata.decimal(chr(c), None) == 0]`.
const DIGIT_ZEROS: [u32; 68] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x11F50, 0x16A60, 0x16AC0,
    0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E950,
    0x1FBF0,
];

/// The value of `c` as a decimal digit in Python (`unicodedata.decimal`).
fn decimal(c: char) -> Option<u32> {
    let c = u32::from(c);
    // The last zero at or below `c`; the runs are sorted and disjoint.
    let i = DIGIT_ZEROS.partition_point(|z| *z <= c).checked_sub(1)?;
    let zero = DIGIT_ZEROS.get(i)?;
    let d = c - zero;
    (d < 10).then_some(d)
}

/// CPython's limit on the digits `int()` converts from text
/// (`sys.get_int_max_str_digits()`, 4300 by default); more is a
/// `ValueError`.
const MAX_STR_DIGITS: usize = 4300;

/// Python's `int(text)` in base 10, for `text` already stripped: an
/// optional sign, then decimal digits of any script with single
/// underscores between them (`1_000`), at most 4300 digits. The value
/// saturates at `i128`'s bounds (every size past `u32` is refused
/// anyway); `None` where Python raises `ValueError`.
pub(crate) fn int(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return None;
    }
    let mut value: i128 = 0;
    let mut count = 0usize;
    let mut after_underscore = false;
    for c in digits.chars() {
        if c == '_' {
            if after_underscore {
                return None;
            }
            after_underscore = true;
            continue;
        }
        after_underscore = false;
        let d = decimal(c)?;
        count += 1;
        value = value.saturating_mul(10).saturating_add(i128::from(d));
    }
    if count > MAX_STR_DIGITS {
        return None;
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::{int, strip};

    /// Values `int()` gives in CPython 3.12 (`int("\u0663")` is 3, ...).
    #[test]
    fn as_python_reads_them() {
        assert_eq!(int("007"), Some(7));
        assert_eq!(int("1_000"), Some(1000));
        assert_eq!(int("-2"), Some(-2));
        assert_eq!(int("+2"), Some(2));
        assert_eq!(int("\u{663}"), Some(3));
        assert_eq!(int("\u{ff11}\u{ff12}"), Some(12));
        assert_eq!(int("1\u{663}"), Some(13));
        for bad in [
            "", "-", "+", "_1", "1_", "1__0", "- 1", "1 2", "0x10", "1.0", "\u{b2}", "++1",
        ] {
            assert_eq!(int(bad), None, "{bad:?}");
        }
        assert_eq!(int(&"9".repeat(4300)), Some(i128::MAX));
        assert_eq!(int(&"9".repeat(4301)), None);
        assert_eq!(strip("\u{1c} tp\u{3000}"), "tp");
        assert_eq!(strip("\u{200b}x"), "\u{200b}x"); // zero-width space is not a space
    }
}
