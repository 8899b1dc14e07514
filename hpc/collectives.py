"""Array collectives: broadcast, gather and allgather of rows, reductions, top-k merges.

Domain code moves arrays between ranks with these and never with raw communicator calls.
Arrays travel as raw bytes (any dtype, byte order kept, nothing pickled); only shapes and
dtypes, a few integers, go as metadata. Device arrays are staged through the host and come
back on the device (:func:`hpc.backend.array_module`), so callers pass what they hold.

All functions are collective over ``comm`` (default :func:`hpc.comm.world`); on one rank they
return their input without communicating.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .backend import array_module, to_host
from .comm import MPI, resolve_comm

__all__ = [
    "allgather_bytes",
    "allgather_object",
    "allgather_rows",
    "allgather_strings",
    "allreduce",
    "barrier",
    "bcast_array",
    "bcast_object",
    "gather_object",
    "gather_rows",
    "merge_topk",
    "row_counts",
]

_OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "lor": MPI.LOR, "land": MPI.LAND}


def _like(template: Any, host: np.ndarray) -> Any:
    """``host`` on the device ``template`` lives on (the host when it is a NumPy array)."""
    xp = array_module(template)
    return host if xp is np else xp.asarray(host)


def barrier(comm: Any = None) -> None:
    """Collective. Wait until every rank of ``comm`` arrives (before timing a phase)."""
    comm = resolve_comm(comm)
    if comm.Get_size() > 1:
        comm.Barrier()


def gather_object(value: Any, root: int = 0, comm: Any = None) -> list[Any] | None:
    """Collective. Every rank's small Python value, in rank order, on ``root``; None
    elsewhere."""
    comm = resolve_comm(comm)
    return [value] if comm.Get_size() == 1 else comm.gather(value, root=root)


def bcast_object(value: Any, root: int = 0, comm: Any = None) -> Any:
    """Collective. Rank ``root``'s small Python value (settings, a message, an error) on every
    rank. Arrays go with :func:`bcast_array`."""
    comm = resolve_comm(comm)
    return value if comm.Get_size() == 1 else comm.bcast(value, root=root)


def allgather_object(value: Any, comm: Any = None) -> list[Any]:
    """Collective. Every rank's small Python value, in rank order, on every rank."""
    comm = resolve_comm(comm)
    return [value] if comm.Get_size() == 1 else comm.allgather(value)


def bcast_array(a: Any, root: int = 0, comm: Any = None) -> Any:
    """Collective. Rank ``root``'s array (its shape and dtype too) on every rank; other ranks
    may pass None. Returned on the root's kind of device where the caller passed an array."""
    comm = resolve_comm(comm)
    if comm.Get_size() == 1:
        return a
    host = np.ascontiguousarray(to_host(a)) if comm.Get_rank() == root else None
    meta = (host.shape, host.dtype.str) if host is not None else None
    shape, dtype = comm.bcast(meta, root=root)
    out = host if host is not None else np.empty(shape, dtype=np.dtype(dtype))
    comm.Bcast(out.view(np.uint8).reshape(-1) if out.size else np.empty(0, np.uint8), root=root)
    return _like(a, out) if a is not None else out


def row_counts(n: int, comm: Any = None) -> np.ndarray:
    """Collective. Every rank's ``n`` (int64, in rank order)."""
    comm = resolve_comm(comm)
    counts = np.empty(comm.Get_size(), np.int64)
    comm.Allgather(np.array([n], np.int64), counts)
    return counts


def _rows_meta(a: np.ndarray, comm: Any) -> tuple[np.ndarray, tuple[int, ...], np.dtype]:
    """Row counts, and the row shape and dtype every rank agrees on (a rank with no rows may
    pass any shape of zero rows)."""
    counts = row_counts(a.shape[0] if a.ndim else 1, comm)
    metas = comm.allgather((a.shape[1:], a.dtype.str, a.shape[0] > 0))
    given = [(shape, dt) for shape, dt, has in metas if has] or [metas[0][:2]]
    if len(set(given)) != 1:
        raise ValueError(f"ranks hold rows of different shapes or dtypes: {sorted(set(given))}")
    shape, dt = given[0]
    return counts, tuple(shape), np.dtype(dt)


def _row_buffers(a: Any, comm: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple, Any]:
    """The bytes to send, every rank's byte count and displacement, and the shape of the
    whole result (rows of all ranks) with its dtype."""
    host = np.ascontiguousarray(to_host(a))
    counts, shape, dtype = _rows_meta(host, comm)
    if host.shape[0] == 0:
        host = np.empty((0, *shape), dtype)
    per_row = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    nbytes = counts * per_row
    displs = np.zeros_like(nbytes)
    np.cumsum(nbytes[:-1], out=displs[1:])
    return host.view(np.uint8).reshape(-1), nbytes, displs, (int(counts.sum()), *shape), dtype


def gather_rows(a: Any, root: int = 0, comm: Any = None) -> Any:
    """Collective. Every rank's rows (axis 0) concatenated in rank order on ``root``; None
    elsewhere. Ranks with no rows take part with an empty array."""
    comm = resolve_comm(comm)
    if comm.Get_size() == 1:
        return a
    send, nbytes, displs, shape, dtype = _row_buffers(a, comm)
    recv = np.empty(int(nbytes.sum()), np.uint8) if comm.Get_rank() == root else None
    comm.Gatherv(send, (recv, nbytes, displs, MPI.BYTE) if recv is not None else None, root=root)
    return None if recv is None else _like(a, recv.view(dtype).reshape(shape))


