//! Shared by the integration tests: an independent reference of the
//! layouts, written the way Megatron-LM writes them (lists of lists, string
//! tokens, scans), and proptest strategies for valid configurations.
//!
//! The reference is a direct transcription of Megatron-LM's
//! `generate_masked_orthogonal_rank_groups` and `RankGenerator.get_ranks`,
//! plus the definitions of semantics 3.2-3.4 applied to those lists by brute
//! force. It shares no code with the crate.

#![allow(dead_code)]

use proptest::prelude::*;
use rank_layout::{Axis, Config, ExpertLayout, Layout};

pub type Groups = Vec<Vec<u32>>;

/// A file of `tests/data/megatron/` (what Megatron-LM's and Megatron-Core's
/// own code built), parsed.
pub fn megatron_data(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/data/megatron/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A list of ranks of the reference data.
pub fn ranks(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("a list of ranks")
        .iter()
        .map(|r| u32::try_from(r.as_u64().expect("a rank")).expect("a u32 rank"))
        .collect()
}

/// Lists of ranks of the reference data.
pub fn rank_lists(v: &serde_json::Value) -> Groups {
    v.as_array()
        .expect("a list of groups")
        .iter()
        .map(ranks)
        .collect()
}

/// Megatron-LM's `generate_masked_orthogonal_rank_groups`, transcribed.
pub fn masked_groups(world: u64, sizes: &[u64], mask: &[bool], offset: u64) -> Groups {
    fn prefix_product(a: &[u64]) -> Vec<u64> {
        let mut r = vec![1];
        for v in a {
            let last = *r.last().unwrap();
            r.push(last * v);
        }
        r
    }
    fn decompose(index: u64, shape: &[u64]) -> Vec<u64> {
        let stride = prefix_product(shape);
        shape
            .iter()
            .zip(&stride)
            .map(|(s, d)| (index / d) % s)
            .collect()
    }
    let pick = |want: bool, v: &[u64]| -> Vec<u64> {
        v.iter()
            .zip(mask)
            .filter(|(_, m)| **m == want)
            .map(|(x, _)| *x)
            .collect()
    };
    let masked_shape = pick(true, sizes);
    let unmasked_shape = pick(false, sizes);
    let global_stride = prefix_product(sizes);
    let masked_stride = pick(true, &global_stride);
    let unmasked_stride = pick(false, &global_stride);
    let group_size: u64 = masked_shape.iter().product();
    let num_groups = world / group_size;
    let mut out = Vec::new();
    for group_index in 0..num_groups {
        let g = decompose(group_index, &unmasked_shape);
        let mut ranks = Vec::new();
        for rank_in_group in 0..group_size {
            let r = decompose(rank_in_group, &masked_shape);
            let rank: u64 = r
                .iter()
                .zip(&masked_stride)
                .map(|(a, b)| a * b)
                .sum::<u64>()
                + g.iter()
                    .zip(&unmasked_stride)
                    .map(|(a, b)| a * b)
                    .sum::<u64>();
            ranks.push((rank + offset) as u32);
        }
        out.push(ranks);
    }
    out
}

/// A grid of named tokens, Megatron-LM style.
#[derive(Clone, Debug)]
pub struct RefGrid {
    pub tokens: Vec<String>,
    pub sizes: Vec<u64>,
    pub offset: u64,
}

impl RefGrid {
    pub fn world(&self) -> u64 {
        self.sizes.iter().product()
    }

    /// `get_ranks(token)`: token is dash-separated.
    pub fn get_ranks(&self, token: &str) -> Groups {
        let mut mask = vec![false; self.tokens.len()];
        for t in token.split('-') {
            let i = self
                .tokens
                .iter()
                .position(|x| x == t)
                .expect("token in order");
            mask[i] = true;
        }
        masked_groups(self.world(), &self.sizes, &mask, self.offset)
    }

    /// Coordinate of `rank` along `token`.
    pub fn coord(&self, rank: u32, token: &str) -> u64 {
        let local = rank as u64 - self.offset;
        let mut stride = 1;
        for (t, s) in self.tokens.iter().zip(&self.sizes) {
            if t == token {
                return (local / stride) % s;
            }
            stride *= s;
        }
        0
    }
}

/// Megatron-LM's order normalisation: append left-out tokens (tp, pp, dp, ep, cp).
pub fn full_order(order: &str) -> Vec<String> {
    let mut tokens: Vec<String> = order.to_lowercase().split('-').map(String::from).collect();
    for name in ["tp", "pp", "dp", "ep", "cp"] {
        if !tokens.iter().any(|t| t == name) {
            tokens.push(name.into());
        }
    }
    tokens
}

/// The nested `RankGenerator` of Megatron-LM 2024: (without ep, with ep).
pub fn nested_grids(
    tp: u64,
    cp: u64,
    ep: u64,
    dp: u64,
    pp: u64,
    order: &str,
    offset: u64,
) -> (RefGrid, RefGrid) {
    let tokens = full_order(order);
    let size = |t: &str| match t {
        "tp" => tp,
        "cp" => cp,
        "ep" => ep,
        "dp" => dp,
        "pp" => pp,
        _ => unreachable!(),
    };
    let wo: Vec<String> = tokens.iter().filter(|t| *t != "ep").cloned().collect();
    let wo_sizes = wo.iter().map(|t| size(t)).collect();
    let w_sizes = tokens
        .iter()
        .map(|t| if t == "dp" { dp / ep } else { size(t) })
        .collect();
    (
        RefGrid {
            tokens: wo,
            sizes: wo_sizes,
            offset,
        },
        RefGrid {
            tokens,
            sizes: w_sizes,
            offset,
        },
    )
}

/// `[first, last]` / `[first]` of each pipeline.
pub fn embd(pp_groups: &Groups, last: bool) -> Groups {
    pp_groups
        .iter()
        .map(|g| {
            if last && g.len() > 1 {
                vec![g[0], *g.last().unwrap()]
            } else {
                vec![g[0]]
            }
        })
        .collect()
}

/// Every kind of the nested layout, by name, in semantics 3.1 order.
pub fn nested_kinds(wo: &RefGrid, w: &RefGrid) -> Vec<(String, Groups)> {
    let mut out = Vec::new();
    for k in [
        "tp", "pp", "dp", "cp", "dp-cp", "tp-pp", "tp-cp", "tp-dp", "tp-dp-cp",
    ] {
        out.push((k.to_string(), wo.get_ranks(k)));
    }
    for (name, token) in [
        ("ep", "ep"),
        ("tp-ep", "tp-ep"),
        ("tp-ep-pp", "tp-ep-pp"),
        ("dp-mod-ep", "dp"),
        ("dp-cp-mod-ep", "dp-cp"),
    ] {
        out.push((name.to_string(), w.get_ranks(token)));
    }
    let pp = wo.get_ranks("pp");
    out.push(("embd".into(), embd(&pp, true)));
    out.push(("pos-embd".into(), embd(&pp, false)));
    out
}

/// The balanced block table of semantics 3.3: block of each index of `0..n` in `parts` blocks.
pub fn block_table(n: u64, parts: u64) -> Vec<u64> {
    let (q, r) = (n / parts, n % parts);
    let mut out = Vec::new();
    for b in 0..parts {
        let len = q + u64::from(b < r);
        out.extend(std::iter::repeat_n(b, len as usize));
    }
    out
}

/// The encoder + decoder layout by brute force (semantics 3.3).
pub fn encdec_kinds(c: &Config) -> Vec<(String, Groups)> {
    let (tp, cp, ep, pp) = (c.tp as u64, c.cp as u64, c.ep as u64, c.pp as u64);
    let etp = c.encoder_tp.unwrap_or(c.tp) as u64;
    let epp = c.encoder_pp.unwrap_or(1) as u64;
    let dp = c.dp.unwrap() as u64;
    let order = c.order.to_string();
    let offset = c.rank_offset as u64;
    let (ewo, ew) = nested_grids(etp, cp, 1, dp, epp, &order, offset);
    let (dwo, dw) = nested_grids(tp, cp, ep, dp, pp, &order, offset + ewo.world());
    let enc = nested_kinds(&ewo, &ew);
    let dec = nested_kinds(&dwo, &dw);
    let enc_pp = ewo.get_ranks("pp");
    let dec_pp = dwo.get_ranks("pp");
    // Joined pp groups.
    let mut joined = Vec::new();
    for d in &dec_pp {
        let r = d[0];
        let (t, cc, dd) = (dwo.coord(r, "tp"), dwo.coord(r, "cp"), dwo.coord(r, "dp"));
        let wanted: Vec<u64> = if tp >= etp {
            vec![block_table(tp, etp)[t as usize]]
        } else {
            let table = block_table(etp, tp);
            (0..etp).filter(|e| table[*e as usize] == t).collect()
        };
        for e in wanted {
            let g = enc_pp
                .iter()
                .find(|g| {
                    ewo.coord(g[0], "tp") == e
                        && ewo.coord(g[0], "cp") == cc
                        && ewo.coord(g[0], "dp") == dd
                })
                .unwrap();
            joined.push(g.iter().chain(d.iter()).copied().collect::<Vec<_>>());
        }
    }
    let distinct = |gs: Groups| {
        let mut out: Groups = Vec::new();
        for g in gs {
            if !out.contains(&g) {
                out.push(g);
            }
        }
        out
    };
    let enc_tppp = ewo.get_ranks("tp-pp");
    let dec_tppp = dwo.get_ranks("tp-pp");
    let mut out = Vec::new();
    for ((name, e), (_, d)) in enc.into_iter().zip(dec) {
        let groups = match name.as_str() {
            "pp" => joined.clone(),
            "tp-pp" => dec_tppp
                .iter()
                .map(|d| {
                    let same = |g: &&Vec<u32>| {
                        ewo.coord(g[0], "cp") == dwo.coord(d[0], "cp")
                            && ewo.coord(g[0], "dp") == dwo.coord(d[0], "dp")
                    };
                    let e = enc_tppp.iter().find(same).unwrap();
                    e.iter().chain(d).copied().collect()
                })
                .collect(),
            "embd" => distinct(embd(&joined, true)),
            "pos-embd" => distinct(embd(&joined, false)),
            _ => e.into_iter().chain(d).collect(),
        };
        out.push((name, groups));
    }
    out
}

/// The folded layout (semantics 3.2) plus semantics 3.4 families, by definition.
pub fn folded_kinds(c: &Config) -> Vec<(String, Groups)> {
    let (tp, cp, ep, pp) = (c.tp as u64, c.cp as u64, c.ep as u64, c.pp as u64);
    let dp = c.dp.unwrap() as u64;
    let etp = c.etp.unwrap_or(c.tp) as u64;
    let order = c.order.to_string();
    let offset = c.rank_offset as u64;
    let (wo, _) = nested_grids(tp, cp, 1, dp, pp, &order, offset);
    let world = wo.world();
    let edp = world / (etp * ep * pp);
    // Megatron-Core's expert RankGenerator(tp=etp, ep, dp=edp, pp, cp=1): ep a plain axis.
    let tokens = full_order(&order);
    let sizes = tokens
        .iter()
        .map(|t| match t.as_str() {
            "tp" => etp,
            "cp" => 1,
            "ep" => ep,
            "dp" => edp,
            "pp" => pp,
            _ => unreachable!(),
        })
        .collect();
    let expert = RefGrid {
        tokens,
        sizes,
        offset,
    };
    let mut out = Vec::new();
    for k in [
        "tp", "pp", "dp", "cp", "dp-cp", "tp-pp", "tp-cp", "tp-dp", "tp-dp-cp",
    ] {
        out.push((k.to_string(), wo.get_ranks(k)));
    }
    let pp_groups = wo.get_ranks("pp");
    out.push(("embd".into(), embd(&pp_groups, true)));
    out.push(("pos-embd".into(), embd(&pp_groups, false)));
    for (name, token) in [
        ("ep", "ep"),
        ("etp", "tp"),
        ("etp-ep", "tp-ep"),
        ("etp-ep-pp", "tp-ep-pp"),
        ("edp", "dp"),
    ] {
        out.push((name.to_string(), expert.get_ranks(token)));
    }
    out.extend(hcp_kinds(&wo.get_ranks("cp"), &c.hierarchical_cp));
    let n = c.dist_opt_instances as usize;
    if n > 1 {
        let m = edp as usize / n;
        let dp_cp = wo.get_ranks("dp-cp");
        let edp_groups = expert.get_ranks("dp");
        let slices = |gs: &Groups, len: usize| -> Groups {
            gs.iter()
                .flat_map(|g| g.chunks(len).map(|c| c.to_vec()))
                .collect()
        };
        out.push(("dp-cp-intra".into(), slices(&dp_cp, dp_cp[0].len() / n)));
        out.push(("edp-intra".into(), slices(&edp_groups, m)));
        let inter = edp_groups
            .iter()
            .flat_map(|g| (0..m).map(move |a| (0..n).map(|k| g[a + k * m]).collect()))
            .collect();
        out.push(("dp-cp-inter".into(), inter));
        let eep = expert.get_ranks("tp-ep-pp");
        let instances = eep.chunks(m).map(|c| c.concat()).collect();
        out.push(("dist-opt-instance".into(), instances));
    }
    out
}

/// `hcp-l` groups from the cp groups, by the definition of semantics 3.4.
pub fn hcp_kinds(cp_groups: &Groups, levels: &[u32]) -> Vec<(String, Groups)> {
    let mut out = Vec::new();
    for l in 0..levels.len() {
        let unit: usize = levels[..l].iter().map(|s| *s as usize).product();
        let span = levels[l] as usize;
        let mut groups = Vec::new();
        for g in cp_groups {
            let outer = g.len() / (unit * span);
            for c in 0..outer {
                for a in 0..unit {
                    groups.push(
                        (0..span)
                            .map(|b| g[a + b * unit + c * unit * span])
                            .collect(),
                    );
                }
            }
        }
        out.push((format!("hcp-{l}"), groups));
    }
    out
}

/// The reference layout of any valid configuration (dp resolved).
pub fn reference(c: &Config) -> Vec<(String, Groups)> {
    if c.has_encoder() {
        return encdec_kinds(c);
    }
    if c.expert_layout == ExpertLayout::Folded {
        return folded_kinds(c);
    }
    let (wo, w) = nested_grids(
        c.tp as u64,
        c.cp as u64,
        c.ep as u64,
        c.dp.unwrap() as u64,
        c.pp as u64,
        &c.order.to_string(),
        c.rank_offset as u64,
    );
    let mut out = nested_kinds(&wo, &w);
    out.extend(hcp_kinds(&wo.get_ranks("cp"), &c.hierarchical_cp));
    out
}

/// An order string: the five tokens shuffled, size-1 axes sometimes left
/// out, random case.
pub fn order_string(perm: &[usize], sizes: [u32; 5], drop_mask: u8, upper: bool) -> String {
    const TOKENS: [&str; 5] = ["tp", "cp", "ep", "dp", "pp"];
    let tokens: Vec<&str> = perm
        .iter()
        .filter(|i| !(sizes[**i] == 1 && drop_mask & (1 << **i) != 0))
        .map(|i| TOKENS[*i])
        .collect();
    let s = if tokens.is_empty() {
        "pp".to_string()
    } else {
        tokens.join("-")
    };
    if upper { s.to_uppercase() } else { s }
}

/// Small sizes, with 1 common.
pub fn size() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(1u32), 3 => 2..=4u32, 1 => 5..=6u32]
}

