//! `rank-layout describe`: the derived sizes and why, the groups of every
//! kind, and what listing everything would cost.

use std::fmt::{self, Write};

use rank_layout::{Config, ExpertLayout, Layout, Topology};

use crate::format::{bytes, count, thousands};
use crate::report::groups::groups_heading;
use crate::spread::machine_line;

/// Groups a kind lists at most in the shortened table (the head, the tail
/// and the line between them).
const SHORT_ROWS: u64 = 64;

/// A description of a layout.
pub struct DescribeReport<'a> {
    layout: &'a Layout,
    /// The configuration as given (to tell given sizes from derived ones).
    given: &'a Config,
    topology: Topology,
}

impl<'a> DescribeReport<'a> {
    /// Describes `layout`, built from `given`, on `topology`.
    pub fn new(layout: &'a Layout, given: &'a Config, topology: Topology) -> DescribeReport<'a> {
        DescribeReport {
            layout,
            given,
            topology,
        }
    }

    /// The lines that explain the derived sizes.
    fn why(&self) -> Result<Vec<String>, fmt::Error> {
        let l = self.layout;
        let s = l.sizes();
        let world = l.world_size();
        let mut lines = Vec::new();
        // The ranks of one data-parallel replica: its formula, its factors.
        let (what, factors) = match l.encoder_sizes() {
            Some(e) => (
                "(encoder_tp*encoder_pp + tp*pp)*cp",
                format!("({}*{} + {}*{})*{}", e.tp, e.pp, s.tp, s.pp, s.cp),
            ),
            None => ("tp*cp*pp", format!("{}*{}*{}", s.tp, s.cp, s.pp)),
        };
        let dp = s.dp;
        lines.push(match (self.given.dp, self.given.world_size) {
            (Some(_), Some(_)) => format!(
                "dp = {dp} (given), checked: world_size = {what}*dp = {factors}*{dp} = {world}"
            ),
            (Some(_), None) => format!(
                "dp = {dp} (given), so world_size = {what}*dp = {factors}*{dp} = {world}"
            ),
            (None, Some(_)) => format!(
                "dp = world_size / ({what}) = {world} / ({factors}) = {dp}"
            ),
            (None, None) => format!(
                "dp = 1 (neither --dp nor --world-size given), so world_size = {what} = {factors} = {world}"
            ),
        });
        match l.config().expert_layout {
            ExpertLayout::Nested => {
                lines.push(format!(
                    "edp = dp / ep = {} / {} = {} (nested experts: ep is carved out of dp; Megatron-LM's \"dp mod ep\")",
                    s.dp, s.ep, s.edp
                ));
                lines.push(format!("etp = tp = {} (nested experts)", s.etp));
            }
            _ => {
                lines.push(format!(
                    "edp = world_size / (etp*ep*pp) = {world} / ({}*{}*{}) = {} (folded: a second expert grid over the same ranks)",
                    s.etp, s.ep, s.pp, s.edp
                ));
                let origin = if self.given.etp.is_some() {
                    "given"
                } else {
                    "default: tp"
                };
                lines.push(format!("etp = {} ({origin})", s.etp));
            }
        }
        if let Some(e) = l.encoder_sizes() {
            let first = l.rank_offset();
            let enc = l.encoder_world_size();
            let mut line = String::new();
            write!(
                line,
                "encoder: ranks {first}..{} ({enc} = encoder_tp*cp*dp*encoder_pp = {}*{}*{}*{}), ",
                u64::from(first) + u64::from(enc) - 1,
                e.tp,
                e.cp,
                e.dp,
                e.pp
            )?;
            write!(
                line,
                "decoder: ranks {}..{} ({} = tp*cp*dp*pp = {}*{}*{}*{})",
                u64::from(first) + u64::from(enc),
                l.rank_end() - 1,
                world - enc,
                s.tp,
                s.cp,
                s.dp,
                s.pp
            )?;
            lines.push(line);
            lines.push(
                "pipelines are joined: each encoder pipeline feeds the decoder pipelines of the same cp and dp coordinates"
                    .into(),
            );
        }
        if !l.hierarchical_cp().is_empty() {
            let levels: Vec<String> = l.hierarchical_cp().iter().map(u32::to_string).collect();
            lines.push(format!(
                "cp = {} = {} in hierarchical levels, innermost first (hcp-0 .. hcp-{})",
                s.cp,
                levels.join("*"),
                levels.len() - 1
            ));
        }
        if l.dist_opt_instances() > 1 {
            lines.push(format!(
                "dist_opt_instances = {}: each dp-cp group cut into {} contiguous slices (dp-cp-intra), replicas across them in dp-cp-inter",
                l.dist_opt_instances(),
                l.dist_opt_instances()
            ));
        }
        Ok(lines)
    }
}

