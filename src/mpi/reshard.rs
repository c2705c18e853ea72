//! Executes one process's part of a reshard plan over MPI on byte
//! buffers: non-blocking sends and receives in the plan's order, local
//! copies in memory.

use crate::cast::{to_u64, to_usize};
use ::mpi::Tag;
use ::mpi::collective::SystemOperation;
use ::mpi::topology::Communicator;
use ::mpi::traits::{CommunicatorCollectives, Destination, Source};

use crate::error::{Error, Result};
use crate::mpi::rank::{from_mpi_rank, to_mpi_rank};
use crate::reshard::{RankPlan, Transfer, for_each_index};

/// The tag of every message of [`reshard_buffers`]: messages between two
/// processes match in the order posted (MPI's non-overtaking rule), which
/// is the plan's `id` order on both.
pub const RESHARD_TAG: Tag = 0x7e5;

/// The most bytes in one MPI message (MPI counts are `int`): a larger
/// piece goes as several messages of at most this, in order, on both
/// sides.
const CHUNK: usize = 1 << 30;

/// One tensor's local data on this process: its bytes, row-major, of
/// `shape` elements of `element_bytes` bytes each (the local shape of its
/// shard: [`Reshard::source_shard`](crate::reshard::Reshard::source_shard),
/// [`destination_shard`](crate::reshard::Reshard::destination_shard)).
#[derive(Debug)]
#[non_exhaustive]
pub struct LocalTensor<B> {
    /// The bytes (`&[u8]` for a source, `&mut [u8]` for a destination).
    pub data: B,
    /// The local shape, in elements.
    pub shape: Vec<u64>,
    /// Bytes per element.
    pub element_bytes: u64,
}

impl<B> LocalTensor<B> {
    /// `data` holding a local tensor of `shape` elements of
    /// `element_bytes` bytes.
    pub fn new(data: B, shape: impl Into<Vec<u64>>, element_bytes: u64) -> LocalTensor<B> {
        LocalTensor {
            data,
            shape: shape.into(),
            element_bytes,
        }
    }
}

/// What [`reshard_buffers`] moved on this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Exchanged {
    /// Bytes sent to other processes.
    pub sent_bytes: u64,
    /// Bytes received from other processes.
    pub received_bytes: u64,
    /// Bytes copied within this process.
    pub copied_bytes: u64,
    /// MPI messages posted (sends and receives).
    pub messages: u64,
}