/// Valid nested configurations (ep adjacent to dp), up to a few thousand ranks.
pub fn nested_config() -> impl Strategy<Value = Config> {
    (
        size(),
        size(),
        size(),
        1..=3u32,
        size(),
        Just((0..5).collect::<Vec<usize>>()).prop_shuffle(),
        any::<u8>(),
        any::<bool>(),
        0..3u32,
    )
        .prop_map(|(tp, cp, ep, dp_mult, pp, perm, drop, upper, off)| {
            let dp = ep * dp_mult;
            let sizes = [tp, cp, ep, dp, pp];
            // Keep ep next to dp: move ep right before or after dp.
            let mut perm: Vec<usize> = perm.into_iter().filter(|i| *i != 2).collect();
            let dpi = perm.iter().position(|i| *i == 3).unwrap();
            perm.insert(if drop & 0x80 != 0 { dpi } else { dpi + 1 }, 2);
            let order_str = order_string(&perm, sizes, drop & 0x1f & !(1 << 3), upper);
            Config::new()
                .tp(tp)
                .cp(cp)
                .ep(ep)
                .dp(Some(dp))
                .pp(pp)
                .order(order_str.parse().unwrap())
                .rank_offset(off * 7)
                .expert_layout(ExpertLayout::Nested)
        })
        .prop_filter("ep written must be adjacent to dp", |c| {
            rank_layout::Layout::new(c).is_ok()
        })
}

