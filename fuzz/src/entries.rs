//! The fuzz entry points of rank-layout, one per cargo-fuzz target.
//!
//! Each `pub fn` takes arbitrary bytes, drives the public API with them and
//! panics on a wrong answer, not only on a crash: the library must never
//! panic, and what it answers must agree with itself (per-rank answers with
//! the enumeration, `fill` with iterating, splits with memberships, ...).
//!
//! The same file is the library of the fuzz crate (`fuzz/`, used by the
//! targets in `fuzz/fuzz_targets/`) and a module of the replay test
//! `tests/fuzz_corpus.rs`, which runs the committed seed corpus through
//! these functions without a fuzzer. The bytes are decoded by hand, so the
//! test needs no dependency beyond the main crate's (`serde_json`).
//!
//! Every input's work is bounded: nothing iterates a group, a kind or a
//! world larger than the limits below, whatever the sizes decoded.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use rank_layout::{
    Axis, AxisSet, Config, Coord, Error, ExpertLayout, Group, Groups, Kind, Layout, Membership,
    Order, Part, Placement, Split, Topology,
};

/// Worlds up to this size get one kind (chosen by the input) checked as a
/// whole: `fill` against iterating, coverage of the world, the split rounds
/// rebuilding the groups.
const SMALL_WORLD: u32 = 4096;
/// Worlds up to this size get every kind checked as a whole.
const WHOLE_WORLD: u32 = 64;
/// Worlds up to this size also get `table`, reversed iteration and
/// `spread` against counting.
const SMALLER_WORLD: u32 = 1024;
/// Worlds up to this size are checked rank by rank against the enumeration.
const TINY_WORLD: u32 = 16;
/// Kinds with at most this many ranks times rounds are rebuilt from every
/// rank's `split_in_round`, as `MPI_Comm_split` would.
const SWEEP: u64 = 512;
/// Kinds with more split rounds than this get sampled rounds only (a rank of
/// such a kind can be in that many groups).
const MAX_ROUNDS: u32 = 64;
/// Groups longer than this are sampled, not iterated.
const MAX_LEN: usize = 1024;
/// Groups longer than this are compared by samples, not member by member.
const EQ_LEN: usize = 64;
/// At most this many steps of a rank's `splits` are compared one by one.
const MAX_STEPS: usize = 512;

/// `Order` parser: `FromStr` on the bytes as text (lossy UTF-8).
///
/// An accepted order shows as the lowercased input, parses back to itself,
/// has distinct written axes and lists all five order axes; serde agrees
/// with `FromStr`; a rejected one is an order error. An accepted order is
/// then used in small layouts of every expert layout.
pub fn order(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = text.parse::<Order>();
    let via_serde = serde_json::from_value::<Order>(serde_json::Value::String(text.to_string()));
    assert_eq!(parsed.as_ref().ok(), via_serde.as_ref().ok(), "{text:?}");
    let order = match parsed {
        Ok(order) => order,
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::UnknownAxis { .. }
                        | Error::RepeatedAxis { .. }
                        | Error::EmptyAxis { .. }
                ),
                "{text:?}: {e:?}"
            );
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let shown = order.to_string();
    assert_eq!(shown, text.to_ascii_lowercase());
    assert_eq!(shown.parse::<Order>().ok().as_ref(), Some(&order));
    let written = order.written();
    assert!(!written.is_empty() && written.len() <= 5, "{shown}");
    let all = order.axes();
    assert_eq!(&all[..written.len()], written, "{shown}");
    for axis in Axis::ORDER_TOKENS {
        assert_eq!(all.iter().filter(|a| **a == axis).count(), 1, "{shown}");
        assert_eq!(order.is_written(axis), written.contains(&axis), "{shown}");
    }
    // Every written axis of size 2 (ep within dp), nested and folded, with
    // and without ep; an axis left out of size 2 is a typed error.
    let size = |axis: Axis| if order.is_written(axis) { 2 } else { 1 };
    for (expert_layout, ep) in [
        (ExpertLayout::Nested, size(Axis::Ep)),
        (ExpertLayout::Nested, 1),
        (ExpertLayout::Folded, size(Axis::Ep)),
    ] {
        let config = Config::new()
            .tp(size(Axis::Tp))
            .cp(size(Axis::Cp))
            .ep(ep)
            .dp(Some(size(Axis::Dp).max(ep)))
            .pp(size(Axis::Pp))
            .order(order.clone())
            .expert_layout(expert_layout);
        if let Some(layout) = build(&config) {
            check_layout(&layout, &mut Input::new(data));
        }
    }
    let missing = Axis::ORDER_TOKENS
        .into_iter()
        .find(|a| !order.is_written(*a));
    if let Some(axis) = missing {
        let mut config = Config::new()
            .order(order.clone())
            .expert_layout(ExpertLayout::Nested);
        match axis {
            Axis::Tp => config.tp = 2,
            Axis::Cp => config.cp = 2,
            Axis::Ep => config.ep = 2,
            Axis::Dp => config.dp = Some(2),
            _ => config.pp = 2,
        }
        assert!(Layout::new(&config).is_err(), "{config:?}");
    }
}

/// `Kind` parser: `FromStr` on the bytes as text (lossy UTF-8), and the
/// `ExpertLayout` parser.
///
/// An accepted kind's name parses back to it, `Debug` is `Display`, serde
/// agrees; then the kind is asked of fixed layouts (dense, folded with
/// hierarchical cp and distributed-optimizer instances, encoder fan-out and
/// fan-in, ranks at the top of `u32`): whatever kind it is, its groups and
/// per-rank answers must agree, or it is a typed error.
pub fn kind(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(e) = text.parse::<ExpertLayout>() {
        assert_eq!(e.to_string(), text.to_ascii_lowercase());
    }
    let parsed = text.parse::<Kind>();
    let via_serde = serde_json::from_value::<Kind>(serde_json::Value::String(text.to_string()));
    assert_eq!(parsed.as_ref().ok(), via_serde.as_ref().ok(), "{text:?}");
    let kind = match parsed {
        Ok(kind) => kind,
        Err(e) => {
            assert!(
                matches!(&e, Error::UnknownKind { name } if *name == text),
                "{text:?}: {e:?}"
            );
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let shown = kind.to_string();
    assert_eq!(format!("{kind:?}"), shown);
    assert_eq!(
        shown.parse::<Kind>().ok(),
        Some(kind),
        "{text:?} -> {shown}"
    );
    assert_eq!(format!("{kind:>40}").len(), shown.len().max(40));
    let mut input = Input::new(data);
    for layout in fixed_layouts() {
        let known = layout.kinds().contains(&kind);
        if let Some(info) = check_kind(layout, kind, known, &mut input) {
            if layout.world_size() <= SMALL_WORLD {
                check_kind_whole(layout, kind, &info, &mut input);
            }
            for _ in 0..4 {
                let rank = input.rank(layout);
                check_rank_kind(layout, rank, kind, &info);
            }
        }
    }
}

/// The JSON configuration: `Config` from the bytes as JSON text.
///
/// An accepted configuration serializes and reads back equal; it builds a
/// layout exactly when deserializing a `Layout` from the same text does
/// (with the same error); a built layout round-trips through JSON and is
/// checked like the `layout` target's.
pub fn json_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match serde_json::from_str::<Config>(text) {
        Ok(config) => config,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            let as_layout = serde_json::from_str::<Layout>(text);
            assert!(as_layout.is_err(), "{text:?}");
            return;
        }
    };
    let as_layout = serde_json::from_str::<Layout>(text);
    let back = serde_json::to_string(&config).unwrap_or_else(|e| panic!("{config:?}: {e}"));
    let again = serde_json::from_str::<Config>(&back).unwrap_or_else(|e| panic!("{back}: {e}"));
    assert_eq!(again, config, "{back}");
    match Layout::new(&config) {
        Ok(layout) => {
            let via = as_layout.unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(via, layout);
            let shown = serde_json::to_string(&layout).unwrap_or_else(|e| panic!("{e}"));
            let read = serde_json::from_str::<Layout>(&shown).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(read, layout, "{shown}");
            let kinds = serde_json::to_string(layout.kinds()).unwrap_or_else(|e| panic!("{e}"));
            let read = serde_json::from_str::<Vec<Kind>>(&kinds).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(read, layout.kinds(), "{kinds}");
            check_layout(&layout, &mut Input::new(data));
        }
        Err(e) => {
            let message = e.to_string();
            let de = as_layout.err().map(|d| d.to_string()).unwrap_or_default();
            assert!(de.contains(&message), "{text:?}: {de:?} vs {message:?}");
        }
    }
}

