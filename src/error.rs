//! The one error type of the crate.

use crate::axis::Axis;
use crate::kind::Kind;
use crate::layout_shape::LayoutShape;

/// Everything that can go wrong when building a layout or asking it a question.
///
/// Every message is lowercase, quotes the offending values and, where a user
/// needs one, adds a hint. The library never panics on bad input: it returns
/// one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A size (of an axis, of the world, of a level) is zero.
    #[error("{what} must be at least 1, got 0")]
    ZeroSize {
        /// The name of the size, as in the configuration (`tp`, `world_size`, ...).
        what: &'static str,
    },

    /// An order token is not one of `tp`, `cp`, `ep`, `dp`, `pp`.
    #[error("unknown axis {token:?} in order {order:?} (expected tp, cp, ep, dp or pp)")]
    UnknownAxis {
        /// The token as written.
        token: String,
        /// The whole order string.
        order: String,
    },

    /// An order token appears twice.
    #[error("axis {axis} appears twice in order {order:?}")]
    RepeatedAxis {
        /// The repeated axis.
        axis: Axis,
        /// The whole order string.
        order: String,
    },

    /// An order string has an empty token (`"tp--dp"`, `""`, a trailing dash).
    #[error("empty axis name in order {order:?}")]
    EmptyAxis {
        /// The whole order string.
        order: String,
    },

    /// An axis of size greater than one is missing from the order.
    #[error(
        "{axis} has size {size} but is missing from order {order:?} (only size-1 axes may be left out)"
    )]
    MissingAxis {
        /// The missing order token.
        axis: Axis,
        /// Its size.
        size: u32,
        /// The order string.
        order: String,
    },

    /// `ep` is in the order but not next to `dp` (nested expert layout).
    #[error("ep must be adjacent to dp in order {order:?} (write ...-ep-dp-... or ...-dp-ep-...)")]
    EpNotAdjacentToDp {
        /// The order string.
        order: String,
    },

    /// A product of sizes does not fit in a `u32` rank.
    #[error("{what} overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)")]
    Overflow {
        /// The product or sum that overflowed, with its factors.
        what: String,
    },

    /// `world_size` is not a multiple of the ranks one data-parallel replica needs.
    #[error("world_size ({world_size}) is not divisible by {what} = {divisor}")]
    WorldNotDivisible {
        /// The world size given.
        world_size: u32,
        /// The product it must be a multiple of, spelled out (`tp*cp*pp`).
        what: &'static str,
        /// The value of that product.
        divisor: u32,
    },

    /// Both `dp` and `world_size` were given and they disagree.
    #[error("world_size ({world_size}) disagrees with dp ({dp}): {what} * dp = {expected}")]
    WorldSizeMismatch {
        /// The world size given.
        world_size: u32,
        /// The dp given.
        dp: u32,
        /// The product the world is made of, spelled out.
        what: &'static str,
        /// The world size dp implies.
        expected: u64,
    },

    /// In the nested expert layout `dp` must be a multiple of `ep`.
    #[error(
        "dp ({dp}) is not divisible by ep ({ep}) (the nested expert layout carves ep out of dp; the folded one, expert_layout = folded, does not)"
    )]
    DpNotDivisibleByEp {
        /// The data-parallel size.
        dp: u32,
        /// The expert-parallel size.
        ep: u32,
    },

    /// A weight-shard axis (`gtp_remat` or `expert_gtp_remat` > 1) with an
    /// option that no Megatron version combines it with.
    #[error("{what} = {size} cannot be combined with {with}: {why}")]
    GtpConflict {
        /// `gtp_remat` or `expert_gtp_remat`.
        what: &'static str,
        /// Its size.
        size: u32,
        /// The other option.
        with: &'static str,
        /// Why, naming the Megatron versions.
        why: &'static str,
    },

    /// A folded expert grid does not fit the world.
    #[error("world_size ({world_size}) is not divisible by etp*ep*pp = {etp}*{ep}*{pp}")]
    ExpertWorldNotDivisible {
        /// The world size.
        world_size: u32,
        /// Expert tensor-parallel size.
        etp: u32,
        /// Expert-parallel size.
        ep: u32,
        /// Pipeline size.
        pp: u32,
    },

    /// Folded layout, pipeline not last: attention and expert dp must agree.
    #[error(
        "with pp ({pp}) > 1 and order {order:?} not ending in pp, the expert data-parallel size edp ({edp}) must equal dp ({dp})"
    )]
    FoldedDpMismatch {
        /// The order string.
        order: String,
        /// Pipeline size.
        pp: u32,
        /// Attention data-parallel size.
        dp: u32,
        /// Expert data-parallel size.
        edp: u32,
    },

    /// Folded layout: the expert grid's pipelines are not the attention grid's.
    #[error(
        "the expert grid's pp groups differ from the attention grid's (pp stride {expert_stride} vs {attention_stride} in order {order:?}); put pp last or make the axes before pp the same size in both grids"
    )]
    FoldedPpMismatch {
        /// The order string.
        order: String,
        /// Distance between pipeline stages in the attention grid.
        attention_stride: u32,
        /// Distance between pipeline stages in the expert grid.
        expert_stride: u32,
    },

    /// An option that only the folded expert layout has was given to another one.
    #[error("{what} needs the folded expert layout (expert_layout = folded)")]
    NeedsFolded {
        /// The option.
        what: &'static str,
    },

    /// An encoder grid was asked of a layout without an encoder.
    #[error("this layout has no encoder (give encoder_tp or encoder_pp)")]
    NeedsEncoder,

    /// Megatron-LM at the commit of an audit does not build this layout
    /// ([`megatron::audit`](crate::megatron::audit)).
    #[error("commit {commit} of Megatron-LM does not build this layout: {reason}")]
    MegatronRefuses {
        /// The commit (short hash).
        commit: &'static str,
        /// Why, with the values.
        reason: String,
    },

    /// The hierarchical context-parallel sizes do not multiply to `cp`.
    #[error("hierarchical_cp {levels:?} multiplies to {product}, but cp is {cp}")]
    HierarchicalCpProduct {
        /// The levels given.
        levels: Vec<u32>,
        /// Their product (saturated at `u64::MAX`).
        product: u64,
        /// The context-parallel size.
        cp: u32,
    },

    /// The number of distributed-optimizer instances does not divide a group.
    #[error("dist_opt_instances ({instances}) must divide dp*cp ({dp_cp}) and edp ({edp})")]
    DistOptNotDivisible {
        /// The number of instances.
        instances: u32,
        /// dp * cp of the attention grid.
        dp_cp: u32,
        /// The expert data-parallel size.
        edp: u32,
    },

    /// The number of distributed-optimizer instances does not divide the
    /// dp-cp groups an encoder + decoder layout slices (Megatron-LM 5a3b6bcf1f).
    #[error(
        "dist_opt_instances ({instances}) must divide dp*cp ({dp_cp}): with an encoder, each dp-cp group is cut into that many slices"
    )]
    DistOptSlicesNotDivisible {
        /// The number of instances.
        instances: u32,
        /// dp * cp.
        dp_cp: u32,
    },

    /// Distributed-optimizer instances that do not fit the grids: the
    /// intra- and inter-instance groups would not be what they claim (see
    /// [`DistOptProblem`]).
    #[error(
        "dist_opt_instances ({instances}) with order {order:?}: {problem} (the dp-cp axes of the dense grid end at place value {dp_cp_end}, the expert grid's edp axis at {edp_end}; they must end together and the top contiguous dp-cp run must be a multiple of {instances}: reorder so that dp and cp are adjacent and end where edp ends, or change dist_opt_instances)"
    )]
    DistOptInconsistent {
        /// The number of instances.
        instances: u32,
        /// The order string.
        order: String,
        /// The first condition that fails.
        problem: DistOptProblem,
        /// The place value (a rank distance) where the dense grid's dp and cp
        /// digits end.
        dp_cp_end: u64,
        /// The place value where the expert grid's edp digit ends.
        edp_end: u64,
    },

    /// An expert layout name other than `nested` or `folded`.
    #[error("unknown expert layout {name:?} (expected nested or folded)")]
    UnknownExpertLayout {
        /// The name given.
        name: String,
    },

    /// A kind name that does not parse.
    #[error(
        "unknown kind {name:?} (expected axes joined by '-' such as tp-dp-cp, or dp-mod-ep, embd, pos-embd, hcp-N, dp-cp-intra, dp-cp-inter, edp-intra, dist-opt-instance)"
    )]
    UnknownKind {
        /// The name given.
        name: String,
    },

    /// A kind that this layout does not have.
    #[error("kind {kind} is not part of the {layout} layout{hint}")]
    KindNotInLayout {
        /// The kind asked for.
        kind: Kind,
        /// The layout's shape.
        layout: LayoutShape,
        /// Extra advice, empty or starting with `": "`.
        hint: &'static str,
    },

    /// A single answer was asked of a kind whose groups overlap (a rank
    /// can be in several groups).
    #[error("groups of kind {kind} overlap (a rank can be in {rounds} of them); use {instead}")]
    OverlappingKind {
        /// The kind.
        kind: Kind,
        /// How many rounds of disjoint groups build it.
        rounds: u32,
        /// The call that answers for overlapping groups.
        instead: &'static str,
    },

    /// A comm-split round past the last one.
    #[error("kind {kind} is built in {rounds} rounds, round {round} does not exist")]
    RoundOutOfRange {
        /// The kind.
        kind: Kind,
        /// The round asked for.
        round: u32,
        /// How many rounds there are.
        rounds: u32,
    },

    /// A rank outside the layout's ranks `first..last` (both included).
    #[error("rank {rank} is outside the layout (ranks {first}..{last}, both included)")]
    RankOutOfRange {
        /// The rank asked about.
        rank: u64,
        /// The first rank of the layout.
        first: u32,
        /// The last rank of the layout.
        last: u64,
    },

    /// A negative rank where a process rank was expected.
    #[error("rank {rank} is negative: no process has it")]
    NegativeRank {
        /// The rank given.
        rank: i64,
    },

    /// A communicator with fewer processes than the layout has ranks.
    #[error(
        "the communicator has {size} processes but the layout needs {needed} (ranks {first}..{last}, both included): start as many processes, or set world_size and rank_offset to fit"
    )]
    CommTooSmall {
        /// Processes in the communicator.
        size: i64,
        /// `rank_offset + world_size`.
        needed: u64,
        /// The layout's first rank.
        first: u32,
        /// The layout's last rank.
        last: u64,
    },

    /// Communicators of a kind were asked for but not built.
    #[error(
        "no communicators of kind {kind} were built; pass it to communicators_of (communicators builds every kind)"
    )]
    KindNotBuilt {
        /// The kind.
        kind: Kind,
    },

    /// A coordinate outside its axis.
    #[error("coordinate {axis} = {value} is outside 0..{last}, both included (the axis has size {size})", last = .size.saturating_sub(1))]
    CoordOutOfRange {
        /// The axis.
        axis: Axis,
        /// The coordinate given.
        value: u32,
        /// The axis size.
        size: u32,
    },

    /// A buffer too short for the members asked for.
    #[error("the buffer holds {len} ranks but {needed} members are to be written")]
    BufferTooSmall {
        /// Members to write.
        needed: u64,
        /// The buffer's length.
        len: usize,
    },

    /// A named argument (a Megatron-LM argument, a mesh or module
    /// specification) whose value is not what it takes.
    #[error("{name} = {value} is not {expected}")]
    InvalidArgument {
        /// The argument's name (`tensor_model_parallel_size`, `--mesh`).
        name: String,
        /// The value given, as written.
        value: String,
        /// What it takes, in words (`an integer from 1 to 4294967295`).
        expected: &'static str,
    },

    /// A Megatron-LM argument that changes its process groups in a way
    /// rank-layout does not model
    /// ([`megatron::Handling::Refused`](crate::megatron::Handling::Refused)):
    /// refused rather than ignored, since the groups printed would not be
    /// Megatron-LM's.
    #[error(
        "{flag} changes Megatron-LM's process groups in a way rank-layout does not model: {why}"
    )]
    UnmodelledArgument {
        /// The flag (`--hybrid-context-parallel`).
        flag: &'static str,
        /// What it does to the groups.
        why: &'static str,
    },

    /// A weight-shard count (`tensor_parallel_num_weight_shards`, or the
    /// expert one) below the tensor-parallel size it is divided by
    /// (Megatron-Core's `resolve_tensor_parallel_weight_shards` refuses it
    /// with the same words).
    #[error("{name} ({shards}) must be >= {tp_name} ({tp})")]
    WeightShardsBelowTp {
        /// `tensor_parallel_num_weight_shards` or `expert_tensor_parallel_num_weight_shards`.
        name: &'static str,
        /// The shard count given.
        shards: u32,
        /// `tensor_model_parallel_size` or `expert_tensor_parallel_size`.
        tp_name: &'static str,
        /// That size.
        tp: u32,
    },

    /// A weight-shard count that the tensor-parallel size does not divide.
    #[error("{name} ({shards}) must be divisible by {tp_name} ({tp})")]
    WeightShardsNotDivisible {
        /// `tensor_parallel_num_weight_shards` or `expert_tensor_parallel_num_weight_shards`.
        name: &'static str,
        /// The shard count given.
        shards: u32,
        /// `tensor_model_parallel_size` or `expert_tensor_parallel_size`.
        tp_name: &'static str,
        /// That size.
        tp: u32,
    },

    /// torchrun's process count (`--nproc-per-node` times `--nnodes`) and
    /// the world size given disagree.
    #[error(
        "world_size ({world_size}) disagrees with torchrun's --nproc-per-node {nproc_per_node} --nnodes {nnodes} ({ranks} ranks)"
    )]
    LaunchMismatch {
        /// The world size given.
        world_size: u32,
        /// torchrun's processes per node.
        nproc_per_node: u32,
        /// torchrun's nodes.
        nnodes: u32,
        /// Their product.
        ranks: u64,
    },

    /// Memory for members to collect could not be allocated (a group or
    /// a table far larger than the machine holds).
    #[error(
        "cannot allocate {bytes} bytes for {members} members (collect fewer, or fill a buffer of yours)"
    )]
    OutOfMemory {
        /// The members to collect.
        members: u64,
        /// The bytes they need.
        bytes: u64,
    },

    /// A mesh dim (or view, or flatten) name that is not a name.
    #[error(
        "{what} name {name:?} is not a name (letters, digits and _, not starting with a digit)"
    )]
    BadName {
        /// What is named: `dim`, `view` or `flatten`.
        what: &'static str,
        /// The name given.
        name: String,
    },

    /// A name given twice in one mesh (dims, views and flattens share one
    /// namespace per factorisation).
    #[error("{name} is named twice in {place}")]
    DuplicateName {
        /// The name.
        name: String,
        /// Where: `the mesh`, `view expert`, ...
        place: String,
    },

    /// A mesh (or a view) of no dims: `Mesh::new([])`, `--mesh ""`.
    #[error("{place} has no dims: give at least one (one rank is dp=1)")]
    NoDims {
        /// `the mesh`, `view expert`.
        place: String,
    },

    /// A mesh dim of size 0.
    #[error("dim {name} has size 0 (every dim needs at least 1)")]
    ZeroDim {
        /// The dim.
        name: String,
    },

    /// More dims than a mesh holds.
    #[error("{count} dims in {place}, at most {max} are supported")]
    TooManyDims {
        /// How many were given.
        count: usize,
        /// Where.
        place: String,
        /// The most supported.
        max: usize,
    },

    /// A name that is not a dim, a view or a flatten of the mesh.
    #[error("unknown {what} {name:?} in {place} (known: {known})")]
    UnknownName {
        /// `dim`, `view` or `dim set`.
        what: &'static str,
        /// The name given.
        name: String,
        /// Where it was looked up.
        place: String,
        /// The names there are.
        known: String,
    },

    /// A view whose dims do not cover the mesh's ranks.
    #[error("view {view} has {view_world} ranks ({dims}), the mesh {world}")]
    ViewWorld {
        /// The view.
        view: String,
        /// Its dims, `name=size` joined.
        dims: String,
        /// Its number of ranks.
        view_world: u64,
        /// The mesh's.
        world: u32,
    },

    /// A dim a view shares with the mesh enumerates other ranks there.
    #[error(
        "view {view} shares dim {dim} with the mesh, but it is size {view_size} stride {view_stride} there and size {size} stride {stride} in the mesh: its groups differ"
    )]
    SharedDimDiffers {
        /// The view.
        view: String,
        /// The dim.
        dim: String,
        /// Size and stride in the mesh.
        size: u32,
        /// Stride in the mesh.
        stride: u32,
        /// Size in the view.
        view_size: u32,
        /// Stride in the view.
        view_stride: u32,
    },

    /// A rank map that is not a permutation of the mesh's positions.
    #[error("rank_map {problem}")]
    BadRankMap {
        /// What is wrong, with the values.
        problem: String,
    },

    /// A host table (see [`machine::Hosts`](crate::machine::Hosts)) that
    /// does not read: the line (1-based), its text and what is wrong.
    #[error("host table, line {line} ({text:?}): {problem}")]
    #[non_exhaustive]
    BadHostTable {
        /// The line, counted from 1.
        line: usize,
        /// The line's text.
        text: String,
        /// What is wrong, with the values.
        problem: String,
    },

    /// No placement of the job on the hosts keeps what it must (see
    /// [`machine::place`](crate::machine::place)): why, with the sizes.
    #[error("no placement: {problem}")]
    #[non_exhaustive]
    NoPlacement {
        /// Why, with the sizes that would fit where there are some.
        problem: String,
    },

    /// A list of ranks (`200-203,517`) with an item that is not a rank or
    /// a range (see [`relayout::parse_rank_list`](crate::relayout::parse_rank_list)).
    #[error("rank list item {item:?}: {problem}")]
    #[non_exhaustive]
    BadRankList {
        /// The item, as written.
        item: String,
        /// What is wrong with it.
        problem: String,
    },

    /// No re-layout of the job after the failure under the policy asked
    /// for (see [`relayout::relayout`](crate::relayout::relayout)): why,
    /// with the sizes.
    #[error("no re-layout: {problem}")]
    #[non_exhaustive]
    NoRelayout {
        /// Why, with the sizes.
        problem: String,
    },

    /// A mesh, view or flatten specification that does not parse.
    #[error("{what} {text:?}: {problem}")]
    BadSpec {
        /// `--mesh`, `--view`, `--flatten`, a config key.
        what: &'static str,
        /// The text given.
        text: String,
        /// What is wrong.
        problem: String,
    },

    /// A mesh was asked of a layout that is not one grid.
    #[error(
        "the {layout} layout is two grids joined by their pipelines, not one mesh: ask the layout itself"
    )]
    NotAMesh {
        /// The layout's shape.
        layout: LayoutShape,
    },

    /// Modules were asked for with none.
    #[error("no modules: give at least one")]
    NoModules,

    /// A module's mesh has a dim bridges do not know.
    #[error("module {module} has dim {dim:?}: a module's dims are tp, gtp, cp, dp and pp")]
    ModuleDim {
        /// The module.
        module: String,
        /// The dim.
        dim: String,
    },

    /// A module's span neither follows the previous one nor coincides with
    /// the others.
    #[error(
        "module {module} holds ranks {first}..{last}, but {}",
        if *colocated { format!("colocated modules all hold the same ranks, from {expected}, as many as the first") } else { format!("its span must start at rank {expected}, right after the previous module's") }
    )]
    ModuleSpans {
        /// The module.
        module: String,
        /// Its first rank.
        first: u64,
        /// Its last rank.
        last: u64,
        /// Where it had to start.
        expected: u64,
        /// Whether the modules are colocated.
        colocated: bool,
    },

    /// The edges between modules make a cycle.
    #[error("the module edges make a cycle: {cycle}")]
    ModuleCycle {
        /// The cycle, `a -> b -> a`.
        cycle: String,
    },

    /// An edge between modules whose data lane counts do not divide.
    #[error(
        "edge {src} -> {dst}: {src} has {src_lanes} data lanes (gtp*dp) and {dst} {dst_lanes}; one count must divide the other"
    )]
    LanesNotPaired {
        /// The source module.
        src: String,
        /// The destination module.
        dst: String,
        /// The source's lanes.
        src_lanes: u32,
        /// The destination's lanes.
        dst_lanes: u32,
    },

    /// A bridge communicator kind an edge does not build.
    #[error("edge {src} -> {dst} builds no {kind} groups")]
    NotInBridge {
        /// The kind.
        kind: &'static str,
        /// The source module.
        src: String,
        /// The destination module.
        dst: String,
    },

    /// A configuration that does not parse (JSON, CLI value).
    #[error("invalid configuration: {message}")]
    InvalidConfig {
        /// What the parser said.
        message: String,
    },

    /// A tensor's dim of size 0.
    #[error("tensor {tensor}: dim {dim} has size 0 (every dim must be at least 1)")]
    ZeroTensorDim {
        /// The tensor's name.
        tensor: String,
        /// The dim.
        dim: usize,
    },

    /// A tensor's description that cannot hold (a dim index past its
    /// shape, two splits of one dim, too many dims, ...).
    #[error("tensor {tensor}: {problem}")]
    BadTensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong, naming the values.
        problem: String,
    },

    /// A tensor's dim that a side cannot cut into equal pieces.
    #[error(
        "tensor {tensor}: dim {dim} ({size}) is not divisible by {divisor} ({what}) on the {side} side"
    )]
    TensorNotDivisible {
        /// The tensor's name.
        tensor: String,
        /// The dim.
        dim: usize,
        /// The length cut (the dim, a block of it, or a rank's part).
        size: u64,
        /// The number of pieces.
        divisor: u64,
        /// What cuts it (`tp 4`, `tp 4 x stride 2`, `gtp_remat 2`, ...).
        what: String,
        /// `from` or `to`.
        side: &'static str,
    },

    /// A tensor's layer past the model's layers.
    #[error("tensor {tensor}: layer {layer} is out of range (the model has {num_layers} layers)")]
    LayerOutOfRange {
        /// The tensor's name.
        tensor: String,
        /// The layer.
        layer: u64,
        /// The model's layers.
        num_layers: u32,
    },

    /// A tensor's expert past the model's experts.
    #[error(
        "tensor {tensor}: expert {expert} is out of range (the model has {num_experts} experts)"
    )]
    ExpertOutOfRange {
        /// The tensor's name.
        tensor: String,
        /// The expert.
        expert: u64,
        /// The model's experts.
        num_experts: u32,
    },

    /// The layers cannot be placed on a side's pipeline stages as asked.
    #[error("{problem}{}", if side.is_empty() { String::new() } else { format!(" on the {side} side") })]
    LayerSplit {
        /// `from` or `to` (empty: no side named).
        side: &'static str,
        /// What is wrong, naming the values (`num_layers (10) is not
        /// divisible by pp = 4 for the even split`).
        problem: String,
    },

    /// A layout a reshard cannot use.
    #[error("the {side} layout: {problem}")]
    ReshardLayout {
        /// `from` or `to`.
        side: &'static str,
        /// Why.
        problem: String,
    },

    /// A process in neither side of a reshard.
    #[error("process {process} is in neither layout (from: {from}; to: {to})")]
    NotInReshard {
        /// The process (rank) asked about.
        process: u64,
        /// The `from` side's processes, as text.
        from: String,
        /// The `to` side's processes, as text.
        to: String,
    },

    /// A source shard every holder of which is dead.
    #[error("tensor {tensor}: no surviving process holds its source shard {shard}")]
    NoSurvivingHolder {
        /// The tensor's name.
        tensor: String,
        /// The shard (`tp 1, pp 0`).
        shard: String,
    },

    /// A process's buffers or communicator do not fit its part of a
    /// reshard plan (the MPI executor, `mpi::reshard_buffers`).
    #[error("process {process}: {problem}")]
    ReshardBuffers {
        /// The process at fault.
        process: u64,
        /// What does not fit.
        problem: String,
    },

    /// The two sides of a reshard describe different models.
    #[error("{what} differs between the sides: {from} (from) and {to} (to)")]
    ModelMismatch {
        /// What differs (`tensor embedding.word_embeddings.weight's shape`).
        what: String,
        /// The `from` side's value.
        from: String,
        /// The `to` side's value.
        to: String,
    },

    /// A tensors file that does not read.
    #[error("invalid tensors file: {message}")]
    BadTensorsFile {
        /// What is wrong, naming the key or the tensor.
        message: String,
    },

    /// A model argument missing or of the wrong value.
    #[error("model argument {name}: {problem}")]
    ModelArgument {
        /// The argument (`num_layers`).
        name: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// An inference shard (`--inference-shards`) that Megatron-Core 0.19
    /// refuses: its number among the shards, from 0, and why.
    #[error("inference shard {shard}: {problem}")]
    InferenceShard {
        /// The shard's number, from 0 (empty pieces of the text are not
        /// shards).
        shard: usize,
        /// What is wrong with it.
        problem: ShardProblem,
    },

    /// An `--inference-shards` text with no shard in it.
    #[error(
        "--inference-shards names no shard (write key=value entries, shards separated by + or ;)"
    )]
    NoInferenceShards,

    /// Inference shards that do not partition the world exactly.
    #[error(
        "the inference shards hold {} ranks, but the world has {world_size}: they must partition it exactly",
        sum_ranks(.shard_ranks)
    )]
    InferenceShardsWorld {
        /// Each shard's ranks, `tp * pp * dp`.
        shard_ranks: Vec<u128>,
        /// The world size.
        world_size: u32,
    },

    /// Megatron-LM arguments with `--inference-shards`, asked for one
    /// configuration: the shards are layouts of their own.
    #[error(
        "--inference-shards partitions the world into inference shards, each a layout of its own: read them as shards (MegatronArgs::inference_shards; Python: InferenceShards.from_megatron_args), not as one configuration"
    )]
    InferenceShardsNotOneLayout,
}