/// Folded configurations: sizes chosen so etp*ep divides the world; orders
/// shuffled; an invalid pick (pp not last, dist-opt order) is repaired
/// rather than rejected, so both kinds of orders are exercised.
pub fn folded_config() -> impl Strategy<Value = Config> {
    (
        size(),
        size(),
        1..=3u32,
        size(),
        prop_oneof![Just(1u32), Just(2), Just(4)],
        prop_oneof![Just(1u32), Just(2), Just(3)],
        Just((0..5).collect::<Vec<usize>>()).prop_shuffle(),
        any::<u8>(),
        0..3u32,
        prop_oneof![Just(1u32), Just(2), Just(4)],
        any::<bool>(),
    )
        .prop_map(|(tp, cp, k, pp, ep, etp, perm, drop, off, n, hcp)| {
            let unit = etp * ep;
            let g = gcd(tp * cp, unit);
            let dp = k * unit / g;
            let sizes = [tp, cp, ep, dp, pp];
            let order = order_string(&perm, sizes, drop, false);
            let mut c = Config::new()
                .tp(tp)
                .cp(cp)
                .ep(ep)
                .dp(Some(dp))
                .pp(pp)
                .etp(Some(etp))
                .order(order.parse().unwrap())
                .rank_offset(off * 5)
                .expert_layout(ExpertLayout::Folded)
                .dist_opt_instances(n)
                .hierarchical_cp(if hcp { factor(cp) } else { Vec::new() });
            if Layout::new(&c).is_err() {
                c.dist_opt_instances = 1;
            }
            if Layout::new(&c).is_err() {
                let mut perm: Vec<usize> = perm.into_iter().filter(|i| *i != 4).collect();
                perm.push(4);
                c.order = order_string(&perm, sizes, drop, false).parse().unwrap();
            }
            c
        })
        .prop_filter("valid folded layout", |c| Layout::new(c).is_ok())
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A factorisation of `n` into levels (smallest prime factor first).
fn factor(mut n: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut p = 2;
    while n > 1 {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if out.is_empty() {
        out.push(1);
    }
    out
}

/// Encoder + decoder configurations: uneven tp both ways, any order with ep
/// next to dp, offsets.
pub fn encdec_config() -> impl Strategy<Value = Config> {
    (nested_config(), 1..=6u32, 1..=3u32, 0..2u32)
        .prop_map(|(mut c, etp, epp, off)| {
            c.encoder_tp = Some(etp);
            c.encoder_pp = Some(epp);
            c.rank_offset = off * 3;
            // The encoder's tp must be in the order when > 1.
            if etp > 1 && !c.order.is_written(Axis::Tp) {
                let s = format!("tp-{}", c.order);
                c.order = s.parse().unwrap();
            }
            c
        })
        .prop_filter("valid encoder+decoder layout", |c| Layout::new(c).is_ok())
}

pub fn any_config() -> impl Strategy<Value = Config> {
    prop_oneof![nested_config(), folded_config(), encdec_config()]
}