/// Layout construction and per-rank queries: a `Config` decoded from the
/// bytes (sizes that may be 0, huge or overflowing, any order, nested or
/// folded experts, an encoder, hierarchical cp, distributed-optimizer
/// instances, a rank offset), then, when it builds, every kind and a few
/// more asked of sampled ranks in and out of range, with the invariants
/// of [`check_layout`].
pub fn layout(data: &[u8]) {
    let mut input = Input::new(data);
    let config = input.config();
    if let Some(layout) = build(&config) {
        check_layout(&layout, &mut input);
    }
}

/// The configuration the `layout` target decodes from `data` (for the
/// regression tests, which show what an input means).
pub fn layout_config(data: &[u8]) -> Config {
    Input::new(data).config()
}

/// `Layout::new`, with the error checked to be printable.
fn build(config: &Config) -> Option<Layout> {
    match Layout::new(config) {
        Ok(layout) => Some(layout),
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{config:?}");
            None
        }
    }
}

/// Layouts of every shape, for the kind target.
fn fixed_layouts() -> &'static [Layout] {
    static LAYOUTS: OnceLock<Vec<Layout>> = OnceLock::new();
    LAYOUTS.get_or_init(|| {
        let configs = [
            // Dense nested: every axis > 1.
            Config::new()
                .tp(2)
                .cp(2)
                .ep(2)
                .dp(Some(4))
                .pp(2)
                .expert_layout(ExpertLayout::Nested),
            // Folded, hierarchical cp, two distributed-optimizer instances.
            Config::new()
                .tp(2)
                .cp(4)
                .dp(Some(2))
                .ep(2)
                .expert_layout(ExpertLayout::Folded)
                .etp(Some(1))
                .hierarchical_cp(vec![2, 2])
                .dist_opt_instances(2),
            // Encoder fan-out (tp 4 after encoder tp 2), two stages each.
            Config::new()
                .tp(4)
                .cp(2)
                .pp(2)
                .encoder_tp(Some(2))
                .encoder_pp(Some(2))
                .expert_layout(ExpertLayout::Nested),
            // Encoder fan-in (encoder tp 4 before tp 2), order dp first.
            Config::new()
                .tp(2)
                .dp(Some(2))
                .encoder_tp(Some(4))
                .order("ep-dp-tp-cp-pp".parse().unwrap_or_default())
                .expert_layout(ExpertLayout::Nested),
            // The last ranks of u32.
            Config::new()
                .tp(2)
                .pp(2)
                .dp(Some(4))
                .rank_offset(u32::MAX - 15)
                .order("pp-dp-tp".parse().unwrap_or_default())
                .expert_layout(ExpertLayout::Nested),
        ];
        configs
            .iter()
            .map(|c| Layout::new(c).unwrap_or_else(|e| panic!("{c:?}: {e}")))
            .collect()
    })
}

/// The fuzzer's bytes, read front to back; past the end every read is 0
/// (so a short input decodes to the defaults: sizes 1, nothing optional).
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// Below `n` (`n > 0`).
    fn below(&mut self, n: u32) -> u32 {
        let b = self.byte();
        let v = if b < 0xF0 { u32::from(b) } else { self.u32() };
        v % n
    }

    /// A size: mostly 1 to 8, sometimes up to 32, 0, huge, or any `u32`.
    fn size(&mut self) -> u32 {
        const SMALL: [u32; 8] = [1, 2, 1, 2, 3, 4, 6, 8];
        match self.byte() {
            b @ 0..=191 => SMALL[usize::from(b % 8)],
            b @ 192..=223 => u32::from(b - 191),
            224 => 0,
            225 => u32::MAX,
            226 => 1 << 16,
            227 => 1 << 31,
            228 => (1 << 16) + 1,
            229 => u32::MAX / 3,
            230 => 1 << 20,
            231 => 1 << 30,
            b @ 232..=239 => 1 << (b - 224),
            _ => self.u32(),
        }
    }

    /// `None` three times in four.
    fn rare(&mut self) -> Option<u32> {
        (self.byte() % 4 == 3).then(|| self.size())
    }

    /// `None` or `Some` alike.
    fn maybe(&mut self) -> Option<u32> {
        (self.byte() % 2 == 1).then(|| self.size())
    }

    /// An order: the default, or one to five distinct axes in any order
    /// (always a valid string; invalid ones are the order target's).
    fn order(&mut self) -> Order {
        let n = self.byte() % 6;
        if n == 0 {
            return Order::default();
        }
        let mut left = Axis::ORDER_TOKENS.to_vec();
        let mut names = Vec::new();
        for _ in 0..n {
            let i = usize::from(self.byte()) % left.len();
            names.push(left.remove(i).name());
        }
        let text = names.join("-");
        text.parse()
            .unwrap_or_else(|e| panic!("order {text:?} rejected: {e}"))
    }

    fn offset(&mut self) -> u32 {
        match self.byte() {
            0..=191 => 0,
            b @ 192..=223 => u32::from(b - 192),
            b @ 224..=239 => u32::MAX - u32::from(b - 224),
            _ => self.u32(),
        }
    }

    fn config(&mut self) -> Config {
        let tp = self.size();
        let cp = self.size();
        let ep = self.size();
        let pp = self.size();
        let dp = self.maybe();
        let world_size = self.rare();
        let order = self.order();
        let flags = self.byte();
        let expert_layout = if flags & 1 == 1 {
            ExpertLayout::Folded
        } else {
            ExpertLayout::Nested
        };
        let (encoder_tp, encoder_pp) = if flags & 2 == 2 {
            (self.maybe(), self.maybe())
        } else {
            (None, None)
        };
        let etp = if flags & 4 == 4 {
            Some(self.size())
        } else {
            None
        };
        let hierarchical_cp: Vec<u32> = if flags & 8 == 8 {
            let levels = self.byte() % 5;
            (0..levels).map(|_| self.size()).collect()
        } else {
            Vec::new()
        };
        let dist_opt_instances = if flags & 16 == 16 { self.size() } else { 1 };
        let rank_offset = self.offset();
        Config::new()
            .tp(tp)
            .cp(cp)
            .ep(ep)
            .dp(dp)
            .pp(pp)
            .world_size(world_size)
            .order(order)
            .rank_offset(rank_offset)
            .encoder_tp(encoder_tp)
            .encoder_pp(encoder_pp)
            .expert_layout(expert_layout)
            .etp(etp)
            .hierarchical_cp(hierarchical_cp)
            .dist_opt_instances(dist_opt_instances)
    }

    /// Any kind, in the layout or not: any non-empty set of the seven axes
    /// (`tp` for the empty one), a `mod-ep` set, `hcp-n` for any `n`, or a
    /// special family.
    fn kind(&mut self) -> Kind {
        let b = self.byte();
        let set = |bits: u8| {
            let axes: Vec<Axis> = Axis::NAME_ORDER
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, a)| a)
                .collect();
            AxisSet::of(&axes)
        };
        match b % 8 {
            0..=2 => Kind::of_axes(set(self.byte())).unwrap_or(Kind::TP),
            3 => Kind::mod_ep(set(self.byte())).unwrap_or(Kind::DP_MOD_EP),
            4 => Kind::hcp(self.byte() % 8),
            5 => Kind::hcp(self.byte()),
            _ => [
                Kind::EMBD,
                Kind::POS_EMBD,
                Kind::DP_CP_INTRA,
                Kind::EDP_INTRA,
                Kind::DP_CP_INTER,
                Kind::DIST_OPT_INSTANCE,
            ][usize::from(self.byte() % 6)],
        }
    }

    /// A rank: mostly in the layout, sometimes just outside or anywhere.
    fn rank(&mut self, layout: &Layout) -> u32 {
        let first = layout.rank_offset();
        let world = layout.world_size();
        let last = first.wrapping_add(world - 1);
        match self.byte() % 16 {
            0..=9 => first.wrapping_add(self.below(world)),
            10 => first,
            11 => last,
            12 => first.wrapping_sub(1),
            13 => last.wrapping_add(1),
            14 => u32::MAX,
            _ => self.u32(),
        }
    }

    fn topology(&mut self) -> Option<Topology> {
        let g = match self.byte() % 4 {
            0 => 8,
            1 => 4,
            _ => self.size(),
        };
        let m = self.rare();
        Topology::new(g, m).ok()
    }
}

