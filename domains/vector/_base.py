"""What every index shares: input checks, ids, the allow-list filter, removal, save and load.

File layout (HDF5, written through :func:`hpc.io.open_file`): the root group carries the
attributes ``hpc_vector_index`` (the class name, e.g. ``"IVFPQIndex"``), ``format_version``
(an integer, :data:`FORMAT_VERSION`), ``dim``, ``metric`` and ``params`` (a JSON object of the
constructor's other arguments); every array of the index's state is one dataset at the root
(``ids`` always; ``vectors``, ``centroids``, ``list_offsets``, ``codebooks``, ``codes`` as the
index type needs). A file is written to a temporary name in the same folder, flushed, fsynced
and renamed into place, so an interrupted save never leaves a partial file under the name.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

import numpy as np

from hpc.backend import Backend, get_backend, is_device_array, to_host

from ._kernels import check_rows

__all__ = ["METRICS", "FORMAT_VERSION", "VectorIndex", "load_index", "check_k"]

METRICS = ("l2", "ip", "cosine")
FORMAT_VERSION = 1
_REGISTRY: dict[str, type[VectorIndex]] = {}
# the output of check_rows when it only checks (writeable: a read-only array is another
# numba type, and the kernel writes ``out`` under cosine)
_NO_OUT = np.empty((0, 0), dtype=np.float32)


def check_k(k: Any) -> int:
    """``k`` as a positive int, or a ValueError naming it."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k={k!r}: must be a positive integer")
    if k <= 0:
        raise ValueError(f"k={k}: must be a positive integer (k >= 1)")
    return int(k)


