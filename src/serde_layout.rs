//! `Serialize`/`Deserialize` for [`Layout`]: through its resolved
//! [`Config`], re-validated on the way in.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::Config;
use crate::layout::Layout;

impl Serialize for Layout {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.config().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let config = Config::deserialize(deserializer)?;
        Layout::new(&config).map_err(serde::de::Error::custom)
    }
}