/// What `check_kind` found out about a kind of a layout.
struct KindInfo {
    rounds: u32,
    count: u32,
}

fn in_range(layout: &Layout, rank: u32) -> bool {
    rank >= layout.rank_offset() && u64::from(rank) < layout.rank_end()
}

/// The error of a rank outside the layout.
fn assert_out_of_range<T: std::fmt::Debug>(layout: &Layout, rank: u32, got: Result<T, Error>) {
    match got {
        Err(Error::RankOutOfRange {
            rank: r,
            first,
            last,
        }) => {
            assert_eq!(r, u64::from(rank));
            assert_eq!(first, layout.rank_offset());
            assert_eq!(last, layout.rank_end() - 1);
        }
        other => panic!("rank {rank} outside {layout:?}: {other:?}"),
    }
}

fn ok<T>(got: Result<T, Error>, what: impl FnOnce() -> String) -> T {
    got.unwrap_or_else(|e| panic!("{}: {e}", what()))
}

/// Group `index` of `kind`.
fn group(layout: &Layout, kind: Kind, index: u32) -> Group {
    let groups = ok(layout.groups(kind), || format!("{kind}"));
    let n = usize::try_from(index).unwrap_or(usize::MAX);
    groups
        .into_iter()
        .nth(n)
        .unwrap_or_else(|| panic!("{kind}: no group {index} in {layout:?}"))
}

/// Whether the members of `kind`'s groups are in ascending rank order:
/// every kind's but a distributed-optimizer instance's, which lists its
/// `etp-ep-pp` groups one after the other (semantics 3.4).
fn ascending(kind: Kind) -> bool {
    kind != Kind::DIST_OPT_INSTANCE
}

/// One group on its own: not empty, no longer than the world, distinct
/// ranks of the layout (ascending but for [`ascending`]); `get`, `first`,
/// `last`, the iterator and `to_vec` agreeing (iterated only when short).
fn check_group(layout: &Layout, kind: Kind, g: &Group) {
    let len = g.len();
    assert!(len >= 1, "{kind}: empty group");
    assert!(
        len as u64 <= u64::from(layout.world_size()),
        "{kind}: {len}"
    );
    assert_eq!(g.get(len), None);
    assert_eq!(g.first(), g.get(0));
    assert_eq!(g.last(), g.get(len - 1));
    let at = |i: usize| {
        g.get(i)
            .unwrap_or_else(|| panic!("{kind}: member {i} of {len}"))
    };
    for i in [0, len / 2, len - 1] {
        assert!(in_range(layout, at(i)), "{kind}: {} in {layout:?}", at(i));
    }
    if len <= MAX_LEN {
        let members: Vec<u32> = g.iter().collect();
        assert_eq!(members.len(), len);
        assert_eq!(g.iter().len(), len);
        assert_eq!(g.to_vec(), members);
        for (i, r) in members.iter().enumerate() {
            assert_eq!(g.get(i), Some(*r), "{kind} member {i}");
        }
        if ascending(kind) {
            assert!(
                members.windows(2).all(|w| w[0] < w[1]),
                "{kind}: not strictly ascending {members:?}"
            );
        } else {
            let mut sorted = members.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), len, "{kind}: repeated members {members:?}");
        }
    } else if ascending(kind) {
        assert!(at(0) < at(len / 2), "{kind}");
        assert!(at(len / 2) < at(len - 1), "{kind}");
    }
}

/// A kind: in the layout it must resolve (and outside it may not); its
/// group count, rounds and member count agree; sampled groups are sound and
/// their sampled members find themselves in their memberships.
fn check_kind(layout: &Layout, kind: Kind, known: bool, input: &mut Input) -> Option<KindInfo> {
    let first = layout.rank_offset();
    let groups = match layout.groups(kind) {
        Ok(groups) => groups,
        Err(e) => {
            assert!(!known, "{kind} of {layout:?}: {e}");
            assert!(!e.to_string().is_empty());
            assert!(layout.split_rounds(kind).is_err(), "{kind}");
            assert!(layout.memberships(first, kind).is_err(), "{kind}");
            assert!(layout.splits_of(first, &[kind]).is_err(), "{kind}");
            return None;
        }
    };
    let rounds = ok(layout.split_rounds(kind), || format!("{kind}"));
    assert!(rounds >= 1, "{kind}");
    let count = u32::try_from(groups.len()).unwrap_or_else(|_| panic!("{kind}"));
    assert!(count >= 1, "{kind}: no group in {layout:?}");
    let members = groups.member_count();
    assert!(members >= u64::from(count), "{kind}");
    assert!(
        members <= u64::from(layout.world_size()) * u64::from(rounds),
        "{kind}: {members} members, {rounds} rounds in {layout:?}"
    );
    let mut all = ok(layout.groups(kind), || format!("{kind}"));
    assert!(all.nth(count as usize).is_none(), "{kind}");
    assert!(all.next().is_none(), "{kind}");
    if count <= 256 {
        let total: u64 = ok(layout.groups(kind), || format!("{kind}"))
            .map(|g| g.len() as u64)
            .sum();
        assert_eq!(total, members, "{kind}");
    }
    let info = KindInfo { rounds, count };
    for index in [count - 1, input.below(count)] {
        let g = group(layout, kind, index);
        check_group(layout, kind, &g);
        let len = u32::try_from(g.len()).unwrap_or(u32::MAX);
        for key in [len - 1, input.below(len)] {
            let rank = g.get(key as usize).unwrap_or_else(|| panic!("{kind}"));
            let want = Split { color: index, key };
            if rounds <= MAX_ROUNDS {
                let ms = ok(layout.memberships(rank, kind), || format!("{kind} {rank}"));
                assert!(
                    ms.iter()
                        .any(|m| m.split() == want && same_group(&m.group, &g)),
                    "{kind}: rank {rank} of group {index} at {key}, memberships {:?}",
                    splits(&ms)
                );
            }
            let found = (0..rounds.min(MAX_ROUNDS)).any(|round| {
                ok(layout.split_in_round(rank, kind, round), || {
                    format!("{kind} {rank} {round}")
                }) == Some(want)
            });
            assert!(found || rounds > MAX_ROUNDS, "{kind}: {rank} {want:?}");
        }
    }
    Some(info)
}

