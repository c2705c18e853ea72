//! How one side shards one tensor: which coordinates of a rank name its
//! shard (the shard key), the shard's runs on every dim, and the ranks
//! holding a shard (its replicas), enumerated and indexed from
//! coordinates in O(axes).

use crate::cast::low32;
use arrayvec::ArrayVec;

use crate::coord::{Coord, ExpertCoord, Part};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::reshard::dims::{DimSplit, Indivisible, Run};
use crate::reshard::layers::LayerMap;
use crate::reshard::region::MAX_DIMS;
use crate::reshard::tensor::{Blocks, ExpertRef, LayerRef, Tensor};

/// A side's sizes, and the arithmetic of its coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub tp: u32,
    pub gtp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub etp: u32,
    pub egtp: u32,
    pub ep: u32,
    pub edp: u32,
    /// The nested expert layout (its expert grid keeps cp).
    nested: bool,
    /// Whether cp comes before (is faster than) dp in the order.
    cp_first: bool,
    /// Distributed-optimizer instances.
    instances: u32,
}

/// A rank's coordinates in both grids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Coords {
    pub tp: u32,
    pub gtp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub etp: u32,
    pub egtp: u32,
    pub ep: u32,
    pub edp: u32,
}

impl Geometry {
    /// The geometry of `layout`.
    ///
    /// # Errors
    /// [`Error::ReshardLayout`] for an encoder + decoder layout.
    pub fn new(layout: &Layout, side: &'static str) -> Result<Geometry> {
        if layout.has_encoder() {
            return Err(Error::ReshardLayout {
                side,
                problem:
                    "an encoder + decoder layout: reshard a decoder's (or a single grid's) tensors"
                        .into(),
            });
        }
        let s = layout.sizes();
        let order = layout.config().order.axes();
        let at = |a: crate::axis::Axis| order.iter().position(|x| *x == a).unwrap_or(0);
        Ok(Geometry {
            tp: s.tp,
            gtp: s.gtp_remat,
            cp: s.cp,
            dp: s.dp,
            pp: s.pp,
            etp: s.etp,
            egtp: s.egtp_remat,
            ep: s.ep,
            edp: s.edp,
            nested: layout.shape() == crate::layout_shape::LayoutShape::Nested,
            cp_first: at(crate::axis::Axis::Cp) < at(crate::axis::Axis::Dp),
            instances: layout.dist_opt_instances().max(1),
        })
    }

    /// The coordinates of `rank`.
    pub fn coords(layout: &Layout, rank: u32) -> Result<Coords> {
        let p = layout.placement(rank)?;
        Ok(Coords {
            tp: p.coord.tp,
            gtp: p.gtp_remat,
            cp: p.coord.cp,
            dp: p.coord.dp,
            pp: p.coord.pp,
            etp: p.expert.etp,
            egtp: p.expert.egtp_remat,
            ep: p.expert.ep,
            edp: p.expert.edp,
        })
    }

    /// The size of the distributed optimizer's group of a dense (expert)
    /// tensor: `dp-cp` (`edp`, `dp-cp-mod-ep` nested), all instances.
    fn dist_opt_group(&self, expert: bool) -> u64 {
        match (expert, self.nested) {
            (false, _) => u64::from(self.cp) * u64::from(self.dp),
            (true, false) => u64::from(self.edp),
            (true, true) => u64::from(self.cp) * u64::from(self.edp),
        }
    }

    /// One instance's slice of that group: the shards of a `dp_dim`.
    pub fn dist_opt_shards(&self, expert: bool) -> u64 {
        self.dist_opt_group(expert) / u64::from(self.instances)
    }

    /// `(a, b)` with `a` the faster of cp and the data axis `dp`: the
    /// position in a group over both is `a + size(a) * b`.
    fn position(&self, cp: u32, data: u32, data_size: u32) -> u64 {
        if self.cp_first {
            u64::from(cp) + u64::from(self.cp) * u64::from(data)
        } else {
            u64::from(data) + u64::from(data_size) * u64::from(cp)
        }
    }

    /// The inverse of [`position`](Self::position): `(cp, data)`.
    fn unposition(&self, p: u64, data_size: u32) -> (u32, u32) {
        let (fast, slow) = if self.cp_first {
            (u64::from(self.cp), 0)
        } else {
            (u64::from(data_size), 1)
        };
        let (a, b) = (p % fast.max(1), p / fast.max(1));
        // a < fast and b < the other size, both u32.
        let (a, b) = (low32(a), low32(b));
        if slow == 0 { (a, b) } else { (b, a) }
    }

