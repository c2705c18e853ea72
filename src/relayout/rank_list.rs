//! Lists of ranks as people write them: `200-203,517`.

use crate::error::{Error, Result};

/// The most ranks one list may name (ranges are expanded).
pub const MAX_LISTED_RANKS: u64 = 1 << 20;

/// The ranks of a list such as `200-203,517`: comma-separated ranks and
/// inclusive ranges `a-b`, blanks around items allowed, in any order;
/// returned sorted, each once.
///
/// ```
/// use rank_layout::relayout::parse_rank_list;
/// assert_eq!(parse_rank_list("517, 200-203")?, [200, 201, 202, 203, 517]);
/// assert!(parse_rank_list("203-200").is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// [`Error::BadRankList`] naming the item that is not a rank or a range
/// (empty, not a number, past `u32`, a range running backwards), or a list
/// of more than [`MAX_LISTED_RANKS`] ranks.
pub fn parse_rank_list(text: &str) -> Result<Vec<u32>> {
    let mut ranks = Vec::new();
    let mut listed = 0u64;
    for item in text.split(',') {
        let item = item.trim();
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (number(a, item)?, number(b, item)?),
            None => {
                let r = number(item, item)?;
                (r, r)
            }
        };
        if last < first {
            return Err(bad(
                item,
                "a range runs from the smaller rank to the larger",
            ));
        }
        listed += u64::from(last - first) + 1;
        if listed > MAX_LISTED_RANKS {
            return Err(bad(item, "the list names more than 1,048,576 ranks"));
        }
        ranks.extend(first..=last);
    }
    ranks.sort_unstable();
    ranks.dedup();
    Ok(ranks)
}

/// `ranks` (ascending, each once) as a list [`parse_rank_list`] reads
/// back: runs of three or more as ranges (`0-3, 8, 9`).
pub(crate) fn format_rank_list(ranks: &[u32]) -> String {
    let mut items: Vec<String> = Vec::new();
    let mut rest = ranks;
    while let Some((&first, tail)) = rest.split_first() {
        // The run of consecutive ranks from `first`.
        let run = (0u32..)
            .zip(tail)
            .take_while(|&(i, &r)| Some(r) == first.checked_add(i + 1))
            .count();
        let last = tail.get(run.wrapping_sub(1)).copied().filter(|_| run > 0);
        match last {
            Some(last) if run >= 2 => items.push(format!("{first}-{last}")),
            Some(last) => items.push(format!("{first}, {last}")),
            None => items.push(first.to_string()),
        }
        rest = tail.get(run..).unwrap_or_default();
    }
    items.join(", ")
}

fn number(word: &str, item: &str) -> Result<u32> {
    let word = word.trim();
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            item,
            "a rank is a number and a range is two, as in 200-203",
        ));
    }
    word.parse()
        .map_err(|_| bad(item, "a rank is at most 4294967295"))
}

fn bad(item: &str, problem: &str) -> Error {
    Error::BadRankList {
        item: item.to_string(),
        problem: problem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_errors() {
        assert_eq!(parse_rank_list("3").unwrap(), [3]);
        assert_eq!(parse_rank_list(" 5 - 6 ,1,5").unwrap(), [1, 5, 6]);
        for bad in [
            "",
            "1,,2",
            "a",
            "1-",
            "-1",
            "4-2",
            "4294967296",
            "1-2-3",
            "+1",
        ] {
            let e = parse_rank_list(bad).unwrap_err();
            assert!(matches!(e, Error::BadRankList { .. }), "{bad:?}: {e}");
        }
        assert!(parse_rank_list("0-4294967295").is_err());
    }

    #[test]
    fn formatted_lists_read_back() {
        for ranks in [
            vec![],
            vec![7],
            vec![0, 1],
            vec![0, 1, 2, 3, 8, 9, 11],
            vec![4294967293, 4294967294, 4294967295],
        ] {
            let text = format_rank_list(&ranks);
            if ranks.is_empty() {
                assert_eq!(text, "");
            } else {
                assert_eq!(parse_rank_list(&text).unwrap(), ranks, "{text}");
            }
        }
        assert_eq!(format_rank_list(&[0, 1, 2, 3, 8, 9, 11]), "0-3, 8, 9, 11");
    }
}