/// The ranks of the shards: `4`, or each shard's and their sum, `2 + 2 = 4`.
fn sum_ranks(ranks: &[u128]) -> String {
    let total: u128 = ranks.iter().sum();
    if ranks.len() < 2 {
        return total.to_string();
    }
    let each: Vec<String> = ranks.iter().map(u128::to_string).collect();
    format!("{} = {total}", each.join(" + "))
}

/// The crate's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which consistency condition of distributed-optimizer instances fails
/// (see [`Error::DistOptInconsistent`] and the
/// [semantics](crate::semantics)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DistOptProblem {
    /// A dp-cp-intra group spans several optimizer instances.
    IntraSpansInstances,
    /// A dp-cp-inter group leaves its dp-cp group (it would mix tensor or
    /// pipeline shards).
    InterLeavesDpCp,
    /// The dp-cp-inter groups are not the strided slices of the dp-cp groups.
    InterNotStrided,
}

impl std::fmt::Display for DistOptProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DistOptProblem::IntraSpansInstances => {
                "a dp-cp-intra group would span several optimizer instances"
            }
            DistOptProblem::InterLeavesDpCp => {
                "a dp-cp-inter group would leave its dp-cp group and mix tensor or pipeline shards"
            }
            DistOptProblem::InterNotStrided => {
                "the dp-cp-inter groups would not be the strided slices of the dp-cp groups"
            }
        })
    }
}

