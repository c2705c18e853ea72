#![doc = include_str!("../docs/semantics.md")]