def allgather_rows(a: Any, comm: Any = None) -> Any:
    """Collective. Every rank's rows (axis 0) concatenated in rank order, on every rank."""
    comm = resolve_comm(comm)
    if comm.Get_size() == 1:
        return a
    send, nbytes, displs, shape, dtype = _row_buffers(a, comm)
    recv = np.empty(int(nbytes.sum()), np.uint8)
    comm.Allgatherv(send, (recv, nbytes, displs, MPI.BYTE))
    return _like(a, recv.view(dtype).reshape(shape))


def allgather_bytes(
    lengths: np.ndarray, data: np.ndarray, comm: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Collective. Every rank's variable-length byte strings, in rank order, on every rank.

    A rank passes its strings as their ``lengths`` (int64) and ``data``, the bytes of all of
    them one after another (``uint8``, ``lengths.sum()`` long). Returns every rank's
    ``(lengths, data)`` concatenated in rank order, and how many strings each rank gave (so a
    rank finds its own at ``counts[:rank].sum()``). Only the buffers travel, nothing pickled.
    """
    comm = resolve_comm(comm)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64).reshape(-1)
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    if comm.Get_size() == 1:
        return lengths, data, np.array([lengths.size], np.int64)
    sizes = np.empty((comm.Get_size(), 2), np.int64)
    comm.Allgather(np.array([lengths.size, data.size], np.int64), sizes)
    counts, nbytes = sizes[:, 0].copy(), sizes[:, 1].copy()
    all_lengths = np.empty(int(counts.sum()), np.int64)
    comm.Allgatherv(lengths, (all_lengths, counts))
    all_data = np.empty(int(nbytes.sum()), np.uint8)
    comm.Allgatherv(data if data.size else np.empty(0, np.uint8), (all_data, nbytes))
    return all_lengths, all_data, counts


def allgather_strings(words: list[str], comm: Any = None) -> list[str]:
    """Collective. Every rank's strings, in rank order, on every rank (as UTF-8 bytes through
    :func:`allgather_bytes`, never pickled)."""
    encoded = [w.encode("utf-8") for w in words]
    lengths = np.array([len(b) for b in encoded], dtype=np.int64)
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    all_lengths, all_blob, _ = allgather_bytes(lengths, blob, comm)
    raw = all_blob.tobytes()
    starts = np.concatenate([[0], np.cumsum(all_lengths)]).tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(starts[:-1], starts[1:], strict=True)]


def allreduce(value: Any, op: str = "sum", comm: Any = None) -> Any:
    """Collective. Element-wise ``op`` ("sum", "max", "min", "lor", "land") of a number or an
    array over the ranks; a number comes back as a Python number, an array as an array."""
    comm = resolve_comm(comm)
    if op not in _OPS:
        raise ValueError(f"op {op!r}: expected one of {', '.join(_OPS)}")
    scalar = np.isscalar(value) or (isinstance(value, np.ndarray) and value.ndim == 0)
    host = np.ascontiguousarray(np.asarray(to_host(value)))
    if comm.Get_size() == 1:
        out = host.copy()
    else:
        out = np.empty_like(host)
        comm.Allreduce(host, out, op=_OPS[op])
    return out.item() if scalar else _like(value, out)


def merge_topk(
    d: np.ndarray,
    i: np.ndarray,
    root: int = 0,
    comm: Any = None,
    merge: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple] | None = None,
) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """Collective. The k best of every rank's sorted ``(q, k)`` lists, merged on ``root`` along a
    binomial tree (log2(ranks) steps, ``k`` entries per query per message); None elsewhere.

    Best means smallest ``(d, i)`` (ties go to the smaller id; missing entries have id -1 and
    sort last). ``merge(d1, i1, d2, i2) -> (d, i)`` replaces that order.
    """
    comm = resolve_comm(comm)
    merge = merge or merge_sorted
    size = comm.Get_size()
    d, i = np.ascontiguousarray(d), np.ascontiguousarray(i)
    rel = (comm.Get_rank() - root) % size
    step = 1
    while step < size:
        if rel % (2 * step) == 0:
            if rel + step < size:
                peer = (rel + step + root) % size
                bd, bi = np.empty_like(d), np.empty_like(i)
                comm.Recv(bd, source=peer, tag=11)
                comm.Recv(bi, source=peer, tag=12)
                d, i = merge(d, i, bd, bi)
        else:
            peer = (rel - step + root) % size
            comm.Send(d, dest=peer, tag=11)
            comm.Send(i, dest=peer, tag=12)
            return None, None
        step *= 2
    return d, i


def merge_sorted(
    d1: np.ndarray, i1: np.ndarray, d2: np.ndarray, i2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Local. The ``k`` smallest ``(d, i)`` pairs per row of two ``(q, k)`` lists; id -1 (no
    entry) sorts last."""
    k = d1.shape[1]
    d = np.concatenate([d1, d2], axis=1)
    i = np.concatenate([i1, i2], axis=1)
    missing = i < 0
    order = np.lexsort((np.where(missing, np.iinfo(np.int64).max, i), d, missing), axis=1)
    order = order[:, :k]
    return np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)
