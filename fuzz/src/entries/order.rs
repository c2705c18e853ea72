//! The `order` target: the `Order` parser.

use rank_layout::{Axis, Config, Error, ExpertLayout, Layout, Order};

use super::shared::{Input, build, check_layout};

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
