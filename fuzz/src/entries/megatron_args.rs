//! The `megatron_args` target: Megatron-LM's command line.

use rank_layout::{Error, Layout};

/// Megatron-LM command-line parser (`MegatronArgs::parse_command_line`,
/// the CLI's `--megatron-args`): the bytes as text (lossy UTF-8).
///
/// It never panics; an error is `InvalidArgument` naming a flag or the
/// line, `UnmodelledArgument` naming a refused flag of the table, or one of
/// the configuration's errors (weight shards, torchrun's world size), or
/// the inference shards' (`InferenceShard`, `NoInferenceShards`). An
/// accepted line's arguments are all modelled rows of the table (or
/// `--inference-shards`), written back as a command line they parse to
/// the same arguments and configuration (or shards), and their
/// configuration builds a layout or a typed error. The variables it lists as not expanded are `$` words.
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
                        | Error::InferenceShard { .. }
                        | Error::NoInferenceShards
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
            MEGATRON_ARGS.iter().any(|a| a.name == arg.name
                && matches!(a.handling, Handling::Modelled | Handling::Separate)),
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
            // Single-quoted for the shell, a quote written '\''.
            MegatronValue::Text(t) => line.push_str(&format!(" '{}'", t.replace('\'', "'\\''"))),
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
    if args.given().any(|(a, _)| a.handling == Handling::Separate) {
        assert_eq!(args.config(), Err(Error::InferenceShardsNotOneLayout));
        match args.inference_shards() {
            Ok(shards) => {
                assert!(shards.is_some(), "{text:?}");
                assert_eq!(again.inference_shards(), Ok(shards), "{line:?}");
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        Error::InferenceShardsWorld { .. }
                            | Error::InferenceShard { .. }
                            | Error::Overflow { .. }
                            | Error::LaunchMismatch { .. }
                    ),
                    "{text:?}: {e:?}"
                );
                assert_eq!(again.inference_shards(), Err(e), "{line:?}");
            }
        }
        return;
    }
    let config = args.config().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(again.config().ok(), Some(config.clone()), "{line:?}");
    match Layout::new(&config) {
        Ok(layout) => {
            assert_eq!(layout.config().tp, config.tp);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}
