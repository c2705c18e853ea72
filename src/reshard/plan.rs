//! The reshard plan: for every process, its sends, receives and local
//! copies, computed from the two sides' coordinates.
//!
//! A destination computes its pieces (its shard's boxes cut by the source
//! shards' boxes) and, for each, the holder chosen by the rule of
//! semantics section 12; a source computes the pieces of its shard and,
//! for each, the destinations whose rule chose it, from the replica
//! indexes (no scan of the destinations). Both give a transfer the same
//! value and id.

use crate::cast::{len_usize, low32, to_u64, to_usize};
use std::collections::hash_map::Entry;
use std::rc::Rc;

use arrayvec::ArrayVec;
use fnv::FnvHashMap;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::reshard::cost::{Cost, CostTally};
use crate::reshard::dims::{Piece, Run};
use crate::reshard::layers::LayerMap;
use crate::reshard::locality::{Locality, Scope};
use crate::reshard::model::Model;
use crate::reshard::region::{MAX_DIMS, Point, Region};
use crate::reshard::sharding::{Coords, Geometry, Holding, Key, Sharding};
use crate::reshard::side::Side;
use crate::reshard::transfer::{RankPlan, Shard, Tier, Transfer};

/// The destinations of one piece that took it from a source, each with
/// the tier of its rule.
type Receivers = Rc<Vec<(u32, Tier)>>;

/// One side, resolved.
#[derive(Debug, Clone)]
struct Resolved {
    side: Side,
    geometry: Geometry,
    layers: LayerMap,
    tensors: Vec<Sharding>,
}

