//! The `rank_list` target: the failed-rank list parser
//! (`rank_layout::relayout::parse_rank_list`), then a re-layout of a small
//! layout after the ranks listed fail.

use std::collections::BTreeSet;

use rank_layout::relayout::{
    Failure, MAX_LISTED_RANKS, Policy, RelayoutOptions, parse_rank_list, relayout,
};
use rank_layout::{Config, Error, Layout};

/// The bytes as a rank list. Nothing panics; a list read is sorted, each
/// rank once, and at most [`MAX_LISTED_RANKS`] long; a list refused is
/// [`Error::BadRankList`] naming an item of the text. Then, with the last
/// byte choosing a layout (at most 48 ranks) and a policy, the ranks listed
/// (modulo the world) fail: a plan gives every new rank exactly one process
/// and none to a failed one, its counts add up, and the same failure listed
/// backwards gives the same hash; no plan is [`Error::NoRelayout`].
pub fn rank_list(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let ranks = match parse_rank_list(&text) {
        Ok(ranks) => ranks,
        Err(Error::BadRankList { item, .. }) => {
            assert!(text.contains(item.as_str()), "{item:?} not in {text:?}");
            return;
        }
        Err(e) => panic!("{text:?}: {e:?}"),
    };
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{text:?}");
    assert!(ranks.len() as u64 <= MAX_LISTED_RANKS);
    let pick = data.last().copied().unwrap_or(0);
    let configs = [
        Config::new().tp(2).pp(2).dp(Some(4)),
        Config::new()
            .tp(2)
            .cp(2)
            .dp(Some(3))
            .order("tp-dp-cp-pp".parse().unwrap_or_default()),
        Config::new().tp(2).ep(2).dp(Some(4)).pp(2),
        Config::new().tp(4).dp(Some(3)).gtp_remat(2),
    ];
    let Some(config) = configs.get(usize::from(pick) % configs.len()) else {
        return;
    };
    let Ok(layout) = Layout::new(config) else {
        panic!("{config:?} is a layout")
    };
    let world = layout.world_size();
    let failed: BTreeSet<u32> = ranks.iter().take(64).map(|r| r % world).collect();
    let policy = Policy::ALL[usize::from(pick / 4) % Policy::ALL.len()];
    let spares = u32::from(pick % 3);
    let failure = Failure::new(2, failed.iter().copied()).spare_nodes(spares);
    let options = RelayoutOptions::default().kinds(layout.kinds().to_vec());
    let plan = match relayout(&layout, &failure, policy, &options) {
        Ok(plan) => plan,
        Err(Error::NoRelayout { .. }) => return,
        Err(e) => panic!("{text:?} {policy}: {e:?}"),
    };
    let map = plan.rank_map();
    let mut seen = BTreeSet::new();
    for p in 0..map.len() {
        if let Some(n) = map.new_rank(p) {
            assert!(!failed.contains(&p) || p >= world, "failed {p} runs {n}");
            assert!(seen.insert(n));
            assert_eq!(map.process(n), Some(p));
        }
    }
    assert_eq!(seen.len() as u32, plan.layout().world_size());
    for c in plan.kinds() {
        let groups = plan.layout().groups(c.kind).map(|g| g.len()).unwrap_or(0);
        let before = layout.groups(c.kind).map(|g| g.len()).unwrap_or(0);
        assert_eq!(c.groups() as usize, groups, "{} {policy}", c.kind);
        assert_eq!(
            c.gone.len() + c.kept as usize + c.shrunk.len(),
            before,
            "{} {policy}",
            c.kind
        );
    }
    let backwards = Failure::new(2, failed.iter().rev().copied()).spare_nodes(spares);
    let again = relayout(&layout, &backwards, policy, &options);
    assert_eq!(again.map(|p| p.hash()).ok(), Some(plan.hash()));
}