/// The sum of the decimal digits' counts of every rank in `[first, end)`.
fn digits_in(first: u64, end: u64) -> u64 {
    let mut total = 0;
    let mut low = 0u64;
    let mut high = 10u64;
    let mut digits = 1;
    while low < end {
        let (a, b) = (first.max(low), end.min(high));
        if a < b {
            total += (b - a) * digits;
        }
        low = high;
        high = high.saturating_mul(10);
        digits += 1;
    }
    total
}

impl fmt::Display for DescribeReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.layout;
        let s = l.sizes();
        let shape = match l.shape().name() {
            "nested" => "nested (expert parallelism carved out of dp, Megatron-LM's RankGenerator)",
            "folded" => {
                "folded (a second expert grid over the same ranks, Megatron-Core's MoE parallel folding)"
            }
            _ => {
                "encoder + decoder (an encoder grid with its own tp and pp, then the decoder grid)"
            }
        };
        writeln!(f, "layout    {shape}")?;
        writeln!(
            f,
            "ranks     {} ({}..{}), order {} (first axis fastest)",
            thousands(u64::from(l.world_size())),
            l.rank_offset(),
            l.rank_end() - 1,
            l.config().order
        )?;
        writeln!(
            f,
            "sizes     tp={} cp={} ep={} dp={} pp={}  expert: etp={} edp={}",
            s.tp, s.cp, s.ep, s.dp, s.pp, s.etp, s.edp
        )?;
        for (i, line) in self.why()?.into_iter().enumerate() {
            let label = if i == 0 { "why" } else { "" };
            writeln!(f, "{label:<10}{line}")?;
        }
        writeln!(f, "machine   {}", machine_line(l, &self.topology))?;

        let width = l
            .kinds()
            .iter()
            .map(|k| k.to_string().len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(f, "\n{:<width$}  {:>13}  groups", "kind", "members")?;
        let (mut members, mut groups, mut short_lines) = (0u64, 0u64, 0u64);
        for kind in l.kinds() {
            let Ok(g) = l.groups(*kind) else {
                continue;
            };
            let (n, m) = (g.len() as u64, g.member_count());
            writeln!(
                f,
                "{kind:<width$}  {:>13}  {}",
                thousands(m),
                groups_heading(&g)
            )?;
            members += m;
            groups += n;
            short_lines += n.min(SHORT_ROWS + 1) + 3;
        }

        let kinds = l.kinds().len() as u64;
        let world = u64::from(l.world_size()).max(1);
        let digits = digits_in(u64::from(l.rank_offset()), l.rank_end());
        // Members times their mean width (+1 for the separator), brackets
        // per group, and a little per kind and for the header.
        // (The product may pass u64 at 2^31 ranks: computed in u128.)
        let widths = (u128::from(members) * u128::from(digits)).div_ceil(u128::from(world));
        let member_bytes = u64::try_from(widths).unwrap_or(u64::MAX) + members;
        let json = member_bytes + 2 * groups + 12 * kinds + 400;
        let index_width = groups.to_string().len() as u64;
        let full = member_bytes + groups * (6 + 2 * index_width);
        let full_lines = groups + 3 * kinds + 3;
        writeln!(
            f,
            "\nlisting everything: {} in {} of {}",
            count(members, "member", "members"),
            count(groups, "group", "groups"),
            count(kinds, "kind", "kinds")
        )?;
        writeln!(f, "  groups --format json   about {}", bytes(json))?;
        writeln!(
            f,
            "  groups --full          about {} in {} lines",
            bytes(full),
            thousands(full_lines)
        )?;
        writeln!(
            f,
            "  groups                 at most {} lines (long lists shortened)",
            thousands(short_lines + 4)
        )?;
        writeln!(
            f,
            "  rank R                 one rank's groups, computed arithmetically (instant at any size)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::digits_in;

    #[test]
    fn digit_counts() {
        assert_eq!(digits_in(0, 10), 10);
        assert_eq!(digits_in(0, 11), 12);
        assert_eq!(digits_in(8, 12), 1 + 1 + 2 + 2);
        assert_eq!(digits_in(0, 1000), 10 + 180 + 2700);
    }
}