/// One rank's answers for one kind: memberships (each holding the rank at
/// its key, the group of its index, ascending), the split rounds listing
/// the same, `split` and `group_of` for a partition, typed errors for
/// an overlapping kind, a round out of range or a rank out of range.
fn check_rank_kind(layout: &Layout, rank: u32, kind: Kind, info: &KindInfo) {
    let rounds = info.rounds;
    let past = layout.split_in_round(rank, kind, rounds);
    if !in_range(layout, rank) {
        if rounds <= MAX_ROUNDS {
            assert_out_of_range(
                layout,
                rank,
                layout.memberships(rank, kind).map(|ms| splits(&ms)),
            );
        }
        assert_out_of_range(layout, rank, layout.split_in_round(rank, kind, 0));
        assert!(past.is_err(), "{kind}");
        return;
    }
    assert!(
        matches!(past, Err(Error::RoundOutOfRange { round, rounds: n, .. }) if round == rounds && n == rounds),
        "{kind} round {rounds}: {past:?}"
    );
    let single = layout.split(rank, kind);
    let one = layout.group_of(rank, kind);
    if rounds > 1 {
        assert!(
            matches!(single, Err(Error::OverlappingKind { .. })),
            "{kind}: {single:?}"
        );
        assert!(
            matches!(one, Err(Error::OverlappingKind { .. })),
            "{kind}: {:?}",
            one.map(|m| m.map(|m| m.split()))
        );
    }
    if rounds > MAX_ROUNDS {
        // Sampled rounds only.
        for round in [0, rounds / 2, rounds - 1] {
            let s = ok(layout.split_in_round(rank, kind, round), || {
                format!("{kind}")
            });
            if let Some(s) = s {
                assert!(s.color < info.count, "{kind}: {s:?}");
                assert_eq!(group(layout, kind, s.color).get(s.key as usize), Some(rank));
            }
        }
        return;
    }
    let ms = ok(layout.memberships(rank, kind), || format!("{kind} {rank}"));
    assert!(ms.len() <= rounds as usize, "{kind}: {:?}", splits(&ms));
    assert!(
        ms.windows(2).all(|w| w[0].color < w[1].color),
        "{kind}: memberships of {rank} not ascending: {:?}",
        splits(&ms)
    );
    for m in &ms {
        check_membership(layout, kind, rank, m, info);
    }
    let mut by_round: Vec<Split> = (0..rounds)
        .filter_map(|round| {
            ok(layout.split_in_round(rank, kind, round), || {
                format!("{kind}")
            })
        })
        .collect();
    by_round.sort_unstable();
    let listed: Vec<Split> = ms.iter().map(Membership::split).collect();
    assert_eq!(by_round, listed, "{kind} rank {rank}");
    if rounds == 1 {
        assert_eq!(
            ok(single, || format!("{kind}")),
            listed.first().copied(),
            "{kind}"
        );
        let one = ok(one, || format!("{kind}"));
        assert_eq!(one.as_ref().map(Membership::split), listed.first().copied());
        if let (Some(a), Some(b)) = (&one, ms.first()) {
            assert!(same_group(&a.group, &b.group), "{kind}: {}", a.color);
        }
    }
}

fn check_membership(layout: &Layout, kind: Kind, rank: u32, m: &Membership, info: &KindInfo) {
    assert!(m.color < info.count, "{kind}: {}", m.split());
    assert_eq!(
        m.group.get(m.key as usize),
        Some(rank),
        "{kind}: {}",
        m.split()
    );
    let g = group(layout, kind, m.color);
    assert!(same_group(&m.group, &g), "{kind} group {}", m.color);
}

/// Memberships as (index, key) pairs, for messages (a group's `Debug`
/// lists every member).
fn splits(ms: &[Membership]) -> Vec<Split> {
    ms.iter().map(Membership::split).collect()
}

/// Group equality, compared member by member only for short groups.
fn same_group(a: &Group, b: &Group) -> bool {
    if a.len() <= EQ_LEN {
        a == b
    } else {
        a.len() == b.len()
            && a.first() == b.first()
            && a.last() == b.last()
            && a.get(a.len() / 2) == b.get(b.len() / 2)
    }
}

/// Where a rank sits: in its part's grid, coordinates below the sizes,
/// `rank(part, coord)` giving it back.
fn check_placement(layout: &Layout, p: &Placement) {
    let sizes = match p.part {
        Part::Encoder => {
            assert!(
                u64::from(p.rank)
                    < u64::from(layout.rank_offset()) + u64::from(layout.encoder_world_size()),
                "{p:?}"
            );
            layout
                .encoder_sizes()
                .unwrap_or_else(|| panic!("{p:?} without encoder"))
        }
        Part::Decoder => layout.sizes(),
    };
    let c = p.coord;
    assert!(
        c.tp < sizes.tp && c.cp < sizes.cp && c.dp < sizes.dp && c.pp < sizes.pp,
        "{p:?} {sizes:?}"
    );
    let e = p.expert;
    assert!(
        e.ep < sizes.ep.max(1) && e.edp < sizes.edp && e.pp == c.pp,
        "{p:?} {sizes:?}"
    );
    if layout.config().expert_layout == ExpertLayout::Nested {
        assert_eq!(e.etp, c.tp, "{p:?}");
        if sizes.ep == 1 {
            assert_eq!((e.ep, e.edp), (0, c.dp), "{p:?}");
        }
    } else {
        assert!(e.etp < sizes.etp, "{p:?} {sizes:?}");
    }
    assert_eq!(layout.rank(p.part, p.coord).ok(), Some(p.rank), "{p:?}");
}

/// Every answer about one rank, in range or not.
fn check_rank(layout: &Layout, rank: u32, infos: &[(Kind, KindInfo)], input: &mut Input) {
    if !in_range(layout, rank) {
        assert_out_of_range(layout, rank, layout.placement(rank));
        assert_out_of_range(layout, rank, layout.splits(rank).map(|s| s.count()));
        assert_out_of_range(
            layout,
            rank,
            layout.splits_of(rank, layout.kinds()).map(|s| s.count()),
        );
        assert_out_of_range(layout, rank, layout.pipeline_next(rank));
        assert_out_of_range(layout, rank, layout.pipeline_prev(rank));
        for (kind, info) in infos {
            check_rank_kind(layout, rank, *kind, info);
        }
        return;
    }
    let p = ok(layout.placement(rank), || format!("placement {rank}"));
    assert_eq!(p.rank, rank);
    check_placement(layout, &p);
    for (kind, info) in infos {
        check_rank_kind(layout, rank, *kind, info);
    }
    // splits: every (kind, round) of the layout, in order, each the answer
    // of comm_split_round.
    let steps = ok(layout.splits(rank), || format!("splits {rank}"));
    let want: u64 = infos
        .iter()
        .filter(|(k, _)| layout.kinds().contains(k))
        .map(|(_, i)| u64::from(i.rounds))
        .sum();
    assert_eq!(steps.len() as u64, want, "splits of {rank}");
    let mut expected = layout.kinds().iter().flat_map(|k| {
        let rounds = infos
            .iter()
            .find(|(x, _)| x == k)
            .map_or(0, |(_, i)| i.rounds);
        (0..rounds).map(move |round| (*k, round, rounds))
    });
    for step in steps.take(MAX_STEPS) {
        assert_eq!(
            expected.next(),
            Some((step.kind, step.round, step.rounds)),
            "splits of {rank}"
        );
        let s = ok(layout.split_in_round(rank, step.kind, step.round), || {
            format!("{step:?}")
        });
        assert_eq!(step.split, s, "rank {rank} {step:?}");
    }
    // splits_of: chosen kinds, repeated ones once, in the order given.
    let chosen: Vec<Kind> = (0..3)
        .map(|_| {
            let i = input.below(u32::try_from(infos.len()).unwrap_or(1).max(1)) as usize;
            infos.get(i).map_or(Kind::TP, |(k, _)| *k)
        })
        .collect();
    match layout.splits_of(rank, &chosen) {
        Ok(steps) => {
            let mut seen: Vec<Kind> = Vec::new();
            for step in steps.take(MAX_STEPS) {
                if seen.last() != Some(&step.kind) {
                    assert!(!seen.contains(&step.kind), "{chosen:?}: {step:?}");
                    seen.push(step.kind);
                }
                let s = ok(layout.split_in_round(rank, step.kind, step.round), || {
                    format!("{step:?}")
                });
                assert_eq!(step.split, s, "rank {rank} {step:?}");
            }
            let mut distinct: Vec<Kind> = Vec::new();
            for k in chosen.iter() {
                if !distinct.contains(k) {
                    distinct.push(*k);
                }
            }
            assert!(distinct.starts_with(&seen), "{chosen:?} {seen:?}");
        }
        Err(e) => panic!("splits_of {chosen:?}: {e}"),
    }
    check_pipeline(layout, rank, &p, infos);
}

