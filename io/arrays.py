"""Decomposed arrays in HDF5: each rank's owned block into one global dataset, and back.

The dataset holds the global array in natural (row-major) order without ghost cells, so a file
written on N ranks reads on any M ranks, with plain h5py, h5dump or ParaView. Every rank takes
part in every write and read, also ranks that own nothing (they select none): h5py's high-level
collective context hangs in that case (h5py issue 965), so the low-level calls are used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np
from h5py import h5s

from hpc.backend import is_device_array, to_host
from hpc.decomposition import CartDecomposition

from . import faults
from .errors import CorruptDataError, LayoutMismatchError, MissingDataError, StorageError
from .files import as_target, collective_xfer, first_error

__all__ = ["write_array", "read_array", "chunk_shape", "write_block", "read_block"]

_CHUNK_BYTES = 4 << 20


def chunk_shape(
    shape: tuple[int, ...], itemsize: int, target: int = _CHUNK_BYTES
) -> tuple[int, ...]:
    """A chunk of about ``target`` bytes: whole trailing axes first, then a slab of the next."""
    budget = max(1, target // itemsize)
    chunk = list(shape)
    for axis in range(len(shape)):
        trailing = math.prod(chunk[axis + 1 :])
        if math.prod(chunk[axis:]) <= budget:
            break
        chunk[axis] = max(1, min(shape[axis], budget // max(trailing, 1)))
        if chunk[axis] * trailing <= budget:
            break
        chunk[axis] = 1
    return tuple(max(1, c) for c in chunk)


def _spaces(dset: Any, start, count, memory: np.ndarray, mem_start) -> tuple[Any, Any, Any]:
    """File selection, memory selection and buffer; a rank that moves nothing selects none
    (and still takes part in the collective call)."""
    fspace = dset.id.get_space()
    if math.prod(count) == 0:
        fspace.select_none()
        mspace = h5s.create_simple((1,))
        mspace.select_none()
        return fspace, mspace, np.zeros(1, dtype=memory.dtype)
    fspace.select_hyperslab(tuple(start), tuple(count))
    mspace = h5s.create_simple(tuple(memory.shape))
    mspace.select_hyperslab(tuple(mem_start), tuple(count))
    return fspace, mspace, memory


def write_from(
    dset: Any,
    memory: np.ndarray,
    mem_start,
    start,
    count,
    parallel: bool,
    same_type: bool = False,
) -> None:
    """Collective in parallel files. Write the box ``mem_start``+``count`` of the C-contiguous
    host array ``memory`` to ``start`` in ``dset``, straight from memory (no staging copy).

    A rank with nothing to write selects none and still takes part. ``same_type`` writes the
    bytes as the file's type (UTF-8 strings held as NumPy bytes).

    A dataset with no elements (a table of no rows) has no storage to transfer to: every
    rank returns at once (a collective MPI-IO write would fail on its undefined address).
    """
    if math.prod(dset.shape) == 0:
        return
    fspace, mspace, memory = _spaces(dset, start, count, memory, mem_start)
    mtype = dset.id.get_type() if same_type else None
    dset.id.write(mspace, fspace, memory, mtype=mtype, dxpl=collective_xfer() if parallel else None)


def read_into(dset: Any, memory: np.ndarray, mem_start, start, count, parallel: bool) -> None:
    """Collective in parallel files (unless filtered). Read ``count`` cells at ``start`` of
    ``dset`` into the box at ``mem_start`` of the C-contiguous host array ``memory``.

    Filtered (checksummed) datasets are read independently, so a checksum failure on one rank
    raises there instead of stalling the others inside a collective transfer. A dataset with no
    elements has nothing to read (every rank returns at once).
    """
    if math.prod(dset.shape) == 0:
        return
    fspace, mspace, memory = _spaces(dset, start, count, memory, mem_start)
    collective = parallel and not dset.fletcher32 and dset.compression is None
    dset.id.read(mspace, fspace, memory, dxpl=collective_xfer() if collective else None)


def write_block(
    dset: Any, block: np.ndarray, start: tuple[int, ...], parallel: bool, same_type: bool = False
) -> None:
    """Collective in parallel files. Write all of ``block`` at ``start``."""
    block = np.ascontiguousarray(block)
    write_from(dset, block, (0,) * block.ndim, start, block.shape, parallel, same_type)


def read_block(
    dset: Any, start: tuple[int, ...], count: tuple[int, ...], dtype: Any, parallel: bool
) -> np.ndarray:
    """Collective in parallel files (unless filtered). The block at ``start`` of ``count``."""
    out = np.empty(count, dtype=dtype)
    read_into(dset, out, (0,) * len(count), start, count, parallel)
    return out


_agree = first_error  # the first message any rank saw


def _check_local(local: Any, decomp: CartDecomposition) -> str | None:
    if tuple(local.shape) != decomp.ghost_shape:
        return (
            f"rank {decomp.rank}: local array of shape {tuple(local.shape)} does not match its "
            f"block with ghosts {decomp.ghost_shape}"
        )
    kind = np.dtype(local.dtype).kind
    if kind not in "biufc":
        return f"rank {decomp.rank}: dtype {local.dtype} cannot be stored as an array dataset"
    return None


def write_array(
    path_or_group: Any,
    name: str,
    local: Any,
    decomp: CartDecomposition,
    attrs: Mapping[str, Any] | None = None,
    *,
    checksum: bool = False,
) -> None:
    """Collective. Write every rank's owned block of ``local`` into one global dataset ``name``.

    Parameters
    ----------
    path_or_group : str, path or h5py.Group
        A file (opened for appending, created if missing) or an open group of a file opened with
        :func:`hpc.io.open_file`.
    name : str
        Dataset path inside the file or group; an existing dataset of that name is replaced.
    local : array
        The local array with ghost cells (host or device); ghosts are not written.
    decomp : CartDecomposition
        Its layout.
    attrs : mapping, optional
        Attributes for the dataset (rank 0's values are used on every rank).
    checksum : bool
        Chunked storage with the Fletcher32 filter, verified by HDF5 on every read.

    Raises
    ------
    StorageError
        On every rank, before the file is touched, if any rank's array does not fit its block or
        has an unsupported dtype; or if the file cannot be opened.
    """
    comm = decomp._require_comm()
    error = _agree(comm, _check_local(local, decomp))
    if error:
        raise StorageError(error, path=_describe(path_or_group), dataset=name, all_ranks=True)
    dtype = np.dtype(local.dtype)
    attrs = comm.bcast(dict(attrs or {}), root=0) if comm.Get_size() > 1 else dict(attrs or {})
    nbytes = int(np.prod(decomp.global_shape)) * dtype.itemsize
    with as_target(path_or_group, "a", comm, reserve=nbytes) as target:
        faults.inject("write", target.path, target.rank)
        if target.kind == "gather":
            full = gather_global(decomp, local)
            if target.rank == 0:
                dset = _create(target.group, name, decomp.global_shape, dtype, checksum)
                dset[...] = full
                dset.attrs.update(attrs)
            return
        dset = _create(target.group, name, decomp.global_shape, dtype, checksum)
        parallel = target.kind == "mpio"
        if is_device_array(local) or not local.flags.c_contiguous:
            owned = np.ascontiguousarray(to_host(decomp.interior(local)))
            write_block(dset, owned, decomp.offset, parallel)
        else:  # straight from the ghosted array: HDF5 skips the ghosts itself
            halo = (decomp.halo,) * decomp.ndim
            write_from(dset, local, halo, decomp.offset, decomp.local_shape, parallel)
        for key, value in attrs.items():
            dset.attrs[key] = value


def _counts_bytes(decomp: CartDecomposition, itemsize: int) -> tuple[list[Any], list[int]]:
    blocks = [decomp.block_of(r) for r in range(decomp.size)]
    counts = [math.prod(s.stop - s.start for s in b) * itemsize for b in blocks]
    return blocks, counts


def gather_global(decomp: CartDecomposition, local: Any) -> np.ndarray | None:
    """Collective. The global array on rank 0 (None elsewhere) from every rank's owned block.

    The blocks travel as raw bytes (buffer-based ``Gatherv``), so every dtype HDF5 stores
    arrives bit for bit, also those MPI has no datatype for (``float16``, non-native byte
    order).
    """
    comm = decomp._require_comm()
    mine = np.ascontiguousarray(to_host(decomp.interior(local)))
    dtype = mine.dtype
    blocks, counts = _counts_bytes(decomp, dtype.itemsize)
    send = mine.reshape(-1).view(np.uint8)
    if comm.Get_rank() != 0:
        comm.Gatherv(send, None, root=0)
        return None
    flat = np.empty(sum(counts), dtype=np.uint8)
    comm.Gatherv(send, (flat, counts), root=0)
    out = np.empty(decomp.global_shape, dtype=dtype)
    start = 0
    for block, n in zip(blocks, counts, strict=True):
        shape = [s.stop - s.start for s in block]
        out[block] = flat[start : start + n].view(dtype).reshape(shape)
        start += n
    return out


def scatter_global(decomp: CartDecomposition, full: np.ndarray | None) -> Any:
    """Collective. A local array (ghosts zero, on the decomposition's device) holding this
    rank's block of ``full`` (given on rank 0), moved as raw bytes like
    :func:`gather_global`."""
    comm = decomp._require_comm()
    dtype = np.dtype(comm.bcast(full.dtype if comm.Get_rank() == 0 else None, root=0))
    blocks, counts = _counts_bytes(decomp, dtype.itemsize)
    send = None
    if comm.Get_rank() == 0:
        assert full is not None
        parts = [np.ascontiguousarray(full[b]).reshape(-1).view(np.uint8) for b in blocks]
        send = (np.concatenate(parts) if parts else np.empty(0, np.uint8), counts)
    mine = np.empty(decomp.local_shape, dtype=dtype)
    comm.Scatterv(send, mine.reshape(-1).view(np.uint8), root=0)
    local = decomp.allocate(dtype)
    local[decomp.interior_slices] = decomp.backend.asarray(mine)
    return local


def _create(group: h5py.Group, name: str, shape: tuple[int, ...], dtype: Any, checksum: bool):
    if name in group:
        del group[name]
    if checksum:
        return group.create_dataset(
            name,
            shape=shape,
            dtype=dtype,
            chunks=chunk_shape(shape, dtype.itemsize),
            fletcher32=True,
            fillvalue=np.zeros((), dtype=dtype),  # a zero of the type (complex: a compound)
        )
    return group.create_dataset(name, shape=shape, dtype=dtype)


def _describe(where: Any) -> str:
    if isinstance(where, h5py.Group):
        return where.file.filename
    return getattr(where, "path", None) or str(where)


def read_array(path_or_group: Any, name: str, decomp: CartDecomposition, dtype: Any = None) -> Any:
    """Collective. This rank's block of dataset ``name``, as a local array with ghost cells.

    The dataset may have been written on any number of ranks; ``decomp`` is the reader's layout.
    The array is allocated on ``decomp``'s backend device (ghosts zero).

    Raises
    ------
    StorageError
        If the file cannot be opened or has no dataset ``name``.
    LayoutMismatchError
        If the dataset's shape differs from ``decomp.global_shape`` (or ``dtype`` is given and
        differs from the stored one).
    CorruptDataError
        If HDF5 cannot read the data (a failed checksum, a truncated file).
    """
    comm = decomp._require_comm()
    with as_target(path_or_group, "r", comm) as target:
        faults.inject("read", target.path, target.rank)
        path = target.path
        error, stored = None, None
        if target.does_io:
            error, stored = _inspect(target.group, name, decomp, dtype)
        error = _agree(comm, error)
        if error:
            kind, message = error
            raise {"missing": MissingDataError, "layout": LayoutMismatchError}[kind](
                message, path=path, dataset=name, all_ranks=True
            )
        if target.kind == "gather":
            full, failure = None, None
            if target.rank == 0:
                try:
                    full = target.group[name][...]
                except OSError as exc:
                    failure = f"HDF5 could not read the data: {exc}"
            failure = _agree(comm, failure)
            if failure:
                raise CorruptDataError(failure, path=path, dataset=name, all_ranks=True)
            return scatter_global(decomp, full)
        failure = None
        on_device = decomp.backend.is_gpu
        local = np.zeros(decomp.ghost_shape, dtype=stored) if on_device else decomp.allocate(stored)
        try:
            read_into(
                target.group[name],
                local,
                (decomp.halo,) * decomp.ndim,
                decomp.offset,
                decomp.local_shape,
                target.kind == "mpio",
            )
        except OSError as exc:
            failure = f"rank {comm.Get_rank()}: HDF5 could not read the data: {exc}"
        failure = _agree(comm, failure)
        if failure:
            raise CorruptDataError(failure, path=path, dataset=name, all_ranks=True)
    return decomp.backend.asarray(local) if on_device else local


def _inspect(group: Any, name: str, decomp: CartDecomposition, dtype: Any):
    """(error, stored dtype): the error is (kind, message) or None."""
    if name not in group or not isinstance(group[name], h5py.Dataset):
        return ("missing", "no such dataset"), None
    dset = group[name]
    if tuple(dset.shape) != decomp.global_shape:
        return (
            "layout",
            f"stored shape {tuple(dset.shape)} != expected {decomp.global_shape}",
        ), None
    if dtype is not None and np.dtype(dtype) != dset.dtype:
        return ("layout", f"stored dtype {dset.dtype} != expected {np.dtype(dtype)}"), None
    return None, dset.dtype