    /// A rank's position in the distributed optimizer's group (all
    /// instances).
    fn dist_opt_position(&self, c: &Coords, expert: bool) -> u64 {
        match (expert, self.nested) {
            (false, _) => self.position(c.cp, c.dp, self.dp),
            (true, false) => u64::from(c.edp),
            (true, true) => self.position(c.cp, c.edp, self.edp),
        }
    }
}

/// Which stages hold a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stages {
    Any,
    One(u32),
    /// The first and the last (two stages, pp > 1).
    Ends,
}

/// The set of ranks of a side holding one shard: the coordinates they
/// share. Two tensors sharded alike hold their shards on the same ranks,
/// so this is what caches are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Holding {
    expert: bool,
    stages: Stages,
    ep: u32,
    tp: Option<u32>,
    gtp: Option<u32>,
    dps: Option<u32>,
}

/// The shard key: the value of every split factor (0 for those not split).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Key {
    pub stage: u32,
    pub ep: u32,
    pub tp: u32,
    pub gtp: u32,
    pub dps: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StageRule {
    Fixed(Stages),
    Split,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EpRule {
    Dense,
    Fixed(u32),
    Split,
}

/// A free axis of a replica space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Free {
    Tp,
    Gtp,
    Cp,
    Data,
    Instance,
    Stage,
    Ends,
}

/// The ranks holding one shard, as a mixed-radix space over its free axes
/// (first fastest): index <-> rank in O(axes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replicas {
    holding: Holding,
    axes: ArrayVec<(Free, u32), 7>,
    len: u64,
}

impl Replicas {
    /// How many ranks hold the shard.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The index of the rank at `c` (which must hold the shard).
    pub fn index(&self, g: &Geometry, c: &Coords) -> u64 {
        let e = self.holding.expert;
        let mut index = 0u64;
        let mut weight = 1u64;
        for &(axis, size) in &self.axes {
            let v = match axis {
                Free::Tp => {
                    if e {
                        c.etp
                    } else {
                        c.tp
                    }
                }
                Free::Gtp => {
                    if e {
                        c.egtp
                    } else {
                        c.gtp
                    }
                }
                Free::Cp => c.cp,
                Free::Data => {
                    if e {
                        c.edp
                    } else {
                        c.dp
                    }
                }
                Free::Instance => {
                    let shards = g.dist_opt_shards(e).max(1);
                    // Below the instances, a u32 size.
                    low32(g.dist_opt_position(c, e) / shards)
                }
                Free::Stage => c.pp,
                Free::Ends => u32::from(c.pp != 0),
            };
            index += weight * u64::from(v);
            weight *= u64::from(size);
        }
        index
    }

    /// The rank of replica `index` (below [`len`](Self::len)).
    pub fn rank(&self, layout: &Layout, g: &Geometry, index: u64) -> Result<u32> {
        let h = &self.holding;
        let e = h.expert;
        let mut c = Coords {
            tp: h.tp.unwrap_or(0),
            gtp: h.gtp.unwrap_or(0),
            pp: match h.stages {
                Stages::One(s) => s,
                _ => 0,
            },
            ..Coords::default()
        };
        let mut instance = 0u64;
        let mut rest = index;
        for &(axis, size) in &self.axes {
            let size64 = u64::from(size).max(1);
            // The remainder is below a u32 size.
            let v = low32(rest % size64);
            rest /= size64;
            match axis {
                Free::Tp => c.tp = v,
                Free::Gtp => c.gtp = v,
                Free::Cp => c.cp = v,
                Free::Data => c.dp = v,
                Free::Instance => instance = u64::from(v),
                Free::Stage => c.pp = v,
                Free::Ends => c.pp = if v == 0 { 0 } else { g.pp.saturating_sub(1) },
            }
        }
        if let Some(q) = h.dps {
            let p = instance * g.dist_opt_shards(e) + u64::from(q);
            let (cp, data) = if e && !g.nested {
                (0, low32(p))
            } else {
                g.unposition(p, if e { g.edp } else { g.dp })
            };
            c.cp = cp;
            c.dp = data;
        }
        if e {
            let expert = ExpertCoord {
                etp: c.tp,
                ep: h.ep,
                edp: c.dp,
                pp: c.pp,
                egtp_remat: c.gtp,
            };
            layout.expert_rank(Part::Decoder, expert, c.cp)
        } else {
            let coord = Coord {
                tp: c.tp,
                cp: c.cp,
                dp: c.dp,
                pp: c.pp,
            };
            layout.rank_with_gtp_remat(Part::Decoder, coord, c.gtp)
        }
    }
}