/// Runs `plan` (this process's part of a reshard,
/// [`Reshard::plan_of`](crate::reshard::Reshard::plan_of)) over `comm`:
/// `sources[t]` is this process's shard of the model's tensor `t` on the
/// source side, `destinations[t]` its shard on the destination side
/// (`None` where it holds none), each in its local shape.
///
/// Collective over `comm`, whose ranks are the plan's processes: every
/// process of `comm` calls it (one in neither side of the reshard with an
/// empty plan, [`RankPlan::default`]). Each checks its own buffers
/// against its plan (every tensor it sends, receives or copies given, its
/// byte length its shape's, every piece inside it, every peer a rank of
/// `comm`), then one `MPI_Allreduce` tells every process whether all
/// passed: a process whose buffers do not fit returns its error, every
/// other one [`Error::ReshardBuffers`] naming it, and no message is sent
/// (no process is left waiting for one). Then it packs each piece it
/// sends into a contiguous buffer, posts every send and receive
/// (`MPI_Isend`, `MPI_Irecv`, tag [`RESHARD_TAG`], in `id` order, so the
/// `k`-th message between two processes is the `k`-th piece of both),
/// copies its local pieces while they are in flight, waits for all, and
/// unpacks each received piece at its offset in the destination. Use a
/// communicator of its own (`comm.duplicate()`) when other code may post
/// messages with the same tag.
///
/// ```no_run
/// use rank_layout::mpi::{LocalTensor, reshard_buffers};
/// use rank_layout::mpi::traits::*;
/// use rank_layout::reshard::{Locality, Model, Reshard, Side, Tensor};
/// use rank_layout::{Config, Layout};
///
/// let universe = rank_layout::mpi::initialize().expect("MPI initializes once");
/// let world = universe.world();
/// // tp 2 on processes 0-1 to tp 1 on process 2 (run on 3 processes).
/// let model = Model::new(1, 0, vec![Tensor::new("w", [4, 4]).element_bytes(4).tp(0)])?;
/// let from = Side::new(Layout::new(&Config::new().tp(2).world_size(2))?);
/// let to = Side::new(Layout::new(&Config::new().world_size(1).rank_offset(2))?);
/// let plan = Reshard::new(model, from, to, Locality::default())?;
/// let me = rank_layout::mpi::from_mpi_rank(world.rank())?;
/// let mine = plan.plan_of(me)?;
/// let held = [0u8; 32]; // rows of w this process holds (tp 0 or 1)
/// let mut whole = [0u8; 64];
/// let sources = [(me < 2).then(|| LocalTensor::new(&held[..], [2, 4], 4))];
/// let mut destinations = [(me == 2).then(|| LocalTensor::new(&mut whole[..], [4, 4], 4))];
/// reshard_buffers(&world, &mine, &sources, &mut destinations)?;
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// - [`Error::BadTensor`] naming the tensor (by its index in the model)
///   whose buffer this process lacks, whose length is not its shape's, or
///   that a piece of the plan does not fit;
/// - [`Error::ReshardBuffers`] when this process's rank in `comm` is not
///   the plan's process, a peer is not a rank of `comm`, or another
///   process's buffers do not fit its plan.
pub fn reshard_buffers<C: Communicator>(
    comm: &C,
    plan: &RankPlan,
    sources: &[Option<LocalTensor<&[u8]>>],
    destinations: &mut [Option<LocalTensor<&mut [u8]>>],
) -> Result<Exchanged> {
    let me = from_mpi_rank(comm.rank())?;
    let checked = check(comm, me, plan, sources, destinations);
    // The first failing process, agreed by every process.
    let mine = match &checked {
        Ok(()) => i64::MAX,
        Err(_) => i64::from(me),
    };
    let mut first = i64::MAX;
    comm.all_reduce_into(&mine, &mut first, SystemOperation::min());
    checked?;
    if first != i64::MAX {
        return Err(Error::ReshardBuffers {
            process: u64::try_from(first).unwrap_or(0),
            problem: "its buffers do not fit its plan (it returned why); nothing was sent"
                .to_string(),
        });
    }
    let mut done = Exchanged::default();
    let mut packed: Vec<(Transfer, Vec<u8>)> = Vec::with_capacity(plan.sends.len());
    for t in &plan.sends {
        let src = local(sources, t)?;
        let mut buffer = vec![0u8; usize_of(t.bytes)?];
        for_each_row(
            t,
            &src.shape,
            &t.src_offset,
            src.element_bytes,
            |at, to, len| copy(src.data, at, &mut buffer, to, len),
        )?;
        packed.push((*t, buffer));
    }
    let mut landing: Vec<Vec<u8>> = plan
        .recvs
        .iter()
        .map(|t| usize_of(t.bytes).map(|n| vec![0u8; n]))
        .collect::<Result<_>>()?;
    // Every peer as an MPI rank before any request (a request must be
    // waited for once posted: nothing may fail in between).
    let to_peers = packed
        .iter()
        .map(|(t, _)| to_mpi_rank(t.dst))
        .collect::<Result<Vec<_>>>()?;
    let from_peers = plan
        .recvs
        .iter()
        .map(|t| to_mpi_rank(t.src))
        .collect::<Result<Vec<_>>>()?;
    let copied = ::mpi::request::scope(|scope| {
        let mut requests = Vec::new();
        for ((t, buffer), &peer) in packed.iter().zip(&to_peers) {
            let peer = comm.process_at_rank(peer);
            for chunk in buffer.chunks(CHUNK) {
                requests.push(peer.immediate_send_with_tag(scope, chunk, RESHARD_TAG));
            }
            done.sent_bytes += t.bytes;
        }
        for ((t, buffer), &peer) in plan.recvs.iter().zip(landing.iter_mut()).zip(&from_peers) {
            let peer = comm.process_at_rank(peer);
            for chunk in buffer.chunks_mut(CHUNK) {
                requests.push(peer.immediate_receive_into_with_tag(scope, chunk, RESHARD_TAG));
            }
            done.received_bytes += t.bytes;
        }
        done.messages = to_u64(requests.len());
        // Local pieces while the messages are in flight.
        let copied = local_copies(plan, sources, destinations);
        for r in requests {
            r.wait();
        }
        copied
    })?;
    done.copied_bytes = copied;
    for (t, buffer) in plan.recvs.iter().zip(&landing) {
        let dst = local_mut(destinations, t)?;
        let (shape, element_bytes) = (dst.shape.clone(), dst.element_bytes);
        for_each_row(t, &shape, &t.dst_offset, element_bytes, |at, from, len| {
            copy(buffer, from, dst.data, at, len)
        })?;
    }
    Ok(done)
}