/// Pipeline neighbours: each neighbour lists the rank back; first and last
/// stage agree; without an encoder the next rank is one stage down the
/// same (tp, cp, dp), the previous one stage up.
fn check_pipeline(layout: &Layout, rank: u32, p: &Placement, infos: &[(Kind, KindInfo)]) {
    let rounds = |kind: Kind| {
        infos
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, i)| i.rounds)
    };
    if rounds(Kind::PP).is_none_or(|r| r > MAX_ROUNDS) {
        return;
    }
    let next = ok(layout.pipeline_next(rank), || format!("next {rank}"));
    let prev = ok(layout.pipeline_prev(rank), || format!("prev {rank}"));
    assert_eq!(ok(layout.is_last_stage(rank), String::new), next.is_empty());
    assert_eq!(
        ok(layout.is_first_stage(rank), String::new),
        prev.is_empty()
    );
    for (list, back) in [(&next, false), (&prev, true)] {
        let mut sorted = list.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), list.len(), "{rank}: {list:?}");
        for &n in list {
            assert!(in_range(layout, n) && n != rank, "{rank}: {list:?}");
            let other = if back {
                layout.pipeline_next(n)
            } else {
                layout.pipeline_prev(n)
            };
            let other = ok(other, || format!("neighbour {n}"));
            assert!(other.contains(&rank), "{rank} -> {n} -> {other:?}");
        }
    }
    if !layout.has_encoder() {
        let stages = layout.sizes().pp;
        let at = |pp: u32| {
            ok(layout.rank(Part::Decoder, Coord { pp, ..p.coord }), || {
                format!("{p:?}")
            })
        };
        let want_next: Vec<u32> = (p.coord.pp + 1 < stages)
            .then(|| at(p.coord.pp + 1))
            .into_iter()
            .collect();
        let want_prev: Vec<u32> = p.coord.pp.checked_sub(1).map(at).into_iter().collect();
        assert_eq!(next, want_next, "next of {p:?}");
        assert_eq!(prev, want_prev, "prev of {p:?}");
    }
    if rounds(Kind::EMBD).is_some_and(|r| r <= MAX_ROUNDS) {
        let embd = ok(layout.memberships(rank, Kind::EMBD), String::new);
        assert_eq!(
            ok(layout.is_embedding_rank(rank), String::new),
            !embd.is_empty()
        );
        let pos = ok(layout.memberships(rank, Kind::POS_EMBD), String::new);
        assert_eq!(
            ok(layout.is_position_embedding_rank(rank), String::new),
            !pos.is_empty()
        );
        // The ends of a pipeline: first stages hold both embeddings.
        if !pos.is_empty() {
            assert!(!embd.is_empty(), "{rank}: pos-embd without embd");
        }
    }
}

/// A layout: it re-validates from its resolved configuration, its sizes
/// add up, every kind resolves and is sound, sampled ranks (in and out of
/// range) answer consistently; small worlds are checked as a whole.
fn check_layout(layout: &Layout, input: &mut Input) {
    let world = layout.world_size();
    let first = layout.rank_offset();
    assert!(world >= 1, "{layout:?}");
    assert_eq!(layout.rank_end(), u64::from(first) + u64::from(world));
    assert!(layout.rank_end() <= 1 << 32);
    let config = layout.config();
    assert_eq!(config.world_size, Some(world));
    assert_eq!(config.dp, Some(layout.sizes().dp));
    let again = ok(Layout::new(config), || format!("resolved {config:?}"));
    assert_eq!(&again, layout);
    assert_eq!(again.config(), config);
    assert_eq!(again.kinds(), layout.kinds());
    let sizes = layout.sizes();
    match layout.encoder_sizes() {
        Some(encoder) => {
            assert!(layout.has_encoder());
            assert_eq!(layout.encoder_world_size(), encoder.world());
            assert_eq!(
                u64::from(encoder.world()) + u64::from(sizes.world()),
                u64::from(world)
            );
            assert_eq!(encoder.ep, 1, "{layout:?}");
        }
        None => {
            assert!(!layout.has_encoder());
            assert_eq!(layout.encoder_world_size(), 0);
            assert_eq!(sizes.world(), world, "{layout:?}");
        }
    }
    assert_eq!(layout.dist_opt_instances(), config.dist_opt_instances);
    assert_eq!(layout.hierarchical_cp(), config.hierarchical_cp.as_slice());
    let kinds = layout.kinds();
    for (i, k) in kinds.iter().enumerate() {
        assert!(!kinds[..i].contains(k), "{k} twice in {kinds:?}");
    }
    // Every kind of the layout, then a few others (errors or not).
    let mut infos: Vec<(Kind, KindInfo)> = Vec::new();
    for &kind in kinds {
        if let Some(info) = check_kind(layout, kind, true, input) {
            infos.push((kind, info));
        }
    }
    let mut extra: Vec<(Kind, KindInfo)> = Vec::new();
    for _ in 0..3 {
        let kind = input.kind();
        if kinds.contains(&kind) || extra.iter().any(|(k, _)| *k == kind) {
            continue;
        }
        if let Some(info) = check_kind(layout, kind, false, input) {
            extra.push((kind, info));
        }
    }
    for _ in 0..4 {
        let rank = input.rank(layout);
        check_rank(layout, rank, &infos, input);
        for (kind, info) in &extra {
            check_rank_kind(layout, rank, *kind, info);
        }
    }
    check_coords(layout, input);
    let all: Vec<&(Kind, KindInfo)> = infos.iter().chain(&extra).collect();
    if world <= SMALL_WORLD {
        // Every kind of a tiny world as a whole; of a larger one, the kind
        // the input chooses (listing is O(members) but costly per group).
        let chosen = input.below(u32::try_from(all.len()).unwrap_or(1).max(1)) as usize;
        let topology = input.topology();
        for (i, (kind, info)) in all.iter().enumerate() {
            if world <= WHOLE_WORLD || i == chosen {
                check_kind_whole(layout, *kind, info, input);
                if let Some(t) = topology.as_ref().filter(|_| world <= SMALLER_WORLD) {
                    check_spread(layout, *kind, t);
                }
            }
        }
        if world <= TINY_WORLD {
            for rank in first..=first + (world - 1) {
                check_rank(layout, rank, &infos, input);
            }
        }
    } else if let Some(t) = input.topology() {
        // Large worlds: spread from the strides only where it is not a
        // listing (grid kinds of one grid), with bounded groups.
        for (kind, info) in all {
            let grid = (kind.axis_set().is_some() || kind.to_string().ends_with("-mod-ep"))
                && !layout.has_encoder();
            let len = group(layout, *kind, 0).len();
            if grid && info.count <= 4096 && len <= MAX_LEN && t.gpus_per_node() <= 4096 {
                let s = ok(layout.spread(*kind, &t), || format!("spread {kind}"));
                assert_eq!(s.groups, info.count, "{kind}");
                assert_eq!(s.size, len, "{kind}");
                assert!(
                    s.cross_node_groups <= s.groups && s.max_nodes_per_group as usize <= s.size
                );
                assert!(s.max_nodes_per_group >= 1, "{kind}: {s:?}");
            }
        }
    }
}