impl Holding {
    /// Whether the rank at `c` holds the shard.
    pub fn holds(&self, g: &Geometry, c: &Coords) -> bool {
        let e = self.expert;
        let stage = match self.stages {
            Stages::Any => true,
            Stages::One(s) => c.pp == s,
            Stages::Ends => c.pp == 0 || c.pp + 1 == g.pp,
        };
        let (tp, gtp) = if e { (c.etp, c.egtp) } else { (c.tp, c.gtp) };
        stage
            && (!e || c.ep == self.ep)
            && self.tp.is_none_or(|v| v == tp)
            && self.gtp.is_none_or(|v| v == gtp)
            && self.dps.is_none_or(|v| {
                let shards = g.dist_opt_shards(e).max(1);
                g.dist_opt_position(c, e) % shards == u64::from(v)
            })
    }

    /// The ranks holding the shard.
    pub fn replicas(&self, g: &Geometry) -> Replicas {
        let e = self.expert;
        let mut axes: ArrayVec<(Free, u32), 7> = ArrayVec::new();
        let mut push = |a: Free, size: u32| {
            if size > 1 {
                let _ = axes.try_push((a, size));
            }
        };
        if self.tp.is_none() {
            push(Free::Tp, if e { g.etp } else { g.tp });
        }
        if self.gtp.is_none() {
            push(Free::Gtp, if e { g.egtp } else { g.gtp });
        }
        if self.dps.is_some() {
            push(Free::Instance, g.instances);
        } else {
            if !e || g.nested {
                push(Free::Cp, g.cp);
            }
            push(Free::Data, if e { g.edp } else { g.dp });
        }
        match self.stages {
            Stages::Any => push(Free::Stage, g.pp),
            Stages::Ends => push(Free::Ends, if g.pp > 1 { 2 } else { 1 }),
            Stages::One(_) => {}
        }
        let len = axes.iter().map(|(_, s)| u64::from(*s)).product();
        Replicas {
            holding: *self,
            axes,
            len,
        }
    }

    /// The shard in words, for messages (`tp 1, pp 0`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.stages {
            Stages::One(s) => parts.push(format!("pp {s}")),
            Stages::Ends => parts.push("the first and last stages".to_string()),
            Stages::Any => {}
        }
        if self.expert {
            parts.push(format!("ep {}", self.ep));
        }
        let (tp, gtp) = if self.expert {
            ("etp", "egtp_remat")
        } else {
            ("tp", "gtp_remat")
        };
        if let Some(v) = self.tp {
            parts.push(format!("{tp} {v}"));
        }
        if let Some(v) = self.gtp {
            parts.push(format!("{gtp} {v}"));
        }
        if let Some(v) = self.dps {
            parts.push(format!("dist-opt shard {v}"));
        }
        if parts.is_empty() {
            "(the whole tensor)".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// How one side shards one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sharding {
    expert: bool,
    stage: StageRule,
    ep: EpRule,
    pp_dim: Option<usize>,
    ep_dim: Option<usize>,
    tp_dim: Option<usize>,
    gtp_dim: Option<usize>,
    dps_dim: Option<usize>,
    dps_n: u64,
    dims: ArrayVec<DimSplit, MAX_DIMS>,
}

