//! What several targets share: the limits on each input's work, the
//! decoder of the fuzzer's bytes ([`Input`]) and the checks of a built
//! layout ([`check_layout`] and the per-kind and per-rank checks under it).

use std::collections::BTreeMap;

use rank_layout::{
    Axis, AxisSet, Config, Coord, Error, ExpertLayout, Group, Groups, Kind, Layout, Membership,
    Order, Part, Placement, Split, Topology,
};

/// Worlds up to this size get one kind (chosen by the input) checked as a
/// whole: `fill` against iterating, coverage of the world, the split rounds
/// rebuilding the groups.
pub(super) const SMALL_WORLD: u32 = 4096;

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

/// `Layout::new`, with the error checked to be printable.
pub(super) fn build(config: &Config) -> Option<Layout> {
    match Layout::new(config) {
        Ok(layout) => Some(layout),
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{config:?}");
            None
        }
    }
}

/// The fuzzer's bytes, read front to back; past the end every read is 0
/// (so a short input decodes to the defaults: sizes 1, nothing optional).
pub(super) struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub(super) fn new(data: &'a [u8]) -> Input<'a> {
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

    pub(super) fn config(&mut self) -> Config {
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
    pub(super) fn rank(&mut self, layout: &Layout) -> u32 {
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
pub(super) struct KindInfo {
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

pub(super) fn ok<T>(got: Result<T, Error>, what: impl FnOnce() -> String) -> T {
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
pub(super) fn check_kind(
    layout: &Layout,
    kind: Kind,
    known: bool,
    input: &mut Input,
) -> Option<KindInfo> {
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
pub(super) fn check_rank_kind(layout: &Layout, rank: u32, kind: Kind, info: &KindInfo) {
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
pub(super) fn check_layout(layout: &Layout, input: &mut Input) {
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
pub(super) fn check_kind_whole(layout: &Layout, kind: Kind, info: &KindInfo, input: &mut Input) {
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

/// The checks of a host table any reader returned: in the canonical order
/// (each name found by binary search at its own index, so sorted and no
/// name twice), names one word, no empty topology key, no host of 0 GPUs.
pub(super) fn check_hosts(hosts: &rank_layout::machine::Hosts) {
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(hosts.index_of(&h.name), Some(i), "{} out of order", h.name);
        assert!(
            !h.name.is_empty() && !h.name.contains(char::is_whitespace),
            "{:?}",
            h.name
        );
        // Launcher files write names and keys as they are.
        assert!(!h.name.contains(char::is_control), "{:?}", h.name);
        assert!(
            h.keys
                .iter()
                .all(|k| !k.is_empty() && !k.contains(char::is_control)),
            "{h:?}"
        );
        // A placeholder (`unknown`) is never a host's domain.
        assert!(
            h.domain()
                .is_none_or(|d| !d.eq_ignore_ascii_case("unknown")),
            "{h:?}"
        );
        assert_ne!(h.gpus, Some(0), "{h:?}");
    }
}

/// A refusal of a host table reader is its typed error, with a message.
pub(super) fn check_refusal(error: &Error) {
    assert!(
        matches!(error, Error::BadHostTable { .. }),
        "not a host table error: {error:?}"
    );
    assert!(!error.to_string().is_empty());
}

/// Inputs whose hostlists may stand for more names than this are skipped
/// by the host-reader targets: a short input such as `Nodes=n[0-999999]`
/// stands for up to a million hosts (the readers' limit, tested by the
/// library's unit tests), which an instrumented build reads in tens of
/// seconds, and libFuzzer would report it as a timeout.
const MANY_NAMES: u64 = 4096;

/// Whether the hostlist expressions in `text` may stand for more than
/// [`MANY_NAMES`] names: per blank-separated word, the product over its
/// `[...]` groups of the values each lists, summed over the words (an
/// upper bound of what the readers expand; brackets that do not parse
/// count as one value each).
pub(super) fn too_many_names(text: &str) -> bool {
    let mut total: u64 = 0;
    for word in text.split(|c: char| c.is_whitespace() || c == '"') {
        let mut product: u64 = 1;
        let mut rest = word;
        while let Some(open) = rest.find('[') {
            let after = rest.get(open + 1..).unwrap_or("");
            let Some(close) = after.find(']') else {
                break;
            };
            let body = after.get(..close).unwrap_or("");
            let mut values: u64 = 0;
            for part in body.split(',') {
                let count = match part.split_once('-') {
                    Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                        (Ok(a), Ok(b)) if b >= a => b - a + 1,
                        _ => 1,
                    },
                    None => 1,
                };
                values = values.saturating_add(count);
            }
            product = product.saturating_mul(values.max(1));
            rest = after.get(close + 1..).unwrap_or("");
        }
        total = total.saturating_add(product);
    }
    total > MANY_NAMES
}

/// The checks of a Slurm topology reader's answer ([`check_hosts`], not
/// empty, every host healthy with its GPUs not given and its keys known
/// unless `text` names a placeholder `unknown` switch or block, at most
/// `levels` deep) or of its refusal; the table when it read one.
pub(super) fn check_topology(
    text: &str,
    read: Result<rank_layout::machine::Hosts, Error>,
    levels: usize,
) -> Option<rank_layout::machine::Hosts> {
    let placeholder = text.to_ascii_lowercase().contains("unknown");
    match read {
        Ok(hosts) => {
            check_hosts(&hosts);
            assert!(!hosts.is_empty());
            assert!(hosts.levels() <= levels);
            for h in &hosts {
                assert!(h.healthy && h.gpus.is_none(), "{h:?}");
                assert!(placeholder || !h.keys.is_empty(), "{h:?}");
            }
            Some(hosts)
        }
        Err(e) => {
            check_refusal(&e);
            None
        }
    }
}