/// `rank(part, coord)` for decoded coordinates: inside the sizes the rank
/// is placed back at them, outside it is a typed error.
fn check_coords(layout: &Layout, input: &mut Input) {
    for part in [Part::Decoder, Part::Encoder] {
        let sizes = match part {
            Part::Decoder => layout.sizes(),
            Part::Encoder => match layout.encoder_sizes() {
                Some(s) => s,
                None => {
                    let got = layout.rank(part, Coord::default());
                    assert!(matches!(got, Err(Error::NeedsEncoder)), "{got:?}");
                    continue;
                }
            },
        };
        let mut pick = |size: u32| match input.byte() % 8 {
            0 => size,
            1 => u32::MAX,
            _ => input.below(size),
        };
        let coord = Coord {
            tp: pick(sizes.tp),
            cp: pick(sizes.cp),
            dp: pick(sizes.dp),
            pp: pick(sizes.pp),
        };
        let inside = coord.tp < sizes.tp
            && coord.cp < sizes.cp
            && coord.dp < sizes.dp
            && coord.pp < sizes.pp;
        match layout.rank(part, coord) {
            Ok(rank) => {
                assert!(inside, "{coord:?} {sizes:?}");
                let p = ok(layout.placement(rank), || format!("{coord:?}"));
                assert_eq!((p.part, p.coord), (part, coord));
            }
            Err(e) => {
                assert!(!inside, "{coord:?}: {e}");
                assert!(matches!(e, Error::CoordOutOfRange { .. }), "{e:?}");
            }
        }
    }
}

/// A kind of a small world as a whole: `fill` writes what iterating
/// lists, refuses a short buffer untouched, `table` agrees, reversed
/// iteration agrees; each rank is in one group (partition kinds) or at most
/// one per round; and each round's groups, seen from the ranks'
/// `split_in_round`, are exactly the groups with keys `0..len`.
fn check_kind_whole(layout: &Layout, kind: Kind, info: &KindInfo, input: &mut Input) {
    let first = layout.rank_offset();
    let world = layout.world_size();
    let groups = ok(layout.groups(kind), || format!("{kind}"));
    // Listed through the members' iterator (an odometer), independent of
    // the tiled `fill` and of `Group::to_vec`.
    let listed: Vec<Vec<u32>> = groups.clone().map(|g| g.iter().collect()).collect();
    let flat: Vec<u32> = listed.concat();
    let members = usize::try_from(groups.member_count()).unwrap_or(usize::MAX);
    assert_eq!(flat.len(), members, "{kind}");
    let mut buffer = vec![u32::MAX; members + 1];
    assert_eq!(
        ok(groups.clone().fill(&mut buffer), || format!("fill {kind}")),
        members
    );
    assert_eq!(&buffer[..members], &flat[..], "fill {kind} in {layout:?}");
    assert_eq!(
        buffer[members],
        u32::MAX,
        "fill {kind} wrote past its members"
    );
    if members > 0 {
        let mut short = vec![7u32; members - 1];
        assert!(
            matches!(
                groups.clone().fill(&mut short),
                Err(Error::BufferTooSmall { .. })
            ),
            "{kind}"
        );
        assert!(
            short.iter().all(|r| *r == 7),
            "{kind}: short buffer written"
        );
    }
    if world <= SMALLER_WORLD {
        check_kind_listed(kind, &groups, &listed, &flat, input);
    }
    // Coverage.
    let mut seen = vec![0u32; world as usize];
    for r in &flat {
        seen[(r - first) as usize] += 1;
    }
    let rounds = info.rounds;
    for (i, n) in seen.iter().enumerate() {
        let fine = match kind {
            Kind::EMBD | Kind::POS_EMBD => *n <= rounds,
            _ if rounds == 1 => *n == 1,
            _ => (1..=rounds).contains(n),
        };
        assert!(
            fine,
            "{kind}: rank {} in {n} groups ({rounds} rounds) in {layout:?}",
            first + i as u32
        );
    }
    // Rounds: what every rank passes to MPI_Comm_split builds the groups.
    if u64::from(world) * u64::from(rounds) > SWEEP {
        return;
    }
    let mut built: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for round in 0..rounds {
        let mut colors: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
        for rank in first..=first + (world - 1) {
            let s = ok(layout.split_in_round(rank, kind, round), || {
                format!("{kind}")
            });
            if let Some(s) = s {
                colors.entry(s.color).or_default().push((s.key, rank));
            }
        }
        for (color, mut keyed) in colors {
            keyed.sort_unstable();
            assert!(
                built.insert(color, keyed).is_none(),
                "{kind}: group {color} built in two rounds"
            );
        }
    }
    assert_eq!(
        built.len(),
        listed.len(),
        "{kind}: groups built by the rounds"
    );
    for (color, keyed) in built {
        let g = &listed[color as usize];
        let want: Vec<(u32, u32)> = g.iter().enumerate().map(|(k, r)| (k as u32, *r)).collect();
        assert_eq!(keyed, want, "{kind}: group {color} as built by the rounds");
    }
}

/// `fill` from a later group on, `table`, `to_vecs` and reversed iteration
/// against the listing.
fn check_kind_listed(
    kind: Kind,
    groups: &Groups,
    listed: &[Vec<u32>],
    flat: &[u32],
    input: &mut Input,
) {
    let count = u32::try_from(listed.len()).unwrap_or(u32::MAX).max(1);
    // From a later group on.
    let skip = input.below(count) as usize;
    let mut rest = groups.clone();
    if skip > 0 {
        rest.nth(skip - 1);
    }
    let tail: Vec<u32> = listed[skip..].concat();
    let mut buffer = vec![0u32; tail.len()];
    assert_eq!(ok(rest.fill(&mut buffer), || format!("{kind}")), tail.len());
    assert_eq!(buffer, tail, "fill {kind} from group {skip}");
    let table = ok(groups.clone().table(), || format!("table {kind}"));
    assert_eq!(table.len(), listed.len(), "{kind}");
    assert_eq!(table.members(), flat, "{kind}");
    for (i, g) in listed.iter().enumerate() {
        assert_eq!(table.get(i), Some(&g[..]), "{kind} table {i}");
    }
    assert_eq!(table.iter().count(), listed.len());
    if let Some(len) = table.group_len() {
        assert!(listed.iter().all(|g| g.len() == len), "{kind}");
    }
    let mut backwards: Vec<Vec<u32>> = groups.clone().rev().map(|g| g.to_vec()).collect();
    backwards.reverse();
    assert_eq!(backwards, listed, "{kind} reversed");
    assert_eq!(groups.clone().to_vecs(), listed, "{kind} to_vecs");
}

/// `spread` of a small world against counting nodes and domains group by
/// group.
fn check_spread(layout: &Layout, kind: Kind, topology: &Topology) {
    let got = ok(layout.spread(kind, topology), || format!("spread {kind}"));
    let groups = ok(layout.groups(kind), || format!("{kind}")).to_vecs();
    let count = |unit: u32| {
        let mut crossing = 0u32;
        let mut most = 0u32;
        for g in &groups {
            let mut units: Vec<u32> = g.iter().map(|r| r / unit).collect();
            units.sort_unstable();
            units.dedup();
            let n = units.len() as u32;
            crossing += u32::from(n > 1);
            most = most.max(n);
        }
        (crossing, most)
    };
    let (crossing, most) = count(topology.gpus_per_node());
    assert_eq!(got.groups as usize, groups.len(), "{kind} {topology:?}");
    let size = groups.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(got.size, size, "{kind} {topology:?}");
    assert_eq!(
        (got.cross_node_groups, got.max_nodes_per_group),
        (crossing, most),
        "spread of {kind} on {topology:?} in {layout:?}"
    );
    let domains = topology.gpus_per_domain().map(count);
    assert_eq!(
        (got.cross_domain_groups, got.max_domains_per_group),
        (domains.map(|d| d.0), domains.map(|d| d.1)),
        "domains of {kind} on {topology:?} in {layout:?}"
    );
}

