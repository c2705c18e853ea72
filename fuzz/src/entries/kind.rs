//! The `kind` target: the `Kind` and `ExpertLayout` parsers, and kinds asked
//! of fixed layouts.

use std::sync::OnceLock;

use rank_layout::{Config, Error, ExpertLayout, Kind, Layout};

use super::shared::{Input, SMALL_WORLD, check_kind, check_kind_whole, check_rank_kind};

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