impl Resolved {
    fn new(side: Side, name: &'static str, model: &Model) -> Result<Resolved> {
        let geometry = Geometry::new(side.layout(), name)?;
        let layers = side
            .layer_split()
            .resolve_on(name, model.num_layers(), geometry.pp)?;
        let tensors = model
            .tensors()
            .iter()
            .map(|t| {
                Sharding::new(
                    t,
                    &geometry,
                    &layers,
                    model.num_layers(),
                    model.num_experts(),
                    name,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Resolved {
            side,
            geometry,
            layers,
            tensors,
        })
    }

    fn layout(&self) -> &Layout {
        self.side.layout()
    }

    /// The rank of a live `process` of this side.
    fn live_rank(&self, process: u32) -> Option<u32> {
        if self.side.is_dead(process) {
            return None;
        }
        self.side.rank_of(process)
    }
}

/// A reshard: a model's tensors going from one side's layout to the
/// other's, planned per process from coordinates.
///
/// Every process computes the same plan from the same inputs, with no
/// communication: [`plan_of`](Self::plan_of) gives one process's sends,
/// receives and local copies in O(its own transfers) (plus, per piece,
/// the processes of one node or domain);
/// [`transfers`](Self::transfers) enumerates the whole plan, destination by
/// destination. The rule that picks each piece's source, and its bound,
/// are in [`semantics`](crate::semantics) section 12.
///
/// ```
/// use rank_layout::reshard::{LayerRef, Locality, Model, Reshard, Side, Tensor, Tier};
/// use rank_layout::{Config, Layout, Topology};
/// // A 2-layer model: training tp 2, pp 2 on ranks 0-3; inference tp 1 on ranks 4-5.
/// let model = Model::new(2, 0, vec![
///     Tensor::new("l0.fc1", [8, 4]).layer(LayerRef::Layer(0)).tp(0),
///     Tensor::new("l1.fc1", [8, 4]).layer(LayerRef::Layer(1)).tp(0),
/// ])?;
/// let train = Side::new(Layout::new(&Config::new().tp(2).pp(2).world_size(4))?);
/// let infer = Side::new(Layout::new(&Config::new().world_size(2).rank_offset(4))?);
/// let plan = Reshard::new(model, train, infer, Locality::new(Topology::new(4, None)?))?;
/// // Rank 4 gets each layer's two tp halves; rank 0 (tp 0, stage 0) sends
/// // rows 0-3 of layer 0 to one of the two inference ranks.
/// let r4 = plan.plan_of(4)?;
/// assert_eq!(r4.recvs.len(), 4);
/// let sent: Vec<u32> = plan.plan_of(0)?.sends.iter().map(|t| t.dst).collect();
/// assert_eq!(sent.len(), 2); // to rank 4 and to rank 5
/// let cost = plan.cost()?;
/// assert_eq!((cost.bytes, cost.messages), (2 * 2 * 8 * 4 * 2, 8));
/// assert!(plan.plan_of(9).is_err()); // in neither layout
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Reshard {
    model: Model,
    from: Resolved,
    to: Resolved,
    locality: Locality,
    /// The first element of each tensor, the tensors laid end to end.
    bases: Vec<u64>,
    /// One past the largest process of either side.
    processes: u64,
    /// The dead holders' replica indexes of every source shard that has
    /// some, sorted.
    dead: FnvHashMap<Holding, Vec<u64>>,
}

impl Reshard {
    /// The plan of `model`'s tensors from side `from` to side `to`, on
    /// processes placed by `locality`.
    ///
    /// O(tensors x dims) to resolve the two sides' splits, plus O(dead
    /// processes x tensors) to find the shards whose every holder is
    /// dead; nothing is enumerated per rank.
    ///
    /// # Errors
    /// - [`Error::LayerSplit`] when a side cannot place the layers on its
    ///   stages as asked;
    /// - [`Error::TensorNotDivisible`] naming a tensor's dim a side does
    ///   not cut evenly, [`Error::ReshardLayout`] for experts ep does not
    ///   divide or an encoder + decoder layout;
    /// - [`Error::NoSurvivingHolder`] for a source shard whose every holder
    ///   is dead;
    /// - [`Error::Overflow`] when the model's elements times the processes
    ///   pass `u64` (the transfer ids).
    pub fn new(model: Model, from: Side, to: Side, locality: Locality) -> Result<Reshard> {
        let from = Resolved::new(from, "from", &model)?;
        let to = Resolved::new(to, "to", &model)?;
        let mut bases = Vec::with_capacity(model.tensors().len());
        let mut total = 0u64;
        for t in model.tensors() {
            bases.push(total);
            total = t
                .numel()
                .and_then(|n| total.checked_add(n))
                .ok_or_else(|| Error::Overflow {
                    what: "the model's elements".to_string(),
                })?;
        }
        let processes = from.side.process_end().max(to.side.process_end());
        total
            .checked_mul(processes)
            .ok_or_else(|| Error::Overflow {
                what: format!(
                    "the model's {total} elements times {processes} processes (the transfer ids)"
                ),
            })?;
        let mut plan = Reshard {
            model,
            from,
            to,
            locality,
            bases,
            processes,
            dead: FnvHashMap::default(),
        };
        plan.find_dead()?;
        Ok(plan)
    }

    /// The plan of `model`'s tensors after a re-layout: from its old
    /// layout (the failed processes dead) to its new one, run by the
    /// processes of its rank map ([`Side::before`], [`Side::after`]), both
    /// placing the layers by `layers`.
    ///
    /// ```
    /// use rank_layout::relayout::{relayout, Failure, Policy, RelayoutOptions};
    /// use rank_layout::reshard::{LayerRef, LayerSplit, Locality, Model, Reshard, Tensor, Tier};
    /// use rank_layout::{Config, Layout};
    /// // tp 2 x dp 4 on 8 GPUs; rank 5 fails; drop its replica.
    /// let old = Layout::new(&Config::new().tp(2).dp(4))?;
    /// let lost = relayout(&old, &Failure::new(8, [5]), Policy::DropReplica, &RelayoutOptions::default())?;
    /// let model = Model::new(1, 0, vec![Tensor::new("w", [8, 8]).layer(LayerRef::Layer(0)).tp(0)])?;
    /// let plan = Reshard::relayout(model, &lost, LayerSplit::even(), Locality::default())?;
    /// // Every survivor keeps its shard: local copies only.
    /// let cost = plan.cost()?;
    /// assert_eq!((cost.bytes, cost.local_copies), (0, 6));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn relayout(
        model: Model,
        relayout: &crate::relayout::Relayout,
        layers: crate::reshard::layers::LayerSplit,
        locality: Locality,
    ) -> Result<Reshard> {
        let from = Side::before(relayout).layers(layers.clone());
        let to = Side::after(relayout)?.layers(layers);
        Reshard::new(model, from, to, locality)
    }

    /// The dead holders of every source shard, and the shards none holds
    /// alive.
    fn find_dead(&mut self) -> Result<()> {
        let from = &self.from;
        let g = &from.geometry;
        let mut dead: FnvHashMap<Holding, (u32, Vec<u64>)> = FnvHashMap::default();
        for &p in from.side.dead_processes() {
            let Some(rank) = from.side.rank_of(p) else {
                continue;
            };
            let c = Geometry::coords(from.layout(), rank)?;
            for (t, sharding) in from.tensors.iter().enumerate() {
                if let Some(key) = sharding.key_of(g, &c) {
                    let holding = sharding.holding(&key);
                    let index = holding.replicas(g).index(g, &c);
                    // t < 2^32: checked when the model was made.
                    dead.entry(holding)
                        .or_insert_with(|| (low32(to_u64(t)), Vec::new()))
                        .1
                        .push(index);
                }
            }
        }
        for (holding, (t, indexes)) in &mut dead {
            indexes.sort_unstable();
            indexes.dedup();
            if to_u64(indexes.len()) >= holding.replicas(g).len() {
                return Err(Error::NoSurvivingHolder {
                    tensor: self
                        .model
                        .tensor(*t)
                        .map(|t| t.name.clone())
                        .unwrap_or_default(),
                    shard: holding.describe(),
                });
            }
        }
        self.dead = dead.into_iter().map(|(h, (_, v))| (h, v)).collect();
        Ok(())
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The side the tensors come from.
    pub fn from(&self) -> &Side {
        &self.from.side
    }

    /// The side the tensors go to.
    pub fn to(&self) -> &Side {
        &self.to.side
    }

    /// Where the processes run.
    pub fn locality(&self) -> &Locality {
        &self.locality
    }

    /// The `from` side's layers on its stages.
    pub fn from_layers(&self) -> &LayerMap {
        &self.from.layers
    }

    /// The `to` side's layers on its stages.
    pub fn to_layers(&self) -> &LayerMap {
        &self.to.layers
    }

    /// One past the largest process of either side (the ids' multiplier).
    pub fn process_bound(&self) -> u64 {
        self.processes
    }

    /// What `process` holds of tensor `tensor` on the `from` side (`None`:
    /// nothing; a dead process holds nothing).
    ///
    /// # Errors
    /// [`Error::BadTensor`] for a tensor index past the model.
    pub fn source_shard(&self, process: u32, tensor: u32) -> Result<Option<Shard>> {
        shard(&self.from, &self.model, process, tensor)
    }

    /// What `process` holds of tensor `tensor` on the `to` side.
    ///
    /// # Errors
    /// [`Error::BadTensor`] for a tensor index past the model.
    pub fn destination_shard(&self, process: u32, tensor: u32) -> Result<Option<Shard>> {
        shard(&self.to, &self.model, process, tensor)
    }

    /// `process`'s sends, receives and local copies.
    ///
    /// # Errors
    /// [`Error::NotInReshard`] for a process in neither side.
    pub fn plan_of(&self, process: u32) -> Result<RankPlan> {
        if self.from.side.rank_of(process).is_none() && self.to.side.rank_of(process).is_none() {
            return Err(Error::NotInReshard {
                process: u64::from(process),
                from: self.from.side.describe(),
                to: self.to.side.describe(),
            });
        }
        let mut ctx = Context::default();
        let mut plan = RankPlan {
            process,
            ..RankPlan::default()
        };
        let mut received = Vec::new();
        self.receive(&mut ctx, process, &mut received)?;
        for t in received {
            if t.is_local() {
                plan.copies.push(t);
            } else {
                plan.recvs.push(t);
            }
        }
        self.send(&mut ctx, process, &mut plan.sends)?;
        for list in [&mut plan.sends, &mut plan.recvs, &mut plan.copies] {
            list.sort_unstable_by_key(|t| t.id);
        }
        Ok(plan)
    }

    /// The whole plan: every transfer once, destination by destination
    /// (processes ascending), each destination's in `id` order.
    pub fn transfers(&self) -> Transfers<'_> {
        let mut destinations: Vec<u32> = (0..self.to.layout().world_size())
            .filter_map(|i| {
                self.to
                    .side
                    .process_of(self.to.layout().rank_offset().wrapping_add(i))
            })
            .filter(|p| !self.to.side.is_dead(*p))
            .collect();
        destinations.sort_unstable();
        Transfers {
            plan: self,
            destinations: destinations.into_iter(),
            ctx: Context::default(),
            buffer: Vec::new().into_iter(),
        }
    }

    /// The whole plan's cost.
    ///
    /// # Errors
    /// An error of [`transfers`](Self::transfers) (none for a plan that
    /// was made).
    pub fn cost(&self) -> Result<Cost> {
        let mut tally = CostTally::new();
        for t in self.transfers() {
            tally.add(&t?, &self.locality);
        }
        Ok(tally.finish())
    }

    /// The cost of some transfers (one process's plan, say).
    pub fn cost_of<'a>(&self, transfers: impl IntoIterator<Item = &'a Transfer>) -> Cost {
        let mut tally = CostTally::new();
        for t in transfers {
            tally.add(t, &self.locality);
        }
        tally.finish()
    }