/// This process's local copies; their bytes.
fn local_copies(
    plan: &RankPlan,
    sources: &[Option<LocalTensor<&[u8]>>],
    destinations: &mut [Option<LocalTensor<&mut [u8]>>],
) -> Result<u64> {
    let mut bytes = 0u64;
    for t in &plan.copies {
        let src = local(sources, t)?;
        let dst = local_mut(destinations, t)?;
        let (shape, element_bytes) = (dst.shape.clone(), dst.element_bytes);
        let mut rows = Vec::new();
        for_each_row(
            t,
            &src.shape,
            &t.src_offset,
            src.element_bytes,
            |at, _, len| {
                rows.push((at, len));
                Ok(())
            },
        )?;
        let mut next = rows.into_iter();
        for_each_row(t, &shape, &t.dst_offset, element_bytes, |at, _, len| {
            let (from, n) = next.next().ok_or_else(|| mismatch(t, "rows"))?;
            if n != len {
                return Err(mismatch(t, "row lengths"));
            }
            copy(src.data, from, dst.data, at, len)
        })?;
        bytes += t.bytes;
    }
    Ok(bytes)
}

/// Every check [`reshard_buffers`] makes before its collective.
fn check<C: Communicator>(
    comm: &C,
    me: u32,
    plan: &RankPlan,
    sources: &[Option<LocalTensor<&[u8]>>],
    destinations: &[Option<LocalTensor<&mut [u8]>>],
) -> Result<()> {
    let size = from_mpi_rank(comm.size())?;
    let reject = |problem: String| Error::ReshardBuffers {
        process: u64::from(me),
        problem,
    };
    if plan.process != me && !(plan.sends.is_empty() && plan.recvs.is_empty()) {
        return Err(reject(format!(
            "its rank in the communicator is {me}, but the plan is process {}'s",
            plan.process
        )));
    }
    for t in plan.sends.iter().chain(&plan.recvs) {
        let peer = if t.src == me { t.dst } else { t.src };
        if peer >= size {
            return Err(reject(format!(
                "transfer {} has peer {peer}, but the communicator has {size} processes",
                t.id
            )));
        }
    }
    for t in plan.sends.iter().chain(&plan.copies) {
        let s = local(sources, t)?;
        fits(
            t,
            "source",
            s.data.len(),
            &s.shape,
            s.element_bytes,
            &t.src_offset,
        )?;
    }
    for t in plan.recvs.iter().chain(&plan.copies) {
        let d = destinations
            .get(to_usize(t.tensor))
            .and_then(Option::as_ref)
            .ok_or_else(|| missing(t, "destination"))?;
        fits(
            t,
            "destination",
            d.data.len(),
            &d.shape,
            d.element_bytes,
            &t.dst_offset,
        )?;
    }
    Ok(())
}

/// Checks that a buffer of `len` bytes holds `shape` and that `t`'s piece
/// at `offset` fits it.
fn fits(
    t: &Transfer,
    side: &str,
    len: usize,
    shape: &[u64],
    element_bytes: u64,
    offset: &[u64],
) -> Result<()> {
    let bad = |problem: String| Error::BadTensor {
        tensor: t.tensor.to_string(),
        problem,
    };
    let elements = shape.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
    let want = elements.and_then(|n| n.checked_mul(element_bytes));
    if want != Some(to_u64(len)) {
        return Err(bad(format!(
            "the {side} buffer has {len} bytes, its shape {shape:?} of {element_bytes}-byte elements needs {}",
            want.map_or("more than 2^64".to_string(), |w| w.to_string())
        )));
    }
    let piece = t.region.shape();
    if shape.len() != piece.len()
        || shape
            .iter()
            .zip(offset.iter().zip(piece.iter()))
            .any(|(s, (o, p))| o.checked_add(*p).is_none_or(|end| end > *s))
    {
        return Err(bad(format!(
            "transfer {}'s piece {} at {offset:?} does not fit the {side} shape {shape:?}",
            t.id, t.region
        )));
    }
    if t.region.numel().checked_mul(element_bytes) != Some(t.bytes) {
        return Err(bad(format!(
            "transfer {} moves {} bytes, not its {} elements of {element_bytes} bytes",
            t.id,
            t.bytes,
            t.region.numel()
        )));
    }
    Ok(())
}

