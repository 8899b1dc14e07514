"""Decomposed arrays in HDF5: each rank's owned block into one global dataset, and back.

The dataset holds the global array in natural (row-major) order without ghost cells, so a file
written on N ranks reads on any M ranks, with plain h5py, h5dump or ParaView. Every rank takes
part in every write and read, also ranks that own nothing (they select none): h5py's high-level
collective context hangs in that case (h5py issue 965), so the low-level calls are used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5o, h5s, h5z

from hpc.backend import is_device_array, to_host
from hpc.comm import abort_unless_agreed
from hpc.decomposition import CartDecomposition

from . import faults
from .errors import (
    CorruptDataError,
    LayoutMismatchError,
    MissingDataError,
    StorageError,
    from_os_error,
)
from .files import (
    Target,
    _check_space,
    _probe_writable,
    as_target,
    collective_xfer,
    first_error,
    io_mode,
)

__all__ = [
    "write_array",
    "read_array",
    "chunk_shape",
    "write_block",
    "read_block",
    "GATHER_BELOW",
]

_CHUNK_BYTES = 4 << 20

#: Arrays of at most this many bytes, counted at 8 per element (so that every rank takes the
#: same path whatever its dtype), given as a path on several ranks with MPI-IO, travel through
#: rank 0: a ``Gatherv`` (which also carries every rank's check of its array) and a serial write
#: then one broadcast of the outcome; a serial read, a broadcast and a ``Scatterv``. Below it the
#: collective open, metadata and close of a parallel file cost more than moving the bytes, and
#: each of MPI-IO's many synchronisations waits for the rank a loaded node ran last. Measured on
#: two ranks of one 2-core node under load (write and fsync, 8-20 repetitions): 16 MB best
#: 28.4 ms through rank 0 against 27.7 ms with MPI-IO, median 40 ms against 53-81 ms; 64 MB
#: MPI-IO ahead (best 71 ms against 120 ms).
GATHER_BELOW = 16 << 20

# Bytes ahead of each rank's block in the through-root gather: a status byte (0: the array fits
# its block) and the dtype's ``str`` (at most 15 ASCII bytes, e.g. ``<c16``).
_HEADER = 16


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
    error = _check_local(local, decomp)
    attrs = dict(attrs or {})
    if math.prod(decomp.global_shape) * 8 <= GATHER_BELOW and _mpio_path(path_or_group, comm):
        # every rank's check travels in the gather (one collective fewer)
        _write_through_root(path_or_group, name, local, decomp, attrs, checksum, error)
        return
    nbytes = math.prod(decomp.global_shape) * np.dtype(local.dtype).itemsize
    if comm.Get_size() > 1:  # one collective: every rank's check, rank 0's attrs and size
        mine = (error, attrs, nbytes) if comm.Get_rank() == 0 else (error, None, None)
        everyone = comm.allgather(mine)
        error = next((e for e, _, _ in everyone if e), None)
        _, attrs, nbytes = everyone[0]
    if error:
        raise StorageError(error, path=_describe(path_or_group), dataset=name, all_ranks=True)
    dtype = np.dtype(local.dtype)
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
    """Dataset ``name`` for a whole new content. An existing one of the very layout asked for
    (shape, dtype, contiguous or the checksummed chunks, nothing else linking to it) is
    reused, its attributes cleared: rewriting it costs no metadata operations and no new file
    space (a deleted dataset's space is not reclaimed by HDF5 once the file is closed). Any
    other is replaced."""
    if name in group:
        hard = isinstance(group.get(name, getlink=True), h5py.HardLink)
        old = group.get(name) if hard else None  # a soft or external link is replaced itself
        if _reusable(old, shape, dtype, checksum):
            for key in list(old.attrs):
                del old.attrs[key]
            return old
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


def _reusable(old: Any, shape: tuple[int, ...], dtype: Any, checksum: bool) -> bool:
    if not isinstance(old, h5py.Dataset):
        return False
    dcpl = old.id.get_create_plist()
    if checksum:
        same = dcpl.get_layout() == h5d.CHUNKED and dcpl.get_nfilters() == 1
        same = same and dcpl.get_filter(0)[0] == h5z.FILTER_FLETCHER32
        same = same and dcpl.get_chunk() == chunk_shape(tuple(shape), np.dtype(dtype).itemsize)
    else:
        same = dcpl.get_layout() == h5d.CONTIGUOUS and dcpl.get_external_count() == 0
    space = old.id.get_space()
    return (
        same
        and space.shape == tuple(shape)
        and space.get_simple_extent_dims(True) == tuple(shape)
        and old.id.dtype == dtype
        and h5o.get_info(old.id).rc == 1
    )


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
    if math.prod(decomp.global_shape) * 8 <= GATHER_BELOW and _mpio_path(path_or_group, comm):
        return _read_through_root(path_or_group, name, decomp, dtype)
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


def _mpio_path(where: Any, comm: Any) -> bool:
    """True (alike on every rank) when ``where`` is a path that would be opened with MPI-IO."""
    return not isinstance(where, (h5py.Group, Target)) and io_mode(comm) == "mpio"


def _write_through_root(
    path: Any,
    name: str,
    local: Any,
    decomp: CartDecomposition,
    attrs: Mapping[str, Any],
    checksum: bool,
    error: str | None,
) -> None:
    """Collective. :func:`write_array` of a small array to a path: the blocks are gathered to
    rank 0 (``Gatherv``), each behind a header with its rank's check (``error``) and dtype;
    rank 0 alone opens, writes and closes the file (serial HDF5), then broadcasts the outcome.
    Two synchronisations in all instead of the collective open, create, transfer and close of
    a parallel file.

    Every rank returns once the file is closed, or raises the same :class:`StorageError`: a
    rank's array that does not fit its block or dtypes that differ between ranks (before the
    file is touched), a missing or read-only directory, no space, a failed write or close. An
    unforeseen error of one rank ends the job, as inside a collective transfer."""
    comm = decomp._require_comm()
    rank = comm.Get_rank()
    what = f"collective I/O on {str(path)!r}"
    decomp.backend  # noqa: B018 - on every rank: its first use is collective
    outcome: Any = None
    try:
        faults.inject("write", path, rank)
        parts, checked = _gather_blocks(decomp, local, error)
        if rank == 0:
            outcome = checked
            if checked is None:
                outcome = _store(Path(path), name, decomp, parts, attrs, checksum)
            elif checked != "check":
                outcome = StorageError(checked, path=_describe(path), dataset=name)
    except BaseException as exc:
        abort_unless_agreed(comm, what, exc)
        raise
    outcome = comm.bcast(outcome, root=0)
    if outcome == "check":  # some rank's array does not fit: every rank learns the first one
        message = _agree(comm, error)
        raise StorageError(message, path=_describe(path), dataset=name, all_ranks=True)
    if outcome:
        outcome.all_ranks = True
        raise outcome


def _header(error: str | None, dtype: np.dtype) -> np.ndarray:
    head = np.zeros(_HEADER, dtype=np.uint8)
    head[0] = error is not None
    tag = dtype.str.encode("ascii")[: _HEADER - 1]
    head[1 : 1 + len(tag)] = np.frombuffer(tag, dtype=np.uint8)
    return head


def _gather_blocks(
    decomp: CartDecomposition, local: Any, error: str | None
) -> tuple[list[tuple[Any, ...]] | None, Any]:
    """Collective. On rank 0, ``(memory, mem_start, start, count)`` of every rank's owned block
    and what the headers say (None elsewhere). Rank 0's own block is used straight from its
    local array (no copy); the others' arrive as raw bytes (any dtype, bit for bit) behind a
    header of ``_HEADER`` bytes, all in one ``Gatherv``.

    What the headers say: None when every array fits its block with rank 0's dtype; ``"check"``
    when a rank's does not (its block is sent as zeros: the counts still match); else a message
    naming the first rank whose dtype differs from rank 0's."""
    comm = decomp._require_comm()
    dtype = np.dtype(local.dtype)
    blocks, counts = _counts_bytes(decomp, dtype.itemsize)
    if comm.Get_rank() != 0:
        mine = counts[comm.Get_rank()]
        send = np.empty(_HEADER + mine, dtype=np.uint8)
        send[:_HEADER] = _header(error, dtype)
        if error is None and mine:
            body = send[_HEADER:].view(dtype).reshape(decomp.local_shape)
            body[...] = to_host(decomp.interior(local))
        else:
            send[_HEADER:] = 0
        comm.Gatherv(send, None, root=0)
        return None, None
    sizes = [0] + [_HEADER + n for n in counts[1:]]  # rank 0 writes its block from where it is
    flat = np.empty(sum(sizes), dtype=np.uint8)
    comm.Gatherv(np.empty(0, np.uint8), (flat, sizes), root=0)
    ndim = decomp.ndim
    own = _header(error, dtype)
    checked: Any = "check" if error else None
    parts: list[tuple[Any, ...]] = []
    begin = 0
    for r, (block, n) in enumerate(zip(blocks[1:], sizes[1:], strict=True), start=1):
        head = flat[begin : begin + _HEADER]
        if checked is None and head[0]:
            checked = "check"
        elif checked is None and bytes(head[1:]) != bytes(own[1:]):
            theirs = bytes(head[1:]).rstrip(b"\0").decode("ascii", "replace")
            checked = (
                f"rank {r}: dtype {np.dtype(theirs) if _known(theirs) else theirs} differs "
                f"from rank 0's {dtype}: every rank must write the same dtype"
            )
        count = tuple(s.stop - s.start for s in block)
        memory = flat[begin + _HEADER : begin + n].view(dtype).reshape(count)
        parts.append((memory, (0,) * ndim, tuple(s.start for s in block), count))
        begin += n
    if checked is not None:
        return None, checked
    if is_device_array(local) or not local.flags.c_contiguous:
        first = np.ascontiguousarray(to_host(decomp.interior(local)))
        parts.insert(0, (first, (0,) * ndim, decomp.offset, decomp.local_shape))
    else:
        parts.insert(0, (local, (decomp.halo,) * ndim, decomp.offset, decomp.local_shape))
    return parts, None