class VectorIndex:
    """The common API of the indexes (not instantiated itself).

    Distances returned by ``search`` are squared Euclidean distances (``metric="l2"``,
    ascending), inner products (``"ip"``, descending) or cosine similarities (``"cosine"``,
    descending; vectors and queries are normalised). Where fewer than ``k`` vectors qualify the
    ids are ``-1`` and the distances ``inf`` (L2) or ``-inf`` (similarities).
    """

    kind: ClassVar[str] = "VectorIndex"

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _REGISTRY[cls.__name__] = cls
        cls.kind = cls.__name__

    def __init__(self, dim: int, metric: str = "l2", backend: str | Backend | None = None):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise ValueError(f"dim={dim!r}: must be a positive integer")
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r}: expected one of {', '.join(METRICS)}")
        self.dim = int(dim)
        self.metric = metric
        self.backend = get_backend(backend)
        self._ids = np.empty(0, dtype=np.int64)  # host copy, in stored-row order

    # -- properties ---------------------------------------------------------------------------
    @property
    def ntotal(self) -> int:
        """How many vectors the index holds."""
        return int(self._ids.shape[0])

    def __len__(self) -> int:
        return self.ntotal

    @property
    def is_trained(self) -> bool:
        """True when ``add`` may be called (always for exact indexes)."""
        return True

    @property
    def ids(self) -> np.ndarray:
        """The stored ids, in stored-row order (a copy)."""
        return self._ids.copy()

    @property
    def _l2(self) -> bool:
        return self.metric == "l2"

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self._params().items())
        return (
            f"{self.kind}(dim={self.dim}, metric={self.metric!r}{extra}, "
            f"ntotal={self.ntotal}, backend={self.backend.name!r})"
        )

    # -- checks -------------------------------------------------------------------------------
    def _check_vectors(self, x: Any, what: str = "vectors") -> np.ndarray:
        """Local. ``x`` as a C-contiguous float32 host array ``(n, dim)``, checked (and
        normalised for the cosine metric)."""
        a = to_host(x) if is_device_array(x) else np.asarray(x)
        if a.ndim == 1 and a.shape[0] == self.dim:
            a = a[None, :]
        if a.ndim != 2:
            raise ValueError(f"{what}: expected a 2-D array (n, {self.dim}), got shape {a.shape}")
        if a.shape[1] != self.dim:
            raise ValueError(
                f"{what}: dimension {a.shape[1]} does not match the index dimension {self.dim}"
            )
        if a.dtype.kind not in "fiu":
            raise ValueError(f"{what}: dtype {a.dtype} is not numeric")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if not a.size:
            return a
        # one compiled pass (finite, zero rows, normalisation): NumPy's five calls cost
        # about 9 us, a tenth of a one-query IVF search
        cosine = self.metric == "cosine"
        out = np.empty_like(a) if cosine else _NO_OUT  # never written without cosine
        bad, first_bad, zero, first_zero = check_rows(a, cosine, out)
        if bad:
            raise ValueError(
                f"{what}: {bad} row(s) hold NaN or infinite values (first: row {first_bad})"
            )
        if zero:
            raise ValueError(
                f"{what}: {zero} zero vector(s) (first: row {first_zero}) have no cosine"
            )
        return out if cosine else a

    def _check_new_ids(self, ids: Any, n: int) -> np.ndarray:
        """Local. The ids of ``n`` new rows (default: ``ntotal ..``), checked unique and new."""
        if ids is None:
            start = int(self._ids.max()) + 1 if self.ntotal else 0
            return np.arange(start, start + n, dtype=np.int64)
        a = np.asarray(to_host(ids))
        if a.ndim != 1 or a.shape[0] != n:
            raise ValueError(f"ids: expected a 1-D array of {n} ids, got shape {a.shape}")
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"ids: dtype {a.dtype} is not an integer type")
        a = a.astype(np.int64)
        if a.size and a.min() < 0:
            raise ValueError(f"ids: negative id {int(a.min())} (-1 marks missing results)")
        if np.unique(a).size != a.size:
            raise ValueError("ids: the new ids are not unique")
        clash = np.intersect1d(a, self._ids)
        if clash.size:
            raise ValueError(f"ids: {clash.size} id(s) already in the index (first: {clash[0]})")
        return a

    def _filter_mask(self, allow: Any) -> np.ndarray | None:
        """Local. A uint8 mask over the stored rows from an allow-list of ids (None: all)."""
        if allow is None:
            return None
        a = np.asarray(to_host(allow))
        if a.dtype == bool:
            raise ValueError("filter: expected an array of allowed ids, not a boolean mask")
        a = a.reshape(-1).astype(np.int64)
        return np.isin(self._ids, a).astype(np.uint8)

    # -- mutation -----------------------------------------------------------------------------
    def remove(self, ids: Any) -> int:
        """Local. Remove the vectors with these ids; unknown ids are ignored.

        Returns
        -------
        int
            How many vectors were removed.
        """
        drop = np.isin(self._ids, np.asarray(to_host(ids)).reshape(-1).astype(np.int64))
        removed = int(drop.sum())
        if removed:
            self._keep_rows(~drop)
        return removed

    def _keep_rows(self, keep: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:
        """Local. Remove every vector (training is kept)."""
        self._keep_rows(np.zeros(self.ntotal, dtype=bool))

    # -- state and storage --------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        """Constructor arguments besides dim and metric (JSON-serialisable)."""
        return {}

    def _state(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_state(self, state: dict[str, np.ndarray]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def save(self, path: str | os.PathLike[str]) -> None:
        """Local. Write the index to the HDF5 file ``path`` (replaced atomically).

        The layout is described in the module docstring of ``hpc.domains.vector._base``
        (and ``docs/vector.md``).
        """
        write_index_file(path, self.kind, self.dim, self.metric, self._params(), self._state())

    def _save_into(self, path: str | os.PathLike[str]) -> None:
        """Local. :meth:`save` into ``path`` directly, not through a temporary (for a
        caller holding a temporary of its own, e.g. from :func:`hpc.io.atomic_output`)."""
        write_index_file(
            path, self.kind, self.dim, self.metric, self._params(), self._state(), atomic=False
        )

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], backend: str | Backend | None = None
    ) -> VectorIndex:
        """Local. Read an index written by :meth:`save`.

        Raises
        ------
        hpc.io.LayoutMismatchError
            If the file holds another index type, another format version, or is not an index.
        """
        index = load_index(path, backend=backend)
        if cls is not VectorIndex and not isinstance(index, cls):
            from hpc.io import LayoutMismatchError

            raise LayoutMismatchError(
                f"the file holds a {index.kind}, not a {cls.__name__}; "
                f"use {index.kind}.load or hpc.domains.vector.load_index",
                path=str(path),
            )
        return index


def write_index_file(
    path: str | os.PathLike[str],
    kind: str,
    dim: int,
    metric: str,
    params: dict[str, Any],
    state: dict[str, np.ndarray],
    atomic: bool = True,
) -> None:
    """Local. Write an index file (it appears whole or not at all:
    :func:`hpc.io.atomic_output`; ``atomic=False`` writes ``path`` itself, for a caller
    that already writes to a temporary of its own: a temporary inside a temporary, left by
    a killed process, is not one that ``remove_stale_temporaries`` of the final name
    finds)."""
    from contextlib import nullcontext

    from hpc.io import StorageError, atomic_output, open_file
    from hpc.io.errors import from_os_error

    from hpc.comm import self_comm

    target = atomic_output(path) if atomic else nullcontext(path)
    try:
        with target as tmp, open_file(tmp, "w", comm=self_comm()) as f:
            f.attrs["hpc_vector_index"] = kind
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["dim"] = int(dim)
            f.attrs["metric"] = metric
            f.attrs["params"] = json.dumps(params)
            for name, value in state.items():
                f.create_dataset(name, data=np.ascontiguousarray(to_host(value)))
    except OSError as exc:
        if isinstance(exc, StorageError):
            raise
        raise from_os_error(exc, "saving the index", path) from exc


def read_index_file(path: str | os.PathLike[str]) -> tuple[str, int, str, dict, dict]:
    """Local. ``(kind, dim, metric, params, state)`` of an index file, checked."""
    from hpc.io import LayoutMismatchError, open_file

    from hpc.comm import self_comm

    with open_file(path, "r", comm=self_comm()) as f:
        if "hpc_vector_index" not in f.attrs:
            raise LayoutMismatchError(
                "not a vector index file (no 'hpc_vector_index' attribute)", path=str(path)
            )
        kind = f.attrs["hpc_vector_index"]
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        version = int(f.attrs.get("format_version", -1))
        if version != FORMAT_VERSION:
            raise LayoutMismatchError(
                f"{kind} file format version {version}; this library reads version "
                f"{FORMAT_VERSION}",
                path=str(path),
            )
        metric = f.attrs["metric"]
        metric = metric.decode() if isinstance(metric, bytes) else str(metric)
        params = json.loads(f.attrs["params"])
        state = {name: f[name][...] for name in f}
        return kind, int(f.attrs["dim"]), metric, params, state


def load_index(path: str | os.PathLike[str], backend: str | Backend | None = None) -> VectorIndex:
    """Local. Read any index written by ``save``; the file says which type it holds.

    Raises
    ------
    hpc.io.LayoutMismatchError
        If the file is not an index file of this library or has another format version.
    hpc.io.StorageError
        If the file cannot be opened.
    """
    from hpc.io import LayoutMismatchError

    from . import flat, ivf  # noqa: F401 - their index types register themselves on import

    kind, dim, metric, params, state = read_index_file(path)
    cls = _REGISTRY.get(kind)
    if cls is None:
        raise LayoutMismatchError(f"unknown index type {kind!r}", path=str(path))
    index = cls(dim, metric=metric, backend=backend, **params)
    index._set_state(state)
    return index