impl Sharding {
    /// The sharding of `t` on a side of geometry `g` and layer map `map`,
    /// in a model of `num_experts` experts.
    ///
    /// # Errors
    /// [`Error::TensorNotDivisible`] naming the dim that a side's split
    /// does not cut evenly; [`Error::ReshardLayout`] for experts that ep
    /// does not divide.
    pub fn new(
        t: &Tensor,
        g: &Geometry,
        map: &LayerMap,
        num_layers: u32,
        num_experts: u32,
        side: &'static str,
    ) -> Result<Sharding> {
        let expert = t.expert.is_some();
        let not_divisible = |dim: usize, e: Indivisible, what: String| Error::TensorNotDivisible {
            tensor: t.name.clone(),
            dim,
            size: e.size,
            divisor: e.divisor,
            what,
            side,
        };
        let mut dims: ArrayVec<DimSplit, MAX_DIMS> =
            t.shape.iter().map(|len| DimSplit::whole(*len)).collect();
        let set = |dims: &mut ArrayVec<DimSplit, MAX_DIMS>, dim: usize, split: DimSplit| {
            if let Some(slot) = dims.get_mut(dim) {
                *slot = split;
            }
        };
        let len = |dim: usize| t.shape.get(dim).copied().unwrap_or(1);
        let last = g.pp.saturating_sub(1);
        let stage = match (t.pp_dim, t.layer) {
            (Some(dim), _) => {
                let rows = len(dim) / u64::from(num_layers.max(1));
                let lens: Vec<u64> = map.chunks().iter().map(|c| u64::from(*c) * rows).collect();
                set(&mut dims, dim, DimSplit::chunks(&lens, u64::from(g.pp)));
                StageRule::Split
            }
            (None, LayerRef::Every) => StageRule::Fixed(Stages::Any),
            (None, LayerRef::Layer(l)) => {
                StageRule::Fixed(Stages::One(map.stage_of(l).unwrap_or(0)))
            }
            (None, LayerRef::First) => StageRule::Fixed(Stages::One(0)),
            (None, LayerRef::Last) => StageRule::Fixed(Stages::One(last)),
            (None, LayerRef::Ends) if g.pp > 1 => StageRule::Fixed(Stages::Ends),
            (None, LayerRef::Ends) => StageRule::Fixed(Stages::One(0)),
        };
        let mut ep_dim = None;
        let ep = match t.expert {
            None => EpRule::Dense,
            Some(e) => {
                if num_experts % g.ep != 0 {
                    return Err(Error::ReshardLayout {
                        side,
                        problem: format!(
                            "the model's {num_experts} experts are not divisible by ep = {}",
                            g.ep
                        ),
                    });
                }
                match e {
                    ExpertRef::One(e) => EpRule::Fixed(e / (num_experts / g.ep).max(1)),
                    ExpertRef::Fused { dim } => {
                        let split = DimSplit::strided(len(dim), 1, u64::from(g.ep))
                            .map_err(|e| not_divisible(dim, e, format!("ep {}", g.ep)))?;
                        set(&mut dims, dim, split);
                        ep_dim = Some(dim);
                        EpRule::Split
                    }
                }
            }
        };
        let (tp_n, gtp_n, tp_name, gtp_name) = if expert {
            (g.etp, g.egtp, "etp", "expert_gtp_remat")
        } else {
            (g.tp, g.gtp, "tp", "gtp_remat")
        };
        let tp_dim = t.tp.as_ref().map(|s| s.dim);
        if let Some(tp) = &t.tp {
            let split = match &tp.blocks {
                Blocks::Stride(s) => {
                    DimSplit::strided(len(tp.dim), *s, u64::from(tp_n)).map_err(|e| {
                        let what = if *s == 1 {
                            format!("{tp_name} {tp_n}")
                        } else {
                            format!("{tp_name} {tp_n} x stride {s}")
                        };
                        not_divisible(tp.dim, e, what)
                    })?
                }
                Blocks::Sizes(sizes) => DimSplit::blocks(sizes, u64::from(tp_n)).map_err(|e| {
                    not_divisible(tp.dim, e, format!("{tp_name} {tp_n}, a block of tp_sizes"))
                })?,
            };
            set(&mut dims, tp.dim, split);
        }
        let gtp_dim = (t.gtp && gtp_n > 1).then_some(0usize);
        let dps_n = g.dist_opt_shards(expert);
        let dps_dim = t.dp_dim;
        for (dim, split) in dims.iter_mut().enumerate() {
            let g_cut = if gtp_dim == Some(dim) {
                u64::from(gtp_n)
            } else {
                1
            };
            let d_cut = if dps_dim == Some(dim) { dps_n } else { 1 };
            if g_cut * d_cut > 1 {
                let what = match (g_cut > 1, d_cut > 1) {
                    (true, true) => {
                        format!("{gtp_name} {g_cut} x the distributed optimizer's {d_cut} shards")
                    }
                    (true, false) => format!("{gtp_name} {g_cut}"),
                    _ => format!("the distributed optimizer's {d_cut} shards"),
                };
                *split = split
                    .clone()
                    .with_cuts(g_cut * d_cut)
                    .map_err(|e| not_divisible(dim, e, format!("{what}, of a rank's part")))?;
            }
        }
        Ok(Sharding {
            expert,
            stage,
            ep,
            pp_dim: t.pp_dim,
            ep_dim,
            tp_dim,
            gtp_dim,
            dps_dim,
            dps_n: dps_n.max(1),
            dims,
        })
    }

    /// The dims.
    pub fn dims(&self) -> &[DimSplit] {
        &self.dims
    }