/// Megatron-LM command-line parser (`MegatronArgs::parse_command_line`,
/// the CLI's `--megatron-args`): the bytes as text (lossy UTF-8).
///
/// It never panics; an error is `InvalidArgument` naming a flag or the
/// line, `UnmodelledArgument` naming a refused flag of the table, or one of
/// the configuration's errors (weight shards, torchrun's world size). An
/// accepted line's arguments are all modelled rows of the table, written
/// back as a command line they parse to the same arguments and
/// configuration, and their configuration builds a layout or a typed
/// error. The variables it lists as not expanded are `$` words.
pub fn megatron_args(data: &[u8]) {
    use rank_layout::megatron::{Handling, MEGATRON_ARGS, MegatronArgs, MegatronValue};
    let text = String::from_utf8_lossy(data);
    let args = match MegatronArgs::parse_command_line(&text) {
        Ok(args) => args,
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument { .. }
                        | Error::UnmodelledArgument { .. }
                        | Error::WeightShardsBelowTp { .. }
                        | Error::WeightShardsNotDivisible { .. }
                        | Error::LaunchMismatch { .. }
                        | Error::Overflow { .. }
                ),
                "{text:?}: {e:?}"
            );
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    for name in args.unexpanded() {
        assert!(name.starts_with('$'), "{text:?}: {name:?}");
    }
    let mut line = String::from("pretrain_gpt.py");
    for (arg, value) in args.given() {
        assert!(
            MEGATRON_ARGS
                .iter()
                .any(|a| a.name == arg.name && a.handling == Handling::Modelled),
            "{}",
            arg.name
        );
        line.push(' ');
        line.push_str(arg.flag);
        match value {
            MegatronValue::Int(n) => line.push_str(&format!(" {n}")),
            MegatronValue::Ints(list) => {
                for n in list {
                    line.push_str(&format!(" {n}"));
                }
            }
            MegatronValue::Bool(b) => line.push_str(&format!("={b}")),
            other => panic!("{text:?}: a parsed value is never {other:?}"),
        }
    }
    let again = MegatronArgs::parse_command_line(&line)
        .unwrap_or_else(|e| panic!("{text:?} written back as {line:?}: {e}"));
    assert!(
        again.given().eq(args.given()),
        "{text:?} written back as {line:?}"
    );
    assert!(again.unexpanded().is_empty(), "{line:?}");
    let config = args.config().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(again.config().ok(), Some(config.clone()), "{line:?}");
    match Layout::new(&config) {
        Ok(layout) => {
            assert_eq!(layout.config().tp, config.tp);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Mesh specification parsers (`MeshSpec::parse`, `ViewSpec::parse`,
/// `FlattenSpec::parse`, the CLI's `--mesh`, `--view`, `--flatten`): the
/// bytes as text, split at newlines into a mesh, views and flattens
/// (a first `!` line asks for DeviceMesh's order).
///
/// Nothing panics; a refusal is a typed error with a message. A mesh that
/// builds answers every dim set of its own and of its views as the
/// definition says for a few ranks: each rank is in the group its split
/// names, at its key, and groups fill what they iterate.
pub fn mesh_spec(data: &[u8]) {
    use rank_layout::{Mesh, MeshSpec};
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let Some(first) = lines.next() else {
        return;
    };
    let (device, first) = match first.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, first),
    };
    let parsed = if device {
        MeshSpec::parse_device_mesh(first)
    } else {
        MeshSpec::parse(first)
    };
    let mut spec = match parsed {
        Ok(spec) => spec,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    for line in lines {
        // A view names itself before ':', a flatten before '='.
        let is_view = match (line.find(':'), line.find('=')) {
            (Some(colon), Some(equals)) => colon < equals,
            (colon, _) => colon.is_some(),
        };
        let next = if is_view {
            spec.clone().view(line)
        } else {
            spec.clone().flatten(line)
        };
        match next {
            Ok(s) => spec = s,
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    let mesh: Mesh = match spec.build() {
        Ok(mesh) => mesh,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{text:?}");
            return;
        }
    };
    let world = mesh.world_size();
    let mut specs: Vec<String> = mesh.dims().map(|(n, _)| n.to_owned()).collect();
    for view in mesh.views().map(str::to_owned).collect::<Vec<_>>() {
        let dims: Vec<String> = ok(mesh.view_dims(&view), || view.clone())
            .map(|(n, _)| n.to_owned())
            .collect();
        specs.push(format!("{view}:{}", dims.join("-")));
        specs.extend(dims.iter().map(|d| format!("{view}:{d}")));
    }
    specs.extend(mesh.flattens().map(|(n, _)| n.to_owned()));
    let sample = [0, world / 2, world.saturating_sub(1)];
    for s in &specs {
        let groups = ok(mesh.groups(s), || s.clone());
        let len = groups.group_len().unwrap_or(0);
        assert_eq!(groups.len() * len, world as usize, "{text:?} {s}");
        for p in sample {
            let rank = mesh.rank_offset() + p;
            let split = ok(mesh.split(rank, s), || format!("{s} {rank}"));
            let group = ok(mesh.groups(s), || s.clone())
                .nth(split.color as usize)
                .unwrap();
            assert_eq!(group.get(split.key as usize), Some(rank), "{text:?} {s}");
        }
        if world <= 4096 {
            let mut buf = vec![0u32; world as usize];
            ok(ok(mesh.groups(s), || s.clone()).fill(&mut buf), || {
                s.clone()
            });
            let listed: Vec<u32> = ok(mesh.groups(s), || s.clone())
                .flat_map(|g| g.to_vec())
                .collect();
            assert_eq!(buf, listed, "{text:?} {s}");
        }
    }
}

/// Modules files (`ModulesSpec`, the CLI's `--modules`): the bytes as JSON,
/// built into [`Modules`](rank_layout::Modules).
///
/// Nothing panics; a refusal is a typed error with a message; a spec goes
/// to JSON and back unchanged. Modules of at most [`SMALL_WORLD`] ranks
/// have every bridge checked against its definition: each source lane's
/// leader is paired exactly with the destination leaders of its block;
/// each broadcast group holds its lane's leader; every rank of the
/// boundary stages is in exactly one broadcast group; a colocated gather
/// plan puts every rank in exactly one gather group (none when the lanes
/// are equal) and has one slot per rank; and every rank's `role` splits
/// are, for every kind the edge builds, the index of the plan's group that
/// holds it and its position there. Stages stay below `total_stages`.
pub fn modules_file(data: &[u8]) {
    use rank_layout::{Modules, ModulesSpec};
    let Ok(spec) = serde_json::from_slice::<ModulesSpec>(data) else {
        return;
    };
    let text = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        serde_json::from_str::<ModulesSpec>(&text).unwrap(),
        spec,
        "{text}"
    );
    let modules: Modules = match spec.build() {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{text}");
            return;
        }
    };
    assert_eq!(modules.names().count(), spec.modules.len());
    assert_eq!(modules.edges().count(), spec.edges.len());
    assert_eq!(modules.rank_offset(), spec.rank_offset);
    if modules.world_size() > u64::from(SMALL_WORLD) {
        return;
    }
    let names: Vec<String> = modules.names().map(str::to_owned).collect();
    for name in &names {
        let mesh = modules.module(name).unwrap();
        let pp = mesh.dims().find(|(d, _)| *d == "pp").map_or(1, |(_, s)| s);
        let first = modules.first_stage(name).unwrap();
        assert!(first + pp <= modules.total_stages(), "{text} {name}");
    }
    let first = modules.rank_offset();
    let end = u32::try_from(modules.rank_end()).unwrap();
    for rank in first..end {
        assert!(
            modules.stage(rank).unwrap() < modules.total_stages(),
            "{text} {rank}"
        );
        assert!(modules.modules_of(rank).next().is_some(), "{text} {rank}");
    }
    assert!(modules.stage(end).is_err());
    for plan in modules.bridges().expect("a small world's plans") {
        check_bridge(&modules, &plan, &text);
    }
}

/// The ranks of module `name` at pipeline coordinate `pp` (`None`: its last).
fn stage_ranks(modules: &rank_layout::Modules, name: &str, pp: Option<u32>) -> Vec<u32> {
    let mesh = modules.module(name).unwrap();
    let size = mesh.dims().find(|(d, _)| *d == "pp").map_or(1, |(_, s)| s);
    let want = pp.unwrap_or(size - 1);
    let start = mesh.rank_offset();
    let end = u32::try_from(mesh.rank_end()).unwrap();
    (start..end)
        .filter(|&r| mesh.placement(r).unwrap().get("pp").unwrap_or(0) == want)
        .collect()
}

/// Every rank's (color, key) in `groups`, asserting each rank is in at
/// most one group and, when `cover` is given, that exactly those ranks are.
fn splits_of(groups: &[&[u32]], cover: Option<&[u32]>, what: &str) -> BTreeMap<u32, Split> {
    let mut out = BTreeMap::new();
    for (color, g) in groups.iter().enumerate() {
        for (key, &r) in g.iter().enumerate() {
            let split = Split {
                color: color as u32,
                key: key as u32,
            };
            assert!(
                out.insert(r, split).is_none(),
                "{what}: rank {r} in two groups"
            );
        }
    }
    if let Some(cover) = cover {
        let ranks: Vec<u32> = out.keys().copied().collect();
        let mut want = cover.to_vec();
        want.sort_unstable();
        assert_eq!(ranks, want, "{what}: not the ranks of the stage");
    }
    out
}

/// One bridge plan against its definition and against every rank's role.
fn check_bridge(modules: &rank_layout::Modules, b: &rank_layout::Bridge, text: &str) {
    use rank_layout::{BridgeKind, ColocatedMode, Direction};
    let what = format!("{text} {} -> {}", b.src, b.dst);
    let (ns, nd) = (b.src_leaders.len() as u32, b.dst_leaders.len() as u32);
    let k = b.scale;
    match b.direction {
        Direction::Equal => assert!(ns == nd && k == 1, "{what}"),
        Direction::FanIn => assert!(k > 1 && ns == nd * k, "{what}"),
        Direction::FanOut => assert!(k > 1 && nd == ns * k, "{what}"),
        other => panic!("{what}: an unknown direction {other:?}"),
    }
    // R2: each source lane's leader paired with its block's leaders.
    for (l, &s) in (0u32..).zip(&b.src_leaders) {
        let block: Vec<u32> = match b.direction {
            Direction::FanIn => vec![l / k],
            Direction::FanOut => (l * k..(l + 1) * k).collect(),
            _ => vec![l],
        };
        let want: Vec<u32> = block.iter().map(|&j| b.dst_leaders[j as usize]).collect();
        let got: Vec<u32> = b
            .pairs
            .iter()
            .filter(|(a, _)| *a == s)
            .map(|&(_, d)| d)
            .collect();
        assert_eq!(got, want, "{what}: pairs of source leader {s}");
    }
    assert_eq!(b.pairs.len() as u32, ns.max(nd), "{what}: pairs");
    // R3: each broadcast group holds its leader; the stage is covered once.
    assert_eq!(b.src_broadcast.len() as u32, ns, "{what}");
    assert_eq!(b.dst_broadcast.len() as u32, nd, "{what}");
    for (g, l) in b.src_broadcast.iter().zip(&b.src_leaders) {
        assert!(g.contains(l), "{what}: source leader {l} not in {g:?}");
    }
    for (g, l) in b.dst_broadcast.iter().zip(&b.dst_leaders) {
        assert!(g.contains(l), "{what}: destination leader {l} not in {g:?}");
    }
    let last = stage_ranks(modules, &b.src, None);
    let first = stage_ranks(modules, &b.dst, Some(0));
    let mut expected: BTreeMap<BridgeKind, BTreeMap<u32, Split>> = BTreeMap::new();
    expected.insert(
        BridgeKind::SrcBroadcast,
        splits_of(
            &groups(&b.src_broadcast),
            Some(&last),
            &format!("{what} src_broadcast"),
        ),
    );
    expected.insert(
        BridgeKind::DstBroadcast,
        splits_of(
            &groups(&b.dst_broadcast),
            Some(&first),
            &format!("{what} dst_broadcast"),
        ),
    );
    expected.insert(
        BridgeKind::Bridge,
        splits_of(&[&b.bridge_group], None, &format!("{what} bridge")),
    );
    if let Some(g) = &b.dst_cp_reduce {
        expected.insert(BridgeKind::DstCpReduce, splits_of(&groups(g), None, &what));
    }
    if let Some(g) = &b.src_cp_gather {
        expected.insert(BridgeKind::SrcCpGather, splits_of(&groups(g), None, &what));
    }
    let world: Vec<u32> =
        (modules.rank_offset()..u32::try_from(modules.rank_end()).unwrap()).collect();
    if let Some(c) = &b.colocated {
        if c.mode == ColocatedMode::Collective {
            assert!(c.reason.is_none(), "{what}");
            assert_eq!(c.slots.len(), world.len(), "{what}: slots");
            assert!(c.slots.iter().all(|&s| s < k), "{what}: slots");
            // The gather plan replaces the leader plan's communicators.
            expected.clear();
            if b.direction == Direction::Equal {
                assert!(c.gather_groups.is_empty(), "{what}: gather groups");
            } else {
                expected.insert(
                    BridgeKind::Gather,
                    splits_of(
                        &groups(&c.gather_groups),
                        Some(&world),
                        &format!("{what} gather"),
                    ),
                );
            }
            if let Some(g) = &c.src_cp_gather {
                expected.insert(
                    BridgeKind::ColocatedCpGather,
                    splits_of(&groups(g), None, &what),
                );
            }
            if let Some(g) = &c.dst_cp_reduce {
                expected.insert(
                    BridgeKind::ColocatedCpReduce,
                    splits_of(&groups(g), None, &what),
                );
            }
        } else {
            assert!(c.reason.is_some(), "{what}");
            assert!(c.slots.is_empty() && c.gather_groups.is_empty(), "{what}");
        }
    }
    let kinds = modules.bridge_kinds(&b.src, &b.dst).unwrap();
    let planned: Vec<BridgeKind> = expected.keys().copied().collect();
    assert_eq!(kinds, planned, "{what}: kinds");
    for &rank in &world {
        let role = modules.role(rank, &b.src, &b.dst).unwrap();
        let listed: Vec<BridgeKind> = role.splits.iter().map(|(k, _)| *k).collect();
        assert_eq!(listed, kinds, "{what}: rank {rank}'s kinds");
        for (kind, want) in &expected {
            let got = role.split(*kind);
            assert_eq!(
                got,
                want.get(&rank).copied(),
                "{what}: rank {rank} in {kind}"
            );
            assert_eq!(
                modules.bridge_split(rank, &b.src, &b.dst, *kind).unwrap(),
                got,
                "{what}: rank {rank} bridge_split {kind}"
            );
        }
        let leads = b.src_leaders.contains(&rank);
        if b.colocated
            .as_ref()
            .is_none_or(|c| c.mode == ColocatedMode::P2p)
        {
            assert_eq!(role.src_leader, leads, "{what}: rank {rank}");
            let sends: Vec<u32> = b
                .pairs
                .iter()
                .filter(|(s, _)| *s == rank)
                .map(|&(_, d)| d)
                .collect();
            assert_eq!(role.sends_to, sends, "{what}: rank {rank} sends");
            let receives: Vec<u32> = b
                .pairs
                .iter()
                .filter(|(_, d)| *d == rank)
                .map(|&(s, _)| s)
                .collect();
            assert_eq!(role.receives_from, receives, "{what}: rank {rank} receives");
        } else {
            let i = (rank - modules.rank_offset()) as usize;
            assert_eq!(role.slot, c_slot(b, i), "{what}: rank {rank} slot");
        }
    }
}

/// The groups of a plan's list.
fn groups(l: &rank_layout::GroupList) -> Vec<&[u32]> {
    l.iter().collect()
}

/// The colocated plan's slot of the `i`-th rank.
fn c_slot(b: &rank_layout::Bridge, i: usize) -> Option<u32> {
    b.colocated.as_ref().and_then(|c| c.slots.get(i).copied())
}
