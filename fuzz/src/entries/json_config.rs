//! The `json_config` target: `Config` and `Layout` from JSON.

use rank_layout::{Config, Kind, Layout};

use super::shared::{Input, check_layout};

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
