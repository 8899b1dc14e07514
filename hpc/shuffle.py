"""All-to-all shuffle of column arrays by destination rank (hash joins, group-bys, sharding).

Rows go to the rank named by ``dest``: counts first (``Alltoall``), then one ``Alltoallv`` per
column on raw buffers (no pickling). Rows keep their order within each (source, destination)
pair and arrive ordered by source rank, so the result is deterministic. Device (CuPy) columns
are staged through host memory unless the MPI is CUDA-aware, as for the halo exchange.

Host rows are grouped by destination with a counting sort (:func:`group_by_destination`): a
histogram of destinations per chunk of rows, prefix sums, then a scatter of row numbers, both
passes threaded over chunks. It is linear, needs no comparison, and gives the permutation of a
stable sort by destination. Columns are packed for the ``Alltoallv`` by the same scatter, each
value written straight to its destination's run (no permutation written and read back per
column). :func:`hash_shuffle` computes the destinations from key columns, hashing, choosing
the rank and counting in one pass, with destinations one byte wide up to 256 ranks.

Strings (:func:`shuffle_strings`) travel the same way as their rows' lengths and bytes: the
lengths in a fixed-width ``Alltoallv``, the bytes of each destination's rows packed one after
another in a second, so a string column and the fixed-width columns shipped with the same
``dest`` arrive in the same row order.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from mpi4py import MPI
from numba import njit, prange

from .backend import array_module, to_host
from .comm import cuda_aware_mpi, resolve_comm

__all__ = [
    "shuffle",
    "hash_shuffle",
    "hash_destinations",
    "combined_hash",
    "shuffle_strings",
    "hash_partition",
    "group_by_destination",
]


def hash_partition(keys: Any, nparts: int) -> Any:
    """Destination ``0 .. nparts - 1`` of each integer key: a multiplicative (Fibonacci) hash,
    so consecutive keys spread evenly and the same key goes to the same part everywhere."""
    xp = _xp(keys)
    if xp is np:
        k = np.asarray(keys)
        if k.ndim == 1 and k.dtype.kind in "iu" and 1 <= nparts < 1 << 32:
            # one threaded pass instead of NumPy's five (cast, multiply, shift, modulo, cast)
            out = np.empty(k.shape[0], dtype=np.int64)
            if k.shape[0] <= _CHUNK_ROWS:
                _hash_rows(k, 0, k.shape[0], nparts, out)
            else:
                _hash_chunks(k, _CHUNK_ROWS, nparts, out)
            return out
    k = xp.asarray(keys).astype(xp.uint64, copy=False)
    h = (k * xp.uint64(_FIBONACCI)) >> xp.uint64(32)
    return (h % xp.uint64(nparts)).astype(xp.int64)


def shuffle(columns: dict[str, Any], dest: Any, comm: Any = None) -> dict[str, Any]:
    """Collective. Send row ``i`` of every column to rank ``dest[i]``.

    Parameters
    ----------
    columns : dict of str to array
        Equal-length 1-D arrays (NumPy or CuPy); every rank passes the same names and dtypes.
    dest : array of int
        Destination rank of each row, in ``[0, comm.size)``. Host destinations of an
        unsigned type (:func:`hash_destinations`' one or two bytes a row) are read as they
        are; others are read as int64.
    comm : MPI communicator, optional
        Default: :func:`hpc.comm.world`.

    Returns
    -------
    dict of str to array
        The rows this rank received, ordered by source rank, then by position at the source.
    """
    comm = resolve_comm(comm)
    size = comm.Get_size()
    xp = _xp(dest)
    dest = xp.asarray(dest)
    if xp is not np or dest.dtype not in _NARROW_RANKS:  # narrow host ranks read as they are
        dest = dest.astype(xp.int64, copy=False)
    n = int(dest.shape[0])
    problem = None
    for name, col in columns.items():
        if col.ndim != 1 or col.shape[0] != n:
            problem = f"column {name!r}: shape {col.shape}, expected ({n},)"
    counts = None
    if problem is None and n:
        if xp is np:  # the counting sort's histogram finds destinations out of range
            counts, problem = _counted(dest, size)
        elif int(dest.min()) < 0 or int(dest.max()) >= size:
            problem = _out_of_range(dest, size)
    _agree(problem, comm)
    if xp is not np:
        # rows grouped by destination, order kept; as int16 (under 2**15 ranks) the stable
        # sort is a linear radix sort instead of a merge sort of int64
        narrow = dest.astype(xp.int16) if size <= 1 << 15 else dest
        order = xp.argsort(narrow, kind="stable")
        send_counts = np.asarray(_host(xp.bincount(dest, minlength=size)), dtype=np.int64)
        return _exchange(columns, lambda col: col[order], send_counts, xp, comm)
    if counts is None:
        counts, _ = _histogram(dest, size)
    return _exchange_grouped(columns, dest, counts, comm)


def hash_destinations(keys: Any, nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Local. The destination of each row from its integer key columns, and the rows per
    destination, in one threaded pass.

    Parameters
    ----------
    keys : array or sequence of arrays of int
        One or more equal-length 1-D integer key columns (compared as int64). Host keys
        take the compiled pass; device (CuPy) keys the array module's operations.
    nparts : int
        Number of destinations.

    Returns
    -------
    dest : array of uint8, uint16 or uint32
        ``hash_partition(h.view(np.int64), nparts)`` for the keys' combined hash ``h``
        (``h = (h * 0x100000001B3) ^ (k * 0x9E3779B97F4A7C15)`` over the columns from
        ``h = 0``, unsigned 64-bit arithmetic), in the narrowest unsigned type that holds
        ``nparts - 1``; on the keys' device.
    counts : numpy.ndarray of int64
        Rows per destination.
    """
    seq = [keys] if not isinstance(keys, list | tuple) else list(keys)
    if any(_xp(k) is not np for k in seq):  # device keys: the same ranks, by the module
        xp = _xp(seq[0])
        dest = hash_partition(combined_hash(seq).view(np.int64), nparts)
        counts = np.asarray(_host(xp.bincount(dest, minlength=nparts)), dtype=np.int64)
        return dest.astype(_narrow_rank_type(nparts)), counts
    cols = _key_columns(keys)
    dest, counts = _hash_histogram(cols, nparts)
    return dest, counts.sum(axis=0)


def hash_shuffle(columns: dict[str, Any], keys: Any, comm: Any = None) -> dict[str, Any]:
    """Collective. Rows with equal keys meet on one rank: :func:`shuffle` with the
    destinations of :func:`hash_destinations` (the same rank as ``hash_partition`` of the
    keys' combined hash), computed and counted in the same pass over the keys.

    Parameters
    ----------
    columns : dict of str to array
        Equal-length 1-D arrays; every rank passes the same names and dtypes.
    keys : array or sequence of arrays of int
        The key columns (as long as the columns); may be among ``columns``.
    comm : MPI communicator, optional
        Default: :func:`hpc.comm.world`.

    Returns
    -------
    dict of str to array
        The rows this rank received, ordered by source rank, then by position at the source.
        Device (CuPy) keys or columns take :func:`shuffle`'s path with the same destinations
        (the combined hash computed by the array module), so ranks may mix them.
    """
    comm = resolve_comm(comm)
    size = comm.Get_size()
    seq = [keys] if not isinstance(keys, list | tuple) else list(keys)
    if any(_xp(a) is not np for a in [*seq, *columns.values()]):
        return shuffle(columns, hash_partition(combined_hash(seq).view(np.int64), size), comm)
    problem = None
    try:
        cols = _key_columns(keys)
    except ValueError as exc:
        cols, problem = (), str(exc)
    n = cols[0].shape[0] if cols else 0
    for name, col in columns.items():
        if not isinstance(col, np.ndarray) or col.ndim != 1 or col.shape[0] != n:
            problem = problem or f"column {name!r}: {type(col).__name__} of shape " \
                f"{getattr(col, 'shape', None)}, expected a host array of shape ({n},)"
    _agree(problem, comm)
    dest, counts = _hash_histogram(cols, size)
    return _exchange_grouped(columns, dest, counts, comm)


def combined_hash(keys: Any) -> Any:
    """Local. One uint64 per row of integer key columns (NumPy or CuPy), equal where all the
    keys are equal: ``h = (h * 0x100000001B3) ^ (k * 0x9E3779B97F4A7C15)`` over the columns
    from ``h = 0`` (the hash :func:`hash_destinations` partitions by)."""
    seq = [keys] if not isinstance(keys, list | tuple) else list(keys)
    if seq and all(isinstance(k, np.ndarray) and k.ndim == 1 and k.dtype.kind in "iu"
                   for k in seq):  # host integers: one threaded pass, no temporaries
        cols = _key_columns(seq)
        out = np.empty(cols[0].shape[0], dtype=np.uint64)
        if out.shape[0] <= _CHUNK_ROWS:
            _combine_rows(cols, 0, out.shape[0], out)
        else:
            _combine_chunks(cols, _CHUNK_ROWS, out)
        return out
    xp = _xp(seq[0]) if seq else np
    h = xp.zeros(seq[0].shape[0] if seq else 0, dtype=np.uint64)
    for k in seq:  # (64-bit keys viewed as they are, narrower ones widened)
        v = k.view(np.uint64) if k.dtype.itemsize == 8 else k.astype(np.int64).view(np.uint64)
        h = (h * np.uint64(0x100000001B3)) ^ (v * np.uint64(0x9E3779B97F4A7C15))
    return h


def _key_columns(keys: Any) -> tuple[np.ndarray, ...]:
    """Key columns as a tuple of read-only int64 host arrays (views where they are
    64-bit)."""
    seq = [keys] if isinstance(keys, np.ndarray) else list(keys)
    if not seq:
        raise ValueError("keys: expected at least one key column")
    n = None
    out = []
    for k in seq:
        if not isinstance(k, np.ndarray) or k.ndim != 1 or k.dtype.kind not in "iu":
            raise ValueError(f"keys: expected 1-D integer host arrays, got {type(k).__name__} "
                             f"{getattr(k, 'dtype', None)} {getattr(k, 'shape', None)}")
        if n is not None and k.shape[0] != n:
            raise ValueError(f"keys: columns of {n} and {k.shape[0]} rows")
        n = k.shape[0]
        k = np.ascontiguousarray(k.view(np.int64) if k.dtype.itemsize == 8
                                 else k.astype(np.int64)).view()
        k.flags.writeable = False  # every column typed alike (read-only), as the kernels'
        out.append(k)  # tuple must be: a read-only key (an Arrow buffer) beside a writable one
    return tuple(out)


def _narrow_rank_type(nparts: int) -> type:
    """The narrowest unsigned type that holds ``nparts - 1``."""
    return np.uint8 if nparts <= 1 << 8 else np.uint16 if nparts <= 1 << 16 else np.uint32


def _hash_histogram(cols: tuple[np.ndarray, ...], nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Destinations (narrow unsigned) and rows per (chunk, destination), as :func:`_histogram`
    lays them out."""
    if nparts < 1 or nparts >= 1 << 32:
        raise ValueError(f"nparts={nparts}: expected 1 .. 2**32 - 1")
    n = cols[0].shape[0] if cols else 0
    dest = np.empty(n, dtype=_narrow_rank_type(nparts))
    chunks, rows = _chunking(n, nparts)
    counts = np.zeros((chunks, nparts), dtype=np.int64)
    if chunks == 1:
        _hash_count_rows(cols, 0, n, nparts, dest, counts[0])
    else:
        _hash_count_chunks(cols, rows, nparts, dest, counts)
    return dest, counts


def _exchange_grouped(columns: dict[str, Any], dest: np.ndarray, counts: np.ndarray,
                      comm: Any) -> dict[str, Any]:
    """Collective. Host columns packed by destination (the counting sort's scatter, per
    column) and sent; ``counts``: rows per (chunk, destination) of :func:`_histogram`."""
    starts = _chunk_starts(counts)
    ends = starts + counts.astype(np.uint64)
    rows = _rows_per_chunk(dest.shape[0], counts.shape[0])
    return _exchange(columns, lambda col: _group(col, dest, rows, starts, ends),
                     counts.sum(axis=0), np, comm)


def _exchange(columns: dict[str, Any], pack: Any, send_counts: np.ndarray, xp: Any,
              comm: Any) -> dict[str, Any]:
    """Collective. Counts by ``Alltoall``, then one ``Alltoallv`` per column of the rows
    ``pack(column)`` put in destination order."""
    size = comm.Get_size()
    send_counts = np.asarray(send_counts, dtype=np.int64)
    recv_counts = np.empty(size, dtype=np.int64)
    comm.Alltoall(send_counts, recv_counts)
    send_displ = np.concatenate([[0], np.cumsum(send_counts)[:-1]])
    recv_displ = np.concatenate([[0], np.cumsum(recv_counts)[:-1]])
    total = int(recv_counts.sum())
    device = xp is not np
    direct = not device or cuda_aware_mpi()
    out: dict[str, Any] = {}
    for name, col in columns.items():
        packed = pack(col)
        recv = xp.empty(total, dtype=col.dtype)
        if device:
            xp.cuda.get_current_stream().synchronize()
        sbuf = packed if direct else _host(packed)
        rbuf = recv if direct else np.empty(total, dtype=col.dtype)
        mpi_type = MPI.BYTE
        item = np.dtype(col.dtype).itemsize
        comm.Alltoallv(
            [_bytes(sbuf), (send_counts * item, send_displ * item), mpi_type],
            [_bytes(rbuf), (recv_counts * item, recv_displ * item), mpi_type],
        )
        out[name] = recv if direct else xp.asarray(rbuf)
    return out


def shuffle_strings(
    offsets: Any, data: Any, dest: Any, rows: Any = None, comm: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Collective. Send string ``i`` (Arrow-style: ``offsets`` and ``data``) to rank
    ``dest[i]``, received in :func:`shuffle`'s order.

    Parameters
    ----------
    offsets : array of int
        Where each string starts in ``data`` and, last, where the final one ends (int32 or
        int64, an Arrow string array's ``n + 1`` offsets; the first need not be 0).
    data : array of uint8
        The strings' bytes.
    dest : array of int
        Destination rank of each row, in ``[0, comm.size)``.
    rows : array of int, optional
        Row ``i`` holds string ``rows[i]`` (a dictionary's codes; a negative one sends an
        empty string, for a NULL); by default row ``i`` holds string ``i``.
    comm : MPI communicator, optional
        Default: :func:`hpc.comm.world`.

    Returns
    -------
    offsets : numpy.ndarray of int64
        The received rows' ``m + 1`` offsets into ``data``, starting at 0.
    data : numpy.ndarray of uint8
        Their bytes, ordered as :func:`shuffle` orders the rows of the same ``dest``: by
        source rank, then by position at the source.

    Notes
    -----
    Arrays on a device are staged through the host and the result stays there (strings are
    read on the host). Byte counts per rank pair go to MPI as counts of bytes: below 2 GiB
    each, as for :func:`shuffle`.
    """
    comm = resolve_comm(comm)
    size = comm.Get_size()
    dest = np.ascontiguousarray(_host(dest)).astype(np.int64, copy=False)
    offsets = np.ascontiguousarray(_host(offsets))
    data = np.ascontiguousarray(_host(data)).view(np.uint8).reshape(-1)
    n = int(dest.shape[0])
    problem = None
    if dest.ndim != 1:
        problem = f"dest: expected a 1-D array, got shape {dest.shape}"
    elif offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.shape[0] < 1:
        problem = f"offsets: expected a 1-D integer array, got {offsets.dtype} {offsets.shape}"
    elif rows is None and offsets.shape[0] != n + 1:
        problem = f"offsets: {offsets.shape[0]} of them for {n} rows, expected {n + 1}"
    elif not 0 <= int(offsets[0]) <= int(offsets[-1]) <= data.shape[0]:
        problem = (f"offsets: {int(offsets[0])}..{int(offsets[-1])} outside the "
                   f"{data.shape[0]} bytes of data")
    if rows is not None and problem is None:
        rows = np.ascontiguousarray(_host(rows)).astype(np.int64, copy=False)
        strings = offsets.shape[0] - 1
        if rows.shape != (n,):
            problem = f"rows: shape {rows.shape}, expected ({n},)"
        elif n and int(rows.max()) >= strings:
            problem = f"rows: string {int(rows.max())} named, only {strings} given"
    counts = None
    if problem is None and n:
        counts, problem = _counted(dest, size)
    _agree(problem, comm)
    if counts is None:
        counts, _ = _histogram(dest, size)
    order, send_rows = _scatter(dest, counts)
    # the strings in destination order: their lengths, and their bytes packed
    picked = order if rows is None else _take(rows, order)
    lengths = np.empty(n, np.int64)
    _string_lengths(offsets, picked, lengths)
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    packed = np.empty(int(starts[-1]), np.uint8)
    if n <= _CHUNK_ROWS:
        _pack_strings(offsets, data, picked, starts, 0, n, packed)
    else:
        _pack_chunks(offsets, data, picked, starts, _CHUNK_ROWS, packed)
    ends = np.cumsum(send_rows)
    send_bytes = np.diff(starts[np.concatenate([[0], ends])])
    send = np.stack([send_rows, send_bytes], axis=1).astype(np.int64)
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)  # rows and bytes per rank pair
    recv_rows, recv_bytes = recv[:, 0].copy(), recv[:, 1].copy()
    got_lengths = np.empty(int(recv_rows.sum()), np.int64)
    _alltoallv(comm, lengths, send_rows * 8, got_lengths, recv_rows * 8)
    got = np.empty(int(recv_bytes.sum()), np.uint8)
    _alltoallv(comm, packed, send_bytes, got, recv_bytes)
    out = np.zeros(got_lengths.shape[0] + 1, np.int64)
    np.cumsum(got_lengths, out=out[1:])
    return out, got


def _alltoallv(comm: Any, send: np.ndarray, send_bytes: np.ndarray, recv: np.ndarray,
               recv_bytes: np.ndarray) -> None:
    """``Alltoallv`` of two contiguous host arrays, counts in bytes."""
    sd = np.concatenate([[0], np.cumsum(send_bytes)[:-1]])
    rd = np.concatenate([[0], np.cumsum(recv_bytes)[:-1]])
    comm.Alltoallv([_bytes(send), (send_bytes, sd), MPI.BYTE],
                   [_bytes(recv), (recv_bytes, rd), MPI.BYTE])


def group_by_destination(dest: np.ndarray, nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Local. The rows grouped by destination: a counting sort of ``dest``.

    Parameters
    ----------
    dest : numpy.ndarray of int
        Destination ``0 .. nparts - 1`` of each row (1-D, host memory).
    nparts : int
        Number of destinations.

    Returns
    -------
    order : numpy.ndarray of int64
        Row numbers grouped by destination, in row order within each destination: equal to
        ``np.argsort(dest, kind="stable")``.
    counts : numpy.ndarray of int64
        Rows per destination (``np.bincount(dest, minlength=nparts)``).

    Raises
    ------
    ValueError
        When a destination lies outside ``[0, nparts)``.
    """
    dest = np.asarray(dest)
    if dest.ndim != 1 or dest.dtype.kind not in "iu":
        raise ValueError(f"dest: expected a 1-D integer array, got {dest.dtype} {dest.shape}")
    if nparts < 1:
        raise ValueError(f"nparts={nparts}: expected at least 1")
    counts, bad = _histogram(dest, nparts)
    if bad:
        raise ValueError(
            f"dest: {bad} destinations outside [0, {nparts}), "
            f"range {int(dest.min())}..{int(dest.max())}"
        )
    return _scatter(dest, counts)


# Counting sort by destination. The rows are cut into chunks, one histogram row per chunk
# (threads over chunks); prefix sums in (destination, chunk) order give each chunk's first slot
# in each destination's run, and the scatter walks the chunks again, so rows keep their order
# within a destination (the permutation of a stable sort). Loops index by unsigned integers:
# numba wraps a signed index that may be negative, a compare and select on every load.
_CHUNK_ROWS = 1 << 16  # rows per chunk at least: below this one thread does the whole pass
_NARROW_RANKS = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32))  # read as is
_CHUNKS_PER_THREAD = 4  # some slack for threads the scheduler puts aside
_LANES = 4  # histograms a pass counts into in turn (a power of two)
# destinations up to this many are packed one at a time, each by a cursor kept in a
# register (see _group_rows)
_CURSOR_PARTS = 3


def _counted(dest: np.ndarray, size: int) -> tuple[np.ndarray, str | None]:
    """Rows per destination rank (host ``dest``), and the problem when one lies outside
    ``[0, size)``."""
    counts, bad = _histogram(dest, size)
    return counts, _out_of_range(dest, size) if bad else None


def _out_of_range(dest: Any, size: int) -> str:
    lo, hi = int(dest.min()), int(dest.max())
    return f"dest: ranks must lie in [0, {size}), got {lo}..{hi}"


def _agree(problem: str | None, comm: Any) -> None:
    """Collective. Raise ValueError on every rank when any rank found a problem (its own
    first, else the first rank's), so a bad call raises everywhere instead of hanging."""
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        raise ValueError(problems[0] if problem is None else problem)


def _chunking(n: int, nparts: int) -> tuple[int, int]:
    """``(chunks, rows per chunk)``: about four per thread, none under _CHUNK_ROWS rows, and
    no more histogram cells than rows (many destinations)."""
    chunks = min(-(-n // _CHUNK_ROWS), _CHUNKS_PER_THREAD * numba.get_num_threads())
    chunks = max(1, min(chunks, n // max(nparts, 1)))
    return chunks, -(-n // chunks) if n else 1


def _histogram(dest: np.ndarray, nparts: int) -> tuple[np.ndarray, int]:
    """Rows per (chunk, destination) and the number of destinations out of range."""
    n = dest.shape[0]
    chunks, rows = _chunking(n, nparts)
    counts = np.zeros((chunks, nparts), dtype=np.int64)
    if chunks == 1:
        return counts, int(_count_rows(dest, 0, n, nparts, counts[0]))
    return counts, int(_count_chunks(dest, rows, nparts, counts))


def _scatter(dest: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The permutation of a stable sort by destination and the rows per destination, from the
    per-chunk histogram of :func:`_histogram` (destinations already checked)."""
    n = dest.shape[0]
    starts = _chunk_starts(counts)
    order = np.empty(n, dtype=np.int64)
    if counts.shape[0] == 1:
        _place_rows(dest, 0, n, starts[0], order)
    else:
        _place_chunks(dest, _rows_per_chunk(n, counts.shape[0]), starts, order)
    return order, counts.sum(axis=0)


def _rows_per_chunk(n: int, chunks: int) -> int:
    return -(-n // chunks) if n else 1


def _chunk_starts(counts: np.ndarray) -> np.ndarray:
    """First slot of chunk ``c``'s rows for destination ``d`` (uint64, chunks x nparts): all
    rows of lower destinations, then those of ``d`` in earlier chunks."""
    chunks, nparts = counts.shape
    flat = counts.T.ravel()
    return np.ascontiguousarray((np.cumsum(flat) - flat).reshape(nparts, chunks).T
                                .astype(np.uint64))


def _group(col: np.ndarray, dest: np.ndarray, rows: int, starts: np.ndarray,
           ends: np.ndarray) -> np.ndarray:
    """``col`` grouped by destination, row order kept within each (the scatter of the
    counting sort, moving values instead of row numbers); values moved as unsigned integers
    of their item size, so one kernel per size serves every dtype, bit for bit."""
    unsigned = _UNSIGNED.get(col.dtype.itemsize)
    if unsigned is None or col.dtype.hasobject:
        order = np.empty(dest.shape[0], dtype=np.int64)
        if starts.shape[0] == 1:
            _place_rows(dest, 0, dest.shape[0], starts[0].copy(), order)
        else:
            _place_chunks(dest, rows, starts, order)
        return col[order]
    col = np.ascontiguousarray(col)
    out = np.empty(col.shape[0], dtype=col.dtype)
    src, dst = col.view(unsigned), out.view(unsigned)
    if starts.shape[0] == 1:
        _group_rows(src, dest, 0, src.shape[0], starts[0].copy(), ends[0], dst)
    else:
        _group_chunks(src, dest, rows, starts, ends, dst)
    return out


@njit(nogil=True, cache=True)
def _count_rows(dest, a, e, nparts, counts):  # type: ignore[no-untyped-def]
    # counts[d] += 1 for rows a..e; the rows whose destination is outside [0, nparts)
    # (a negative one wraps to a large unsigned) are counted apart (column nparts)
    c = np.zeros((_LANES if _few(a, e, nparts) else 1, nparts + 1), dtype=np.int64)
    top = np.uint64(nparts)
    a, e = np.uint64(a), np.uint64(e)
    if c.shape[0] == _LANES:
        for i in range(a, e):
            c[i & np.uint64(_LANES - 1), min(np.uint64(dest[i]), top)] += 1
    else:
        for i in range(a, e):
            c[0, min(np.uint64(dest[i]), top)] += 1
    _add_lanes(c, counts)
    return c[:, nparts].sum()


@njit(inline="always", cache=True)
def _few(a, e, nparts):  # type: ignore[no-untyped-def]
    # whether rows a..e count into _LANES histograms in turn, summed at the end: with one,
    # each increment waits for the previous one's store when neighbouring rows share a
    # destination (few ranks; 2 ranks, 5e6 rows on one thread: 9 ms, against 3 ms); not
    # where the histograms would outweigh the rows. The lane index must be a constant
    # (measured 6 ms with the number of lanes chosen at run time)
    return _LANES * nparts <= max(e - a, 1 << 12)


@njit(inline="always", cache=True)
def _add_lanes(c, counts):  # type: ignore[no-untyped-def]
    for d in range(counts.shape[0]):
        for t in range(c.shape[0]):
            counts[d] += c[t, d]


@njit(parallel=True, nogil=True, cache=True)
def _count_chunks(dest, rows, nparts, counts):  # type: ignore[no-untyped-def]
    # each chunk counts into an array of its own, copied out at the end: the rows of counts
    # share cache lines, and threads incrementing them in place stall each other (8 parts,
    # 1e6 rows, 2 threads: 19 ms against 2 ms on one thread)
    n = dest.shape[0]
    chunks = counts.shape[0]
    bad = np.zeros(chunks, dtype=np.int64)
    for c in prange(chunks):
        mine = np.zeros(nparts, dtype=np.int64)
        bad[c] = _count_rows(dest, c * rows, min(n, (c + 1) * rows), nparts, mine)
        counts[c] = mine
    return bad.sum()


@njit(nogil=True, cache=True)
def _place_rows(dest, a, e, slots, order):  # type: ignore[no-untyped-def]
    # row i to the next free slot of its destination (slots: uint64, advanced in place)
    for i in range(np.uint64(a), np.uint64(e)):
        d = np.uint64(dest[i])
        s = slots[d]
        order[s] = i
        slots[d] = s + np.uint64(1)


@njit(parallel=True, nogil=True, cache=True)
def _place_chunks(dest, rows, starts, order):  # type: ignore[no-untyped-def]
    n = dest.shape[0]
    for c in prange(starts.shape[0]):  # slots copied per chunk, as in _count_chunks
        _place_rows(dest, c * rows, min(n, (c + 1) * rows), starts[c].copy(), order)


@njit(nogil=True, cache=True)
def _group_rows(src, dest, a, e, slots, ends, out):  # type: ignore[no-untyped-def]
    # value i to the next free slot of its destination (slots: uint64, advanced in place;
    # ends: where each destination's slots of rows a..e end)
    a, e = np.uint64(a), np.uint64(e)
    nparts = slots.shape[0]
    if nparts > _CURSOR_PARTS:
        for i in range(a, e):
            d = np.uint64(dest[i])
            s = slots[d]
            out[s] = src[i]
            slots[d] = s + np.uint64(1)
        return
    # few destinations: neighbouring rows often share one, and each would wait for the
    # previous row's store of its slot. One pass per destination instead, its cursor in a
    # register: every row is written at the cursor, which advances on a row of that
    # destination (no branch), and the pass stops after the last one, so nothing is
    # written past the destination's slots
    for d in range(nparts):
        du = np.uint64(d)
        s, end, i = slots[d], ends[d], a
        while s < end:
            out[s] = src[i]
            s += np.uint64(np.uint64(dest[i]) == du)
            i += np.uint64(1)


@njit(parallel=True, nogil=True, cache=True)
def _group_chunks(src, dest, rows, starts, ends, out):  # type: ignore[no-untyped-def]
    n = dest.shape[0]
    for c in prange(starts.shape[0]):
        _group_rows(src, dest, c * rows, min(n, (c + 1) * rows), starts[c].copy(), ends[c],
                    out)


_PRIME = 0x100000001B3  # the multiplier that combines key columns' hashes (FNV's prime)


@njit(inline="always", cache=True)
def _combined_of(keys, i, fib, prime):  # type: ignore[no-untyped-def]
    # row i's combined hash of the key columns (a tuple of int64 columns): combined_hash's
    h = np.uint64(0)
    for k in range(len(keys)):
        h = (h * prime) ^ (np.uint64(keys[k][i]) * fib)
    return h


@njit(nogil=True, cache=True)
def _combine_rows(keys, a, e, out):  # type: ignore[no-untyped-def]
    fib, prime = np.uint64(_FIBONACCI), np.uint64(_PRIME)
    for i in range(np.uint64(a), np.uint64(e)):
        out[i] = _combined_of(keys, i, fib, prime)


@njit(parallel=True, nogil=True, cache=True)
def _combine_chunks(keys, rows, out):  # type: ignore[no-untyped-def]
    n = out.shape[0]
    for c in prange((n + rows - 1) // rows):
        _combine_rows(keys, c * rows, min(n, (c + 1) * rows), out)


@njit(inline="always", cache=True)
def _dest_of(keys, i, fib, prime, nparts):  # type: ignore[no-untyped-def]
    # row i's destination: the keys' combined hash, hash_partition's part of it (a mask for
    # a power of two, else a 32-bit modulo: see _hash_rows)
    top = (_combined_of(keys, i, fib, prime) * fib) >> np.uint64(32)
    if nparts & (nparts - 1) == 0:
        return top & np.uint64(nparts - 1)
    return np.uint64(np.uint32(top) % np.uint32(nparts))


@njit(nogil=True, cache=True)
def _hash_count_rows(keys, a, e, nparts, dest, counts):  # type: ignore[no-untyped-def]
    # rows a..e (keys: a tuple of int64 columns): each row's destination into dest, counted
    # into counts (in turn into _LANES histograms where they are few, as in _count_rows)
    fib, prime = np.uint64(_FIBONACCI), np.uint64(_PRIME)
    c = np.zeros((_LANES if _few(a, e, nparts) else 1, nparts), dtype=np.int64)
    a, e = np.uint64(a), np.uint64(e)
    if c.shape[0] == _LANES:
        for i in range(a, e):
            d = _dest_of(keys, i, fib, prime, nparts)
            dest[i] = d
            c[i & np.uint64(_LANES - 1), d] += 1
    else:
        for i in range(a, e):
            d = _dest_of(keys, i, fib, prime, nparts)
            dest[i] = d
            c[0, d] += 1
    _add_lanes(c, counts)


@njit(parallel=True, nogil=True, cache=True)
def _hash_count_chunks(keys, rows, nparts, dest, counts):  # type: ignore[no-untyped-def]
    # each chunk counts into an array of its own, copied out at the end (see _count_chunks)
    n = dest.shape[0]
    for c in prange(counts.shape[0]):
        mine = np.zeros(nparts, dtype=np.int64)
        _hash_count_rows(keys, c * rows, min(n, (c + 1) * rows), nparts, dest, mine)
        counts[c] = mine


_FIBONACCI = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: the multiplier of hash_partition


@njit(nogil=True, cache=True)
def _hash_rows(keys, a, e, nparts, out):  # type: ignore[no-untyped-def]
    # the hash of hash_partition for rows a..e. Its top half leaves a value under 2**32, so
    # the modulo is a 32-bit division (several times faster than a 64-bit one) and a mask
    # for a power of two; both give the 64-bit modulo's result
    a, e = np.uint64(a), np.uint64(e)
    if nparts & (nparts - 1) == 0:
        mask = np.uint64(nparts - 1)
        for i in range(a, e):
            h = (np.uint64(keys[i]) * np.uint64(_FIBONACCI)) >> np.uint64(32)
            out[i] = np.int64(h & mask)
    else:
        m = np.uint32(nparts)
        for i in range(a, e):
            h = (np.uint64(keys[i]) * np.uint64(_FIBONACCI)) >> np.uint64(32)
            out[i] = np.int64(np.uint32(h) % m)


@njit(parallel=True, nogil=True, cache=True)
def _hash_chunks(keys, rows, nparts, out):  # type: ignore[no-untyped-def]
    n = keys.shape[0]
    for c in prange((n + rows - 1) // rows):
        _hash_rows(keys, c * rows, min(n, (c + 1) * rows), nparts, out)


@njit(nogil=True, cache=True)
def _string_lengths(offsets, picked, lengths):  # type: ignore[no-untyped-def]
    # bytes of each picked string; a negative pick (a NULL) is empty
    for j in range(lengths.shape[0]):
        s = picked[j]
        lengths[j] = offsets[s + 1] - offsets[s] if s >= 0 else 0


@njit(nogil=True, cache=True)
def _pack_strings(offsets, data, picked, starts, a, e, out):  # type: ignore[no-untyped-def]
    # the bytes of picked strings a..e, one after another from starts[a]
    for j in range(a, e):
        s = picked[j]
        if s < 0:
            continue
        src = np.int64(offsets[s])
        dst = starts[j]
        for b in range(starts[j + 1] - dst):
            out[dst + b] = data[src + b]


@njit(parallel=True, nogil=True, cache=True)
def _pack_chunks(offsets, data, picked, starts, rows, out):  # type: ignore[no-untyped-def]
    n = picked.shape[0]
    for c in prange((n + rows - 1) // rows):
        _pack_strings(offsets, data, picked, starts, c * rows, min(n, (c + 1) * rows), out)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _take(col: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``col[order]`` (order: row numbers in range), threaded; a column is moved as unsigned
    integers of its item size, so one kernel per size serves every dtype, bit for bit."""
    unsigned = _UNSIGNED.get(col.dtype.itemsize)
    if unsigned is None or col.dtype.hasobject:
        return col[order]
    out = np.empty(order.shape[0], dtype=col.dtype)
    src, dst = col.view(unsigned), out.view(unsigned)
    if order.shape[0] <= _CHUNK_ROWS:
        _take_rows(src, order, 0, order.shape[0], dst)
    else:
        _take_chunks(src, order, _CHUNK_ROWS, dst)
    return out


@njit(nogil=True, cache=True)
def _take_rows(src, order, a, e, dst):  # type: ignore[no-untyped-def]
    for j in range(np.uint64(a), np.uint64(e)):
        dst[j] = src[np.uint64(order[j])]


@njit(parallel=True, nogil=True, cache=True)
def _take_chunks(src, order, rows, dst):  # type: ignore[no-untyped-def]
    n = order.shape[0]
    for c in prange((n + rows - 1) // rows):
        _take_rows(src, order, c * rows, min(n, (c + 1) * rows), dst)


def _bytes(a: Any) -> Any:
    """A byte view of a contiguous array for MPI (CuPy arrays pass through: CUDA-aware MPI)."""
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a).view(np.uint8)
    return a


def _xp(a: Any) -> Any:
    """NumPy, or the device array module of a device array."""
    return array_module(a)


def _host(a: Any) -> np.ndarray:
    return to_host(a)