fn missing(t: &Transfer, side: &str) -> Error {
    Error::BadTensor {
        tensor: t.tensor.to_string(),
        problem: format!("the plan needs its {side} buffer (transfer {})", t.id),
    }
}

fn mismatch(t: &Transfer, what: &str) -> Error {
    Error::BadTensor {
        tensor: t.tensor.to_string(),
        problem: format!("transfer {}: the {what} of its two sides differ", t.id),
    }
}

fn local<'s, 'a>(
    sources: &'s [Option<LocalTensor<&'a [u8]>>],
    t: &Transfer,
) -> Result<&'s LocalTensor<&'a [u8]>> {
    sources
        .get(to_usize(t.tensor))
        .and_then(Option::as_ref)
        .ok_or_else(|| missing(t, "source"))
}

fn local_mut<'s, 'a>(
    destinations: &'s mut [Option<LocalTensor<&'a mut [u8]>>],
    t: &Transfer,
) -> Result<&'s mut LocalTensor<&'a mut [u8]>> {
    destinations
        .get_mut(to_usize(t.tensor))
        .and_then(Option::as_mut)
        .ok_or_else(|| missing(t, "destination"))
}

fn usize_of(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::Overflow {
        what: format!("{n} bytes in this process's memory"),
    })
}

/// Calls `f(byte offset in the local tensor, byte offset in the packed
/// piece, row bytes)` for every row of `t`'s piece (its last dim,
/// contiguous in both) in a local tensor of `shape` at `offset`, rows in
/// row-major order. Row-major: shape (a, b, c) => strides (b*c, c, 1).
fn for_each_row(
    t: &Transfer,
    shape: &[u64],
    offset: &[u64],
    element_bytes: u64,
    mut f: impl FnMut(usize, usize, usize) -> Result<()>,
) -> Result<()> {
    let piece = t.region.shape();
    let dims = piece.len();
    let mut strides = vec![1u64; dims];
    for d in (0..dims.saturating_sub(1)).rev() {
        let next = strides.get(d + 1).copied().unwrap_or(1);
        let len = shape.get(d + 1).copied().unwrap_or(1);
        if let Some(s) = strides.get_mut(d) {
            *s = next * len;
        }
    }
    let row = piece.last().copied().unwrap_or(1);
    let row_bytes = usize_of(row * element_bytes)?;
    // Every row: an index over every dim but the last, the last fastest.
    let lens = piece
        .iter()
        .take(dims.saturating_sub(1))
        .map(|len| usize_of(*len))
        .collect::<Result<Vec<usize>>>()?;
    let mut packed = 0usize;
    for_each_index(&lens, |index| {
        let mut at = 0u64;
        for (d, stride) in strides.iter().enumerate() {
            let i = index.get(d).map_or(0, |i| to_u64(*i));
            at += (offset.get(d).copied().unwrap_or(0) + i) * stride;
        }
        f(usize_of(at * element_bytes)?, packed, row_bytes)?;
        packed += row_bytes;
        Ok(())
    })
}

/// Copies `len` bytes from `from[at..]` to `to[into..]` (bounds checked
/// by [`fits`] before).
fn copy(from: &[u8], at: usize, to: &mut [u8], into: usize, len: usize) -> Result<()> {
    let out_of_range = || Error::Overflow {
        what: format!("a row of {len} bytes past its buffer"),
    };
    let src = from.get(at..at + len).ok_or_else(out_of_range)?;
    to.get_mut(into..into + len)
        .ok_or_else(out_of_range)?
        .copy_from_slice(src);
    Ok(())
}