/// Why Megatron-Core refuses an inference shard (see
/// [`Error::InferenceShard`]). The text read is quoted as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShardProblem {
    /// An entry without `=`.
    NotKeyValue {
        /// The entry, stripped.
        entry: String,
    },
    /// A key other than `tp`, `pp`, `ep`, `expt_tp`, `dp`, `cp`, `role`.
    UnknownKey {
        /// The key, stripped.
        key: String,
    },
    /// A role other than `prefill` or `decode` (in any case).
    UnknownRole {
        /// The role as written.
        role: String,
    },
    /// A size that Python's `int()` does not read.
    NotAnInteger {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
    },
    /// A size below 1 or beyond 4294967295.
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
    },
    /// `cp` other than 1: inference shards have no context parallelism.
    ContextParallel {
        /// The value as written.
        cp: String,
    },
    /// `expt_tp * ep * pp` does not divide the shard's `tp * pp * dp` ranks.
    ExpertGrid {
        /// The shard's ranks.
        ranks: u128,
        /// Its expert tensor-parallel size.
        expt_tp: u32,
        /// Its expert-parallel size.
        ep: u32,
        /// Its pipeline-parallel size.
        pp: u32,
    },
    /// With the tp-pp-dp mapping, the expert grid's pipelines differ from
    /// the decoder grid's: their strides `expt_tp * ep` and `tp` differ
    /// while `pp > 1`.
    Pipelines {
        /// The decoder's tensor-parallel size (its pp stride).
        tp: u32,
        /// The expert tensor-parallel size.
        expt_tp: u32,
        /// The expert-parallel size.
        ep: u32,
        /// The pipeline-parallel size.
        pp: u32,
    },
}

