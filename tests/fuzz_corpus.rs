//! Replays the committed fuzz seed corpus (`fuzz/corpus/<target>/`) through
//! the fuzz targets' entry functions, so CI checks it without a fuzzer, and
//! keeps every input the fuzzers found a bug with as a named regression
//! test. See `fuzz/README.md`.
#![cfg(feature = "serde")]
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

#[path = "../fuzz/src/entries/mod.rs"]
mod entries;
#[path = "../fuzz/src/replay.rs"]
mod replay;

use std::alloc::{GlobalAlloc, Layout as Allocation, System};
use std::cell::Cell;

use rank_layout::{Config, ExpertLayout, Kind, Layout, Split};
use replay::replay;

/// The fuzz seed corpus, a directory per target.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus");

#[test]
fn corpus_order() {
    replay(CORPUS, "order", entries::order);
}

#[test]
fn corpus_rank_list() {
    replay(CORPUS, "rank_list", entries::rank_list);
}

#[test]
fn corpus_kind() {
    replay(CORPUS, "kind", entries::kind);
}

#[test]
fn corpus_json_config() {
    replay(CORPUS, "json_config", entries::json_config);
}

#[test]
fn corpus_layout() {
    replay(CORPUS, "layout", entries::layout);
}

#[test]
fn corpus_mesh_spec() {
    replay(CORPUS, "mesh_spec", entries::mesh_spec);
}

#[test]
fn corpus_megatron_args() {
    replay(CORPUS, "megatron_args", entries::megatron_args);
}

#[test]
fn corpus_inference_shards() {
    replay(CORPUS, "inference_shards", entries::inference_shards);
}

#[test]
fn corpus_modules_file() {
    replay(CORPUS, "modules_file", entries::modules_file);
}

#[test]
fn corpus_host_table() {
    replay(CORPUS, "host_table", entries::host_table);
}

#[test]
fn corpus_nvidia_smi() {
    replay(CORPUS, "nvidia_smi", entries::nvidia_smi);
}

#[test]
fn corpus_topology_conf() {
    replay(CORPUS, "topology_conf", entries::topology_conf);
}

#[test]
fn corpus_topology_yaml() {
    replay(CORPUS, "topology_yaml", entries::topology_yaml);
}

#[test]
fn corpus_scontrol_topology() {
    replay(CORPUS, "scontrol_topology", entries::scontrol_topology);
}

#[test]
fn corpus_slurm_topology_addr() {
    replay(CORPUS, "slurm_topology_addr", entries::slurm_topology_addr);
}

#[test]
fn corpus_kubectl_nodes() {
    replay(CORPUS, "kubectl_nodes", entries::kubectl_nodes);
}

#[test]
fn corpus_reshard_tensors() {
    replay(CORPUS, "reshard_tensors", entries::reshard_tensors);
}

// Regression tests: one per bug the fuzzers found, with the minimized input.

/// This test binary's allocator: the system's, counting the bytes the
/// current thread asks for while it measures ([`allocated_by`]).
struct Counting;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = MEASURING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATED.try_with(|n| n.set(n.get().saturating_add(bytes as u64)));
        }
    });
}

// SAFETY: every call is forwarded to `System` unchanged; counting touches
// only const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Allocation) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Allocation) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Allocation, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Allocation) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `f()` and the bytes this thread allocated while it ran.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCATED.with(|n| n.set(0));
    MEASURING.with(|on| on.set(true));
    let out = f();
    MEASURING.with(|on| on.set(false));
    (out, ALLOCATED.with(Cell::get))
}

/// What `Layout::new` may allocate, whatever the sizes: it is documented
/// O(axes + kinds) ("nothing is enumerated").
const LAYOUT_NEW_BUDGET: u64 = 1 << 20;

#[test]
fn layout_new_allocates_little_for_ordinary_layouts() {
    for text in [
        r#"{"tp": 8, "cp": 2, "ep": 4, "pp": 4, "world_size": 4096}"#,
        r#"{"tp": 2, "cp": 4, "ep": 2, "dp": 2, "expert_layout": "folded", "etp": 1,
            "hierarchical_cp": [2, 2], "dist_opt_instances": 2}"#,
        r#"{"tp": 4, "cp": 2, "pp": 2, "encoder_tp": 2, "encoder_pp": 2}"#,
    ] {
        let config: Config = serde_json::from_str(text).unwrap();
        let (layout, bytes) = allocated_by(|| Layout::new(&config));
        layout.unwrap();
        assert!(bytes < LAYOUT_NEW_BUDGET, "{bytes} bytes for {text}");
    }
}

/// Found by the `layout` and `json_config` targets (out of memory).
///
/// `Layout::new` used to list every (kind, round) of [`Layout::splits`] up
/// front, so an encoder + decoder layout took time and memory in its
/// number of split rounds, `max/min` of `tp` and `encoder_tp`: the json
/// input asked for 7.2 GB, the layout input (`encoder_tp = 2^30`) for
/// 77 GB. Measured at 2^18 rounds first (150 MB before the fix, against
/// 14-33 KB for an ordinary layout), so that a regression cannot exhaust
/// the machine, then the minimized inputs run through the fuzz entries.
#[test]
fn layout_new_is_linear_in_split_rounds() {
    // Minimized: tp 1, encoder_tp 2^30 (the world is 2^30 + 1 ranks).
    const LAYOUT_INPUT: [u8; 10] = [0, 0, 0, 0, 0, 0, 0, 2, 1, 0xe7];
    const JSON_INPUT: &str = r#"{"encoder_tp":99999999}"#;
    let config = entries::layout_config(&LAYOUT_INPUT);
    assert_eq!(
        (config.tp, config.encoder_tp, config.encoder_pp),
        (1, Some(1 << 30), None)
    );
    for (tp, encoder_tp) in [(1, 1 << 18), (1 << 18, 1)] {
        let config = Config::new()
            .tp(tp)
            .encoder_tp(Some(encoder_tp))
            .expert_layout(ExpertLayout::Nested);
        let (layout, bytes) = allocated_by(|| Layout::new(&config));
        let layout = layout.unwrap();
        assert_eq!(layout.split_rounds(Kind::PP).unwrap(), 1 << 18);
        assert!(
            bytes < LAYOUT_NEW_BUDGET,
            "Layout::new allocated {bytes} bytes for {config:?}"
        );
    }
    entries::layout(&LAYOUT_INPUT);
    entries::json_config(JSON_INPUT.as_bytes());
}

/// Found by the `layout` target (a timeout): `split` of `pos-embd` for
/// a decoder rank of a fan-in layout listed every joined pipeline of the
/// rank (one per encoder index of its block) before finding it is in no
/// `pos-embd` group. Now a rank inside its pipelines is answered at once.
/// The input is in the replayed corpus (`regression-pos-embd-fan-in`).
#[test]
fn pos_embd_of_a_wide_fan_in_is_answered_without_listing_pipelines() {
    let layout = Layout::new(
        &Config::new()
            .tp(1)
            .encoder_tp(Some(1 << 24))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    let decoder = layout.encoder_world_size();
    let (answers, bytes) = allocated_by(|| {
        (
            layout.split(decoder, Kind::POS_EMBD),
            layout.memberships(decoder, Kind::POS_EMBD),
        )
    });
    assert_eq!(answers.0.unwrap(), None);
    assert!(answers.1.unwrap().is_empty());
    assert!(bytes < LAYOUT_NEW_BUDGET, "{bytes} bytes allocated");
    assert_eq!(
        layout.split(0, Kind::POS_EMBD).unwrap(),
        Some(Split { color: 0, key: 0 })
    );
}