def _known(text: str) -> bool:
    try:
        np.dtype(text)
    except TypeError:
        return False
    return True


def _store(
    path: Path,
    name: str,
    decomp: CartDecomposition,
    parts: list[tuple[Any, ...]] | None,
    attrs: Mapping[str, Any],
    checksum: bool,
) -> StorageError | None:
    """Local (rank 0). Write the blocks ``parts`` (:func:`_gather_blocks`) as dataset ``name``
    of ``path`` (appended to, created if missing); the file-system error met, if any, as a
    :class:`StorageError`."""
    assert parts is not None
    nbytes = math.prod(decomp.global_shape) * parts[0][0].dtype.itemsize
    operation = "opening for writing"
    try:
        _probe_writable(path, 0)
        operation = "checking free space"
        _check_space(path, nbytes, 0)
        operation = "opening with mode 'a'"
        with h5py.File(path, "a") as f:
            operation = "writing"
            dset = _create(f, name, decomp.global_shape, parts[0][0].dtype, checksum)
            for memory, mem_start, start, count in parts:
                if math.prod(count):
                    write_from(dset, memory, mem_start, start, count, False)
            for key, value in attrs.items():
                dset.attrs[key] = value
            operation = "closing"
    except StorageError as exc:
        return exc
    except OSError as exc:
        return from_os_error(exc, operation, path)
    return None