impl std::fmt::Display for ShardProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardProblem::NotKeyValue { entry } => write!(f, "entry {entry:?} is not key=value"),
            ShardProblem::UnknownKey { key } => write!(
                f,
                "unknown key {key:?} (expected tp, pp, ep, expt_tp, dp, cp or role)"
            ),
            ShardProblem::UnknownRole { role } => {
                write!(f, "unknown role {role:?} (expected prefill or decode)")
            }
            ShardProblem::NotAnInteger { key, value } => {
                write!(f, "{key} = {value:?} is not an integer")
            }
            ShardProblem::OutOfRange { key, value } => {
                write!(f, "{key} = {value} is not a size from 1 to 4294967295")
            }
            ShardProblem::ContextParallel { cp } => write!(
                f,
                "cp = {cp}, but inference shards have no context parallelism (cp must be 1)"
            ),
            ShardProblem::ExpertGrid {
                ranks,
                expt_tp,
                ep,
                pp,
            } => write!(
                f,
                "expt_tp*ep*pp = {expt_tp}*{ep}*{pp} does not divide its tp*pp*dp = {ranks} ranks (the expert grid must tile the shard)"
            ),
            ShardProblem::Pipelines {
                tp,
                expt_tp,
                ep,
                pp,
            } => write!(
                f,
                "with --use-tp-pp-dp-mapping its expert grid's pipelines (stride expt_tp*ep = {expt_tp}*{ep}) differ from its decoder grid's (stride tp = {tp}) when pp = {pp} > 1: make expt_tp*ep equal tp"
            ),
        }
    }
}
