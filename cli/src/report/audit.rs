//! The report of `rank-layout audit --megatron 2024|2025`: the joined
//! encoder + decoder pipelines Megatron-LM builds at that commit for the
//! layout, how many mix cp slices or dp replicas and how many pair other
//! tp ranks than rank-layout's join by coordinates, the first few of each,
//! and a verdict; a table or one JSON object.

use std::fmt;

use rank_layout::megatron::{Audit, AuditExample, MegatronJoin, audit};
use rank_layout::{Error, Layout, Placement};
use serde::Serialize;

use crate::error::Failure;
use crate::format::{experts, join_ranks, thousands};

/// Pipelines longer than this are shortened in the table (head, count, tail).
const SHOWN_STAGES: usize = 8;

/// The audit as the command prints it.
pub struct AuditReport {
    audit: Audit,
    /// The table's second line: the layout, its ranks and experts.
    layout_line: String,
}

impl AuditReport {
    /// The joins of `join`'s commit for `layout`, audited.
    ///
    /// # Errors
    /// [`Failure::Input`] for a layout without an encoder or one
    /// Megatron-LM does not build at that commit.
    pub fn new(layout: &Layout, join: MegatronJoin) -> Result<AuditReport, Failure> {
        let audit = audit(layout, join).map_err(|error| {
            let hint = match &error {
                Error::NeedsEncoder => {
                    "; audit checks how Megatron-LM joins encoder and decoder pipelines".to_owned()
                }
                _ => String::new(),
            };
            Failure::Input { error, hint }
        })?;
        let layout_line = format!(
            "layout: encoder+decoder, {} ranks (encoder ranks {}..{}), {}",
            thousands(u64::from(layout.world_size())),
            layout.rank_offset(),
            u64::from(layout.rank_offset()) + u64::from(layout.encoder_world_size()) - 1,
            experts(layout.config().expert_layout)
        );
        Ok(AuditReport { audit, layout_line })
    }
}

/// A boundary rank of a joined pipeline and its coordinates.
#[derive(Serialize)]
struct RankOut {
    rank: u32,
    tp: u32,
    cp: u32,
    dp: u32,
    pp: u32,
}

impl From<&Placement> for RankOut {
    fn from(p: &Placement) -> RankOut {
        RankOut {
            rank: p.rank,
            tp: p.coord.tp,
            cp: p.coord.cp,
            dp: p.coord.dp,
            pp: p.coord.pp,
        }
    }
}

/// One example in JSON.
#[derive(Serialize)]
struct ExampleOut<'a> {
    class: &'static str,
    megatron: &'a [u32],
    rank_layout: &'a [u32],
    /// The last encoder stage of Megatron-LM's pipeline.
    encoder: RankOut,
    /// The first decoder stage of Megatron-LM's pipeline.
    decoder: RankOut,
}

/// The report in JSON.
#[derive(Serialize)]
struct AuditOut<'a> {
    megatron: &'static str,
    pipelines: usize,
    mixing: usize,
    other_tp_pairing: usize,
    examples: Vec<ExampleOut<'a>>,
}

impl Serialize for AuditReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = &self.audit;
        AuditOut {
            megatron: a.join.commit(),
            pipelines: a.pipelines,
            mixing: a.mixing,
            other_tp_pairing: a.other_tp_pairing,
            examples: a
                .examples
                .iter()
                .map(|e| ExampleOut {
                    class: e.class.name(),
                    megatron: &e.megatron,
                    rank_layout: &e.rank_layout,
                    encoder: (&e.encoder).into(),
                    decoder: (&e.decoder).into(),
                })
                .collect(),
        }
        .serialize(s)
    }
}

/// `[0, 4, 8]`, or `[0, 4, 8, ... (24 ranks) ..., 92]` when long.
fn ranks(list: &[u32]) -> String {
    let join = |r: &[u32]| join_ranks(r, ", ");
    match (list.get(..SHOWN_STAGES - 2), list.last()) {
        (Some(head), Some(last)) if list.len() > SHOWN_STAGES => {
            format!("[{}, ... ({} ranks) ..., {last}]", join(head), list.len())
        }
        _ => format!("[{}]", join(list)),
    }
}

/// `rank 2 (tp 0, cp 1, dp 0)`.
fn at(p: &Placement) -> String {
    format!(
        "rank {} (tp {}, cp {}, dp {})",
        p.rank, p.coord.tp, p.coord.cp, p.coord.dp
    )
}

fn example(f: &mut fmt::Formatter<'_>, e: &AuditExample) -> fmt::Result {
    writeln!(
        f,
        "  Megatron-LM {}  rank-layout {}",
        ranks(&e.megatron),
        ranks(&e.rank_layout)
    )?;
    writeln!(
        f,
        "    encoder {} -> decoder {}",
        at(&e.encoder),
        at(&e.decoder)
    )
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.audit;
        writeln!(
            f,
            "Megatron-LM {}, commit {}",
            a.join.year(),
            a.join.commit()
        )?;
        writeln!(f, "{}", self.layout_line)?;
        writeln!(f, "join: {}", a.join.how())?;
        writeln!(f)?;
        let n = |v: usize| thousands(v as u64);
        writeln!(f, "joined pipelines:                 {}", n(a.pipelines))?;
        writeln!(f, "mixing cp slices or dp replicas:  {}", n(a.mixing))?;
        writeln!(
            f,
            "pairing other tp ranks:           {}",
            n(a.other_tp_pairing)
        )?;
        for (class, count, what) in [
            (
                rank_layout::megatron::JoinClass::Mixing,
                a.mixing,
                "mixing cp slices or dp replicas (encoder and decoder ranks of different cp or dp)",
            ),
            (
                rank_layout::megatron::JoinClass::OtherTpPairing,
                a.other_tp_pairing,
                "pairing other tp ranks (same cp and dp, encoder tp not rank-layout's block(tp))",
            ),
        ] {
            let shown: Vec<&AuditExample> =
                a.examples.iter().filter(|e| e.class == class).collect();
            if shown.is_empty() {
                continue;
            }
            writeln!(f)?;
            writeln!(f, "{what}, first {} of {}:", shown.len(), n(count))?;
            for e in shown {
                example(f, e)?;
            }
        }
        writeln!(f)?;
        if a.agrees() {
            writeln!(
                f,
                "verdict: all {} joined pipelines are rank-layout's join by coordinates",
                n(a.pipelines)
            )
        } else {
            writeln!(
                f,
                "verdict: {} of {} joined pipelines differ from rank-layout's join by coordinates ({} mix cp slices or dp replicas, {} pair other tp ranks)",
                n(a.mixing + a.other_tp_pairing),
                n(a.pipelines),
                n(a.mixing),
                n(a.other_tp_pairing)
            )
        }
    }
}