    /// The transfer's id (see [`Transfer::id`]).
    fn id(&self, tensor: u32, lo: &Point, dst: u32) -> u64 {
        let shape = self
            .model
            .tensor(tensor)
            .map(|t| t.shape.as_slice())
            .unwrap_or(&[]);
        // Row-major: shape (a, b, c) => strides (b*c, c, 1).
        let mut corner = 0u64;
        for (d, len) in shape.iter().enumerate() {
            corner = corner * len + lo.get(d).copied().unwrap_or(0);
        }
        let base = self.bases.get(to_usize(tensor)).copied().unwrap_or(0);
        // Below the model's elements times the processes, checked in `new`.
        (base + corner) * self.processes + u64::from(dst)
    }

    fn element_bytes(&self, tensor: u32) -> u64 {
        self.model
            .tensor(tensor)
            .map_or(1, |t| u64::from(t.element_bytes))
    }

    /// The transfer of piece `c` of tensor `t` from `src` to `dst`; `c`
    /// was cut from the destination's shard when `receiving`, else from
    /// the source's.
    fn transfer(
        &self,
        t: u32,
        c: &Crossing,
        src: u32,
        dst: u32,
        tier: Tier,
        receiving: bool,
    ) -> Transfer {
        let region = Region::from_points(c.lo, c.hi);
        let (src_offset, dst_offset) = if receiving {
            (c.other, c.own)
        } else {
            (c.own, c.other)
        };
        Transfer {
            id: self.id(t, &c.lo, dst),
            tensor: t,
            src,
            dst,
            region,
            src_offset,
            dst_offset,
            bytes: region.numel().saturating_mul(self.element_bytes(t)),
            tier,
        }
    }