    /// The key of the shard the rank at `c` holds, `None` when it holds
    /// none.
    pub fn key_of(&self, g: &Geometry, c: &Coords) -> Option<Key> {
        let mut key = Key::default();
        match self.stage {
            StageRule::Split => key.stage = c.pp,
            StageRule::Fixed(Stages::Any) => {}
            StageRule::Fixed(Stages::One(s)) => {
                if c.pp != s {
                    return None;
                }
            }
            StageRule::Fixed(Stages::Ends) => {
                if c.pp != 0 && c.pp + 1 != g.pp {
                    return None;
                }
            }
        }
        match self.ep {
            EpRule::Dense => {}
            EpRule::Fixed(owner) => {
                if c.ep != owner {
                    return None;
                }
            }
            EpRule::Split => key.ep = c.ep,
        }
        let (tp, gtp) = if self.expert {
            (c.etp, c.egtp)
        } else {
            (c.tp, c.gtp)
        };
        if self.tp_dim.is_some() {
            key.tp = tp;
        }
        if self.gtp_dim.is_some() {
            key.gtp = gtp;
        }
        if self.dps_dim.is_some() {
            // Below the shards, a u32 size.
            key.dps = low32(g.dist_opt_position(c, self.expert) % self.dps_n);
        }
        Some(key)
    }

    /// The ranks holding the shard `key`, as a predicate.
    pub fn holding(&self, key: &Key) -> Holding {
        Holding {
            expert: self.expert,
            stages: match self.stage {
                StageRule::Split => Stages::One(key.stage),
                StageRule::Fixed(s) => s,
            },
            ep: match self.ep {
                EpRule::Fixed(o) => o,
                EpRule::Split => key.ep,
                EpRule::Dense => 0,
            },
            tp: self.tp_dim.map(|_| key.tp),
            gtp: self.gtp_dim.map(|_| key.gtp),
            dps: self.dps_dim.map(|_| key.dps),
        }
    }

    /// The part and cut of `key` on `dim`.
    fn part_cut(&self, key: &Key, dim: usize) -> (u64, u64) {
        let part = if self.pp_dim == Some(dim) {
            key.stage
        } else if self.ep_dim == Some(dim) {
            key.ep
        } else if self.tp_dim == Some(dim) {
            key.tp
        } else {
            0
        };
        let mut cut = 0u64;
        if self.gtp_dim == Some(dim) {
            cut = u64::from(key.gtp);
        }
        if self.dps_dim == Some(dim) {
            cut = cut * self.dps_n + u64::from(key.dps);
        }
        (u64::from(part), cut)
    }

    /// Sets `key`'s factors from a piece's part and cut on `dim`.
    pub fn assemble(&self, key: &mut Key, dim: usize, part: u64, cut: u64) {
        // Parts and cuts are below u32 sizes.
        let part = low32(part);
        if self.pp_dim == Some(dim) {
            key.stage = part;
        } else if self.ep_dim == Some(dim) {
            key.ep = part;
        } else if self.tp_dim == Some(dim) {
            key.tp = part;
        }
        match (self.gtp_dim == Some(dim), self.dps_dim == Some(dim)) {
            (true, true) => {
                key.gtp = low32(cut / self.dps_n);
                key.dps = low32(cut % self.dps_n);
            }
            (true, false) => key.gtp = low32(cut),
            (false, true) => key.dps = low32(cut),
            (false, false) => {}
        }
    }

    /// The runs of shard `key` on every dim.
    pub fn runs(&self, key: &Key) -> ArrayVec<Vec<Run>, MAX_DIMS> {
        self.dims
            .iter()
            .enumerate()
            .map(|(dim, split)| {
                let (part, cut) = self.part_cut(key, dim);
                split.runs(part, cut)
            })
            .collect()
    }

    /// The local length of shard `key` on every dim.
    pub fn local_shape(&self, key: &Key) -> ArrayVec<u64, MAX_DIMS> {
        self.dims
            .iter()
            .enumerate()
            .map(|(dim, split)| {
                let (part, _) = self.part_cut(key, dim);
                split.piece_len(part)
            })
            .collect()
    }

    /// The number of shard `key` for rotating among holders: the sum of
    /// its split coordinates (stage, ep, tp, weight shard,
    /// distributed-optimizer shard; 0 where not split). A sum, not a
    /// mixed-radix number: the shards that need one source shard differ
    /// on some axes, and along each a sum steps by 1, where a mixed-radix
    /// number steps by the product of the faster radices (a multiple of
    /// the holders' count would send them all to one holder).
    pub fn number(&self, key: &Key) -> u64 {
        [key.stage, key.ep, key.tp, key.gtp, key.dps]
            .iter()
            .map(|c| u64::from(*c))
            .sum()
    }
}