def _read_through_root(path: Any, name: str, decomp: CartDecomposition, dtype: Any) -> Any:
    """Collective. :func:`read_array` of a small array from a path: rank 0 alone opens the file
    (serial HDF5), checks the dataset and reads its own block straight into its local array and
    the others' into one buffer, broadcasts the outcome (an error every rank raises, or the
    stored dtype) and sends the blocks as raw bytes (one ``Scatterv``)."""
    comm = decomp._require_comm()
    rank = comm.Get_rank()
    what = f"collective I/O on {str(path)!r}"
    backend = decomp.backend  # on every rank: its first use is collective
    local, flat, outcome = None, None, None
    try:
        faults.inject("read", path, rank)
        if rank == 0:
            local, flat, outcome = _load(Path(path), name, decomp, dtype)
    except BaseException as exc:
        abort_unless_agreed(comm, what, exc)
        raise
    outcome = comm.bcast(outcome, root=0)
    if isinstance(outcome, StorageError):
        outcome.all_ranks = True
        raise outcome
    stored = np.dtype(outcome)
    _, counts = _counts_bytes(decomp, stored.itemsize)
    counts[0] = 0  # rank 0 read its block in place
    if rank == 0:
        comm.Scatterv((flat, counts), np.empty(0, np.uint8), root=0)
        return backend.asarray(local) if backend.is_gpu else local
    mine = np.empty(decomp.local_shape, dtype=stored)
    comm.Scatterv(None, mine.reshape(-1).view(np.uint8), root=0)
    local = decomp.allocate(stored)
    local[decomp.interior_slices] = backend.asarray(mine)
    return local


def _load(
    path: Path, name: str, decomp: CartDecomposition, dtype: Any
) -> tuple[Any, Any, Any]:
    """Local (rank 0). (rank 0's local array, the other ranks' blocks as bytes, the stored
    dtype), or (None, None, the error met)."""
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        return None, None, from_os_error(exc, "opening with mode 'r'", path)
    with f:
        error, stored = _inspect(f, name, decomp, dtype)
        if error:
            kind, message = error
            cls = {"missing": MissingDataError, "layout": LayoutMismatchError}[kind]
            return None, None, cls(message, path=str(path), dataset=name)
        dset = f[name]
        blocks, counts = _counts_bytes(decomp, stored.itemsize)
        gpu = decomp.backend.is_gpu
        local = np.zeros(decomp.ghost_shape, dtype=stored) if gpu else decomp.allocate(stored)
        flat = np.empty(sum(counts[1:]), dtype=np.uint8)
        try:
            halo = (decomp.halo,) * decomp.ndim
            if math.prod(decomp.local_shape):
                read_into(dset, local, halo, decomp.offset, decomp.local_shape, False)
            begin = 0
            for block, n in zip(blocks[1:], counts[1:], strict=True):
                count = tuple(b.stop - b.start for b in block)
                if n:
                    memory = flat[begin : begin + n].view(stored).reshape(count)
                    start = tuple(b.start for b in block)
                    read_into(dset, memory, (0,) * len(count), start, count, False)
                begin += n
        except OSError as exc:
            return None, None, CorruptDataError(
                f"HDF5 could not read the data: {exc}", path=str(path), dataset=name
            )
        return local, flat, stored