    /// Every transfer `x` receives (local copies included).
    fn receive(&self, ctx: &mut Context, x: u32, out: &mut Vec<Transfer>) -> Result<()> {
        let Some(rank) = self.to.live_rank(x) else {
            return Ok(());
        };
        let gd = &self.to.geometry;
        let cd = ctx.coords(Which::To, self.to.layout(), rank)?;
        let mut chosen: Vec<(Key, u32, Tier)> = Vec::new();
        for (t, (src, dst)) in self.from.tensors.iter().zip(&self.to.tensors).enumerate() {
            let t = low32(to_u64(t)); // below 2^32, checked when the model was made
            let Some(j) = dst.key_of(gd, &cd) else {
                continue;
            };
            chosen.clear();
            for_each_piece(&dst.runs(&j), src, |c| {
                let (from, tier) = match chosen.iter().find(|(k, _, _)| *k == c.key) {
                    Some((_, s, tier)) => (*s, *tier),
                    None => {
                        let (s, tier) = self.choose(ctx, t, &c.key, &j, x, &cd)?;
                        chosen.push((c.key, s, tier));
                        (s, tier)
                    }
                };
                out.push(self.transfer(t, c, from, x, tier, true));
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Every transfer `x` sends to another process.
    fn send(&self, ctx: &mut Context, x: u32, out: &mut Vec<Transfer>) -> Result<()> {
        let Some(rank) = self.from.live_rank(x) else {
            return Ok(());
        };
        let gs = &self.from.geometry;
        let cs = ctx.coords(Which::From, self.from.layout(), rank)?;
        let mut receivers: Vec<(Key, Receivers)> = Vec::new();
        for (t, (src, dst)) in self.from.tensors.iter().zip(&self.to.tensors).enumerate() {
            let t = low32(to_u64(t)); // below 2^32, checked when the model was made
            let Some(k) = src.key_of(gs, &cs) else {
                continue;
            };
            receivers.clear();
            for_each_piece(&src.runs(&k), dst, |c| {
                let to = match receivers.iter().find(|(j, _)| *j == c.key) {
                    Some((_, to)) => Rc::clone(to),
                    None => {
                        let to = Rc::new(self.receivers(ctx, t, &k, &c.key, x, &cs)?);
                        receivers.push((c.key, Rc::clone(&to)));
                        to
                    }
                };
                // A copy (`d == x`) is listed by the receiving side.
                for &(d, tier) in to.iter().filter(|(d, _)| *d != x) {
                    out.push(self.transfer(t, c, x, d, tier, false));
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The holder destination `x` (at `cd`) takes source shard `k` of
    /// tensor `t` from, for its shard `j`, and the tier of the rule.
    fn choose(
        &self,
        ctx: &mut Context,
        t: u32,
        k: &Key,
        j: &Key,
        x: u32,
        cd: &Coords,
    ) -> Result<(u32, Tier)> {
        let (src, dst) = self.shardings(t)?;
        let hs = src.holding(k);
        let hd = dst.holding(j);
        if self.holds(ctx, &hs, x)? {
            return Ok((x, Tier::Local));
        }
        let rot = u64::from(t).wrapping_add(dst.number(j));
        if let Some(node) = self.locality.node_of(x) {
            let holders = self.holders(ctx, &hs, Scope::Node(node))?;
            if !holders.is_empty() {
                let dests = self.dests(ctx, &hs, &hd, Scope::Node(node))?;
                return Ok((pick(&holders, &dests, x, rot), Tier::Node));
            }
        }
        if let Some(domain) = self.locality.domain_of(x) {
            let holders = self.holders(ctx, &hs, Scope::Domain(domain))?;
            if !holders.is_empty() {
                let dests = self.dests(ctx, &hs, &hd, Scope::Domain(domain))?;
                return Ok((pick(&holders, &dests, x, rot), Tier::Domain));
            }
        }
        let gs = &self.from.geometry;
        let replicas = hs.replicas(gs);
        let dead = self.dead.get(&hs).map_or(&[][..], Vec::as_slice);
        let alive = replicas.len() - to_u64(dead.len());
        let idx = hd.replicas(&self.to.geometry).index(&self.to.geometry, cd);
        let a = idx.wrapping_add(rot) % alive.max(1);
        let index = nth_alive(a, dead);
        let rank = replicas.rank(self.from.layout(), gs, index)?;
        let process = self.from.side.process_of(rank).unwrap_or(rank);
        Ok((process, Tier::Any))
    }

    /// The destinations that take source shard `k` of tensor `t` from
    /// `x` (at `cs`) for their shard `j`, with the tier (`x` itself first
    /// when it holds `j` too: a local copy).
    fn receivers(
        &self,
        ctx: &mut Context,
        t: u32,
        k: &Key,
        j: &Key,
        x: u32,
        cs: &Coords,
    ) -> Result<Vec<(u32, Tier)>> {
        let (src, dst) = self.shardings(t)?;
        let hs = src.holding(k);
        let hd = dst.holding(j);
        let mut out = Vec::new();
        if self.dest_holds(ctx, &hd, x)? {
            out.push((x, Tier::Local));
        }
        let rot = u64::from(t).wrapping_add(dst.number(j));
        if let Some(node) = self.locality.node_of(x) {
            let holders = self.holders(ctx, &hs, Scope::Node(node))?;
            if let Ok(pos) = holders.binary_search(&x) {
                let dests = self.dests(ctx, &hs, &hd, Scope::Node(node))?;
                chosen_by(&dests, holders.len(), pos, rot, Tier::Node, &mut out);
            }
        }
        if let Some(domain) = self.locality.domain_of(x) {
            let holders = self.holders(ctx, &hs, Scope::Domain(domain))?;
            if let Ok(pos) = holders.binary_search(&x) {
                let dests = self.dests(ctx, &hs, &hd, Scope::Domain(domain))?;
                chosen_by(&dests, holders.len(), pos, rot, Tier::Domain, &mut out);
            }
        }
        let gs = &self.from.geometry;
        let gd = &self.to.geometry;
        let replicas = hs.replicas(gs);
        let dead = self.dead.get(&hs).map_or(&[][..], Vec::as_slice);
        let alive = (replicas.len() - to_u64(dead.len())).max(1);
        let index = replicas.index(gs, cs);
        let a = index - to_u64(dead.partition_point(|d| *d < index));
        let destinations = hd.replicas(gd);
        // Destination replica i takes holder (i + rot) mod alive.
        let mut i = (a + alive - rot % alive) % alive;
        while i < destinations.len() {
            let rank = destinations.rank(self.to.layout(), gd, i)?;
            i += alive;
            let Some(d) = self.to.side.process_of(rank) else {
                continue;
            };
            if self.to.side.is_dead(d) || self.tier_of(ctx, &hs, d)? != Tier::Any {
                continue;
            }
            out.push((d, Tier::Any));
        }
        Ok(out)
    }

    /// The tier of the rule destination `d` reaches for shard `hs`.
    fn tier_of(&self, ctx: &mut Context, hs: &Holding, d: u32) -> Result<Tier> {
        if self.holds(ctx, hs, d)? {
            return Ok(Tier::Local);
        }
        if let Some(node) = self.locality.node_of(d) {
            if !self.holders(ctx, hs, Scope::Node(node))?.is_empty() {
                return Ok(Tier::Node);
            }
        }
        if let Some(domain) = self.locality.domain_of(d) {
            if !self.holders(ctx, hs, Scope::Domain(domain))?.is_empty() {
                return Ok(Tier::Domain);
            }
        }
        Ok(Tier::Any)
    }

    fn shardings(&self, t: u32) -> Result<(&Sharding, &Sharding)> {
        match (
            self.from.tensors.get(to_usize(t)),
            self.to.tensors.get(to_usize(t)),
        ) {
            (Some(s), Some(d)) => Ok((s, d)),
            _ => Err(Error::BadTensor {
                tensor: t.to_string(),
                problem: format!("no tensor numbered {t} in the model"),
            }),
        }
    }

    /// Whether live process `p` holds source shard `hs`.
    fn holds(&self, ctx: &mut Context, hs: &Holding, p: u32) -> Result<bool> {
        let Some(rank) = self.from.live_rank(p) else {
            return Ok(false);
        };
        let c = ctx.coords(Which::From, self.from.layout(), rank)?;
        Ok(hs.holds(&self.from.geometry, &c))
    }

    /// Whether live process `p` is a destination of shard `hd`.
    fn dest_holds(&self, ctx: &mut Context, hd: &Holding, p: u32) -> Result<bool> {
        let Some(rank) = self.to.live_rank(p) else {
            return Ok(false);
        };
        let c = ctx.coords(Which::To, self.to.layout(), rank)?;
        Ok(hd.holds(&self.to.geometry, &c))
    }

    /// The live holders of `hs` in `scope` (a node or a domain), ascending.
    fn holders(&self, ctx: &mut Context, hs: &Holding, scope: Scope) -> Result<Rc<Vec<u32>>> {
        let key = (*hs, scope);
        if let Some(v) = ctx.holders.get(&key) {
            return Ok(Rc::clone(v));
        }
        let mut v = Vec::new();
        for p in self.locality.members(scope) {
            if self.holds(ctx, hs, p)? {
                v.push(p);
            }
        }
        let v = Rc::new(v);
        ctx.holders.insert(key, Rc::clone(&v));
        Ok(v)
    }

    /// The destinations of `hd` served in `scope`'s tier, ascending: in
    /// the node, those that do not hold `hs` themselves; in the domain,
    /// those whose node has no holder either.
    fn dests(
        &self,
        ctx: &mut Context,
        hs: &Holding,
        hd: &Holding,
        scope: Scope,
    ) -> Result<Rc<Vec<u32>>> {
        let key = (*hs, *hd, scope);
        if let Some(v) = ctx.dests.get(&key) {
            return Ok(Rc::clone(v));
        }
        let mut v = Vec::new();
        for p in self.locality.members(scope) {
            if !self.dest_holds(ctx, hd, p)? || self.holds(ctx, hs, p)? {
                continue;
            }
            if let Scope::Domain(_) = scope {
                if let Some(node) = self.locality.node_of(p) {
                    if !self.holders(ctx, hs, Scope::Node(node))?.is_empty() {
                        continue;
                    }
                }
            }
            v.push(p);
        }
        let v = Rc::new(v);
        if let Entry::Vacant(e) = ctx.dests.entry(key) {
            e.insert(Rc::clone(&v));
        }
        Ok(v)
    }
}

/// The holder destination `x` takes: `holders[(i + rot) mod len]`, `i`
/// its position among `dests`.
fn pick(holders: &[u32], dests: &[u32], x: u32, rot: u64) -> u32 {
    let i = to_u64(dests.binary_search(&x).unwrap_or(0));
    let n = to_u64(holders.len().max(1));
    // Below the holders' count.
    let at = len_usize(i.wrapping_add(rot) % n);
    holders.get(at).copied().unwrap_or(x)
}

/// The destinations of `dests` whose pick is holder `pos` of `holders`.
fn chosen_by(
    dests: &[u32],
    holders: usize,
    pos: usize,
    rot: u64,
    tier: Tier,
    out: &mut Vec<(u32, Tier)>,
) {
    let n = to_u64(holders.max(1));
    for (i, d) in dests.iter().enumerate() {
        if to_u64(i).wrapping_add(rot) % n == to_u64(pos) {
            out.push((*d, tier));
        }
    }
}

/// The `a`-th replica index not in `dead` (sorted).
fn nth_alive(a: u64, dead: &[u64]) -> u64 {
    let mut index = a;
    for &d in dead {
        if d <= index {
            index += 1;
        } else {
            break;
        }
    }
    index
}

/// A piece of one side's shard cut by the other side's shards: the other
/// side's shard, the region, and where it starts in each shard.
struct Crossing {
    key: Key,
    lo: Point,
    hi: Point,
    own: Point,
    other: Point,
}

/// Calls `f` with every piece of the shard of `runs` cut by `other`'s
/// shards: each box of the shard, and on each dim every part and cut of
/// `other` it meets.
fn for_each_piece(
    runs: &[Vec<Run>],
    other: &Sharding,
    mut f: impl FnMut(&Crossing) -> Result<()>,
) -> Result<()> {
    let mut pieces: ArrayVec<Vec<Piece>, MAX_DIMS> = ArrayVec::new();
    for_each_box(runs, |shard_box| {
        pieces.clear();
        for (d, run) in shard_box.iter().enumerate() {
            let mut list = Vec::new();
            if let Some(split) = other.dims().get(d) {
                split.pieces(run.lo, run.hi, &mut list);
            }
            pieces.push(list);
        }
        let lens: ArrayVec<usize, MAX_DIMS> = pieces.iter().map(Vec::len).collect();
        for_each_index(&lens, |idx| {
            let mut c = Crossing {
                key: Key::default(),
                lo: Point::default(),
                hi: Point::default(),
                own: Point::default(),
                other: Point::default(),
            };
            for (d, (&i, run)) in idx.iter().zip(shard_box).enumerate() {
                let Some(p) = pieces.get(d).and_then(|l| l.get(i)) else {
                    continue;
                };
                other.assemble(&mut c.key, d, p.part, p.cut);
                let _ = (c.lo.push(p.lo), c.hi.push(p.hi), c.other.push(p.local));
                let _ = c.own.push(run.local + (p.lo - run.lo));
            }
            f(&c)
        })
    })
}

/// Calls `f` with every box of a shard: one run per dim, first dim
/// slowest.
fn for_each_box(runs: &[Vec<Run>], mut f: impl FnMut(&[Run]) -> Result<()>) -> Result<()> {
    let lens: ArrayVec<usize, MAX_DIMS> = runs.iter().map(Vec::len).collect();
    let mut boxed: ArrayVec<Run, MAX_DIMS> = ArrayVec::new();
    for_each_index(&lens, |idx| {
        boxed.clear();
        for (d, &i) in idx.iter().enumerate() {
            if let Some(r) = runs.get(d).and_then(|l| l.get(i)) {
                boxed.push(*r);
            }
        }
        f(&boxed)
    })
}

/// Calls `f` with every index vector below `lens` (the last fastest);
/// never when a length is 0.
pub(crate) fn for_each_index(
    lens: &[usize],
    mut f: impl FnMut(&[usize]) -> Result<()>,
) -> Result<()> {
    if lens.contains(&0) {
        return Ok(());
    }
    let mut idx: ArrayVec<usize, MAX_DIMS> = lens.iter().map(|_| 0).collect();
    loop {
        f(&idx)?;
        let mut d = idx.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            let (Some(i), Some(len)) = (idx.get_mut(d), lens.get(d)) else {
                return Ok(());
            };
            *i += 1;
            if *i < *len {
                break;
            }
            *i = 0;
        }
    }
}

/// What `process` holds of `tensor` on side `side`.
fn shard(side: &Resolved, model: &Model, process: u32, tensor: u32) -> Result<Option<Shard>> {
    let sharding = side
        .tensors
        .get(to_usize(tensor))
        .ok_or_else(|| Error::BadTensor {
            tensor: tensor.to_string(),
            problem: format!(
                "no tensor numbered {tensor} in the model ({} tensors)",
                model.tensors().len()
            ),
        })?;
    let Some(rank) = side.live_rank(process) else {
        return Ok(None);
    };
    let c = Geometry::coords(side.layout(), rank)?;
    let Some(key) = sharding.key_of(&side.geometry, &c) else {
        return Ok(None);
    };
    let runs = sharding.runs(&key);
    let mut boxes = Vec::new();
    for_each_box(&runs, |b| {
        let (mut lo, mut hi, mut local) = (Point::default(), Point::default(), Point::default());
        for r in b {
            let _ = (lo.push(r.lo), hi.push(r.hi), local.push(r.local));
        }
        boxes.push((Region::from_points(lo, hi), local));
        Ok(())
    })?;
    let mut local_shape = Point::default();
    for len in sharding.local_shape(&key) {
        let _ = local_shape.push(len);
    }
    Ok(Some(Shard { local_shape, boxes }))
}

/// Which side a cached coordinate belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Which {
    From,
    To,
}

/// What one planning pass has computed: coordinates and, per node and
/// domain, holders and destinations of the shards met.
#[derive(Debug, Default)]
struct Context {
    coords: FnvHashMap<(Which, u32), Coords>,
    holders: FnvHashMap<(Holding, Scope), Rc<Vec<u32>>>,
    dests: FnvHashMap<(Holding, Holding, Scope), Rc<Vec<u32>>>,
}

impl Context {
    fn coords(&mut self, which: Which, layout: &Layout, rank: u32) -> Result<Coords> {
        match self.coords.entry((which, rank)) {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => Ok(*e.insert(Geometry::coords(layout, rank)?)),
        }
    }
}

/// Every transfer of a plan, destination by destination.
///
/// Created by [`Reshard::transfers`].
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Transfers<'a> {
    plan: &'a Reshard,
    destinations: std::vec::IntoIter<u32>,
    ctx: Context,
    buffer: std::vec::IntoIter<Transfer>,
}

impl std::fmt::Debug for Transfers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfers")
            .field("destinations_left", &self.destinations.len())
            .finish_non_exhaustive()
    }
}

impl Iterator for Transfers<'_> {
    type Item = Result<Transfer>;

    fn next(&mut self) -> Option<Result<Transfer>> {
        loop {
            if let Some(t) = self.buffer.next() {
                return Some(Ok(t));
            }
            let x = self.destinations.next()?;
            let mut out = Vec::new();
            if let Err(e) = self.plan.receive(&mut self.ctx, x, &mut out) {
                return Some(Err(e));
            }
            out.sort_unstable_by_key(|t| t.id);
            self.buffer = out.into_iter();
        }
    }
}

impl std::iter::FusedIterator for Transfers<'_> {}
