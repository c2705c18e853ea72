//! The `reshard_tensors` target: the reshard tensors file.

use rank_layout::reshard::{Locality, Model, Reshard, Side};
use rank_layout::{Config, Error, Layout};

/// The tensors file reader (`Model::from_json`, the CLI's `reshard
/// --tensors`): the bytes as text (lossy UTF-8).
///
/// It never panics; a refusal is `BadTensorsFile` or one of the model's
/// errors (a zero dim, a layer or expert out of range, a bad tensor),
/// each with a message. An accepted model is written back
/// (`Model::to_json`) and reads again to an equal model. A small one
/// (at most 16 tensors, 65,536 elements, 64 layers) is then planned
/// twice: onto the same single rank, where every byte is a local copy;
/// and from that rank onto two ranks of tp 2 elsewhere, where the plan
/// is refused only for a dim tp 2 does not cut, and otherwise sends each
/// destination exactly the elements of its shard.
pub fn reshard_tensors(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let model = match Model::from_json(&text) {
        Ok(m) => m,
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::BadTensorsFile { .. }
                        | Error::BadTensor { .. }
                        | Error::ZeroTensorDim { .. }
                        | Error::LayerOutOfRange { .. }
                        | Error::ExpertOutOfRange { .. }
                ),
                "{text:?}: {e:?}"
            );
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let again =
        Model::from_json(&model.to_json()).unwrap_or_else(|e| panic!("{text:?} written back: {e}"));
    assert_eq!(again, model, "{text:?}");
    let small = model.tensors().len() <= 16
        && model.numel().is_some_and(|n| n <= 1 << 16)
        && model.num_layers() <= 64;
    if !small {
        return;
    }
    let one = Side::new(Layout::new(&Config::new().world_size(1)).expect("one rank"));
    match Reshard::new(model.clone(), one.clone(), one.clone(), Locality::default()) {
        Ok(plan) => {
            let cost = plan.cost().expect("a plan made enumerates");
            assert_eq!(cost.bytes, 0, "{text:?}");
            assert_eq!(Some(cost.local_bytes), model.bytes(), "{text:?}");
        }
        // One stage holds every layer; a model without experts has none
        // for ep 1 to divide only when num_experts is 0, which divides.
        Err(e) => panic!("{text:?} on one rank: {e}"),
    }
    let two = Side::new(
        Layout::new(&Config::new().tp(2).world_size(2).rank_offset(1)).expect("two ranks"),
    );
    match Reshard::new(model.clone(), one, two, Locality::default()) {
        Ok(plan) => {
            for p in 1..3 {
                let want: u64 = (0..model.tensors().len() as u32)
                    .filter_map(|t| plan.destination_shard(p, t).expect("a tensor of the model"))
                    .flat_map(|s| s.boxes.into_iter().map(|(b, _)| b.numel()))
                    .sum();
                let got: u64 = plan
                    .plan_of(p)
                    .expect("a rank of the plan")
                    .recvs
                    .iter()
                    .map(|t| t.region.numel())
                    .sum();
                assert_eq!(got, want, "{text:?} rank {p}");
            }
        }
        Err(e) => assert!(
            matches!(e, Error::TensorNotDivisible { .. }),
            "{text:?}: {e}"
        ),
    }
}
