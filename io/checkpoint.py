"""Checkpoints that survive a crash: atomic, checksummed, restartable on any rank count.

A checkpoint of step ``s`` is one HDF5 file ``<prefix>_<s:010d>.h5`` holding each array as a
global dataset in natural order (no ghost cells), with the Fletcher32 filter, and its metadata as
root attributes. It is written under a hidden temporary name, its ``complete`` attribute set
last, closed, fsynced, renamed into place by rank 0 and the directory fsynced: a file under the
final name is whole, a crash leaves at most a temporary file, which the next save removes.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from hpc.comm import resolve_comm
from hpc.decomposition import CartDecomposition

from . import faults
from .arrays import _agree, _check_local, read_array, write_array
from .atomic import fsync_path
from .errors import (
    CorruptDataError,
    LayoutMismatchError,
    MissingDataError,
    StorageError,
    from_os_error,
)
from .files import Target, agree

__all__ = ["Checkpoint", "LoadedCheckpoint", "FORMAT"]

FORMAT = "hpc-checkpoint"
FORMAT_VERSION = 1


@dataclass
class LoadedCheckpoint:
    """What :meth:`Checkpoint.load` returns.

    Attributes
    ----------
    step : int
    arrays : dict of str to array
        Local arrays with ghost cells on the reader's decomposition and device.
    attrs : dict
        The user attributes given to :meth:`Checkpoint.save`.
    meta : dict
        Library version, writer's rank count and grid, creation time, global shapes and dtypes.
    decomp : CartDecomposition
        The reader's decomposition.
    path : Path
    """

    step: int
    arrays: dict[str, Any]
    attrs: dict[str, Any]
    meta: dict[str, Any]
    decomp: CartDecomposition
    path: Path = field(repr=False)


def _library_version() -> str:
    import hpc

    return hpc.__version__


class Checkpoint:
    """Collective. A directory of checkpoints, written and read by every rank of ``comm``.

    Parameters
    ----------
    directory : str or path
        Created if missing.
    comm : MPI.Comm, optional
        Default :func:`hpc.comm.world`.
    keep : int
        How many complete checkpoints to keep (older ones are removed after each save).
    prefix : str
        File name prefix.

    Examples
    --------
    >>> ckpt = Checkpoint("run/checkpoints", keep=3)
    >>> ckpt.save(100, {"u": u}, decomp, attrs={"t": 0.5})
    >>> state = ckpt.load(decomp=decomp)      # the latest complete step, on any rank count
    >>> state.step, state.attrs["t"]
    (100, 0.5)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        comm: Any = None,
        keep: int = 3,
        prefix: str = "checkpoint",
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: at least one checkpoint must be kept")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix):
            raise ValueError(f"prefix={prefix!r}: letters, digits, '_', '.', '-' only")
        self.directory = Path(directory)
        self.comm = resolve_comm(comm)
        self.keep = keep
        self.prefix = prefix
        self._pattern = re.compile(rf"{re.escape(prefix)}_(\d{{10}})\.h5")

    # -- names --------------------------------------------------------------------------
    def path_of(self, step: int) -> Path:
        """The file of checkpoint ``step``."""
        return self.directory / f"{self.prefix}_{step:010d}.h5"

    def _candidates(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        steps = []
        for entry in os.listdir(self.directory):
            m = self._pattern.fullmatch(entry)
            if m:
                steps.append(int(m.group(1)))
        return sorted(steps)

    @staticmethod
    def _is_complete(path: Path) -> bool:
        try:
            with h5py.File(path, "r") as f:
                return f.attrs.get("format") == FORMAT and bool(f.attrs.get("complete", 0))
        except OSError:
            return False

    def steps(self) -> list[int]:
        """Collective. The steps of the complete checkpoints on disk, oldest first."""
        found = None
        if self.comm.Get_rank() == 0:
            found = [s for s in self._candidates() if self._is_complete(self.path_of(s))]
        return self.comm.bcast(found, root=0) if self.comm.Get_size() > 1 else found

    def latest(self) -> int | None:
        """Collective. The newest complete step, or None when there is none.

        A file that does not open, or lacks the ``complete`` marker, is never taken for a
        checkpoint.
        """
        steps = self.steps()
        return steps[-1] if steps else None

    # -- save ---------------------------------------------------------------------------
    def save(
        self,
        step: int,
        arrays: Mapping[str, Any],
        decomp: CartDecomposition,
        attrs: Mapping[str, Any] | None = None,
    ) -> Path:
        """Collective. Write checkpoint ``step`` atomically and prune old ones.

        Parameters
        ----------
        step : int
            Non-negative step number (the file name).
        arrays : mapping of str to array
            Local arrays with ghost cells on ``decomp`` (host or device).
        decomp : CartDecomposition
            Their layout; its grid, periodicity and halo are recorded.
        attrs : mapping, optional
            JSON-serialisable user attributes (rank 0's values are stored).

        Returns
        -------
        Path
            The checkpoint's file.

        Raises
        ------
        StorageError
            On every rank, before anything is written, for a bad step, no arrays, an array that
            does not fit ``decomp``, or attributes that are not JSON-serialisable.
        """
        comm = self.comm
        rank = comm.Get_rank()
        error = None
        if not isinstance(step, int | np.integer) or step < 0:
            error = f"step={step!r}: a non-negative integer is needed"
        elif not arrays:
            error = "no arrays to checkpoint"
        else:
            for name, local in arrays.items():
                problem = _check_local(local, decomp)
                if problem:
                    error = f"array {name!r}: {problem}"
                    break
        try:
            user = json.dumps(dict(attrs or {}))
        except TypeError as exc:
            error = error or f"attrs are not JSON-serialisable: {exc}"
            user = "{}"
        error = _agree(comm, error)
        if error:
            raise StorageError(error, path=str(self.directory), all_ranks=True)
        step = int(step)
        final = self.path_of(step)
        token = uuid.uuid4().hex[:12] if rank == 0 else None
        token = comm.bcast(token, root=0) if comm.Get_size() > 1 else token
        tmp = self.directory / f".{final.name}.tmp-{token}"
        prepared = None
        if rank == 0:
            operation = "creating the checkpoint directory"
            try:
                faults.inject("mkdir", self.directory, rank)
                self.directory.mkdir(parents=True, exist_ok=True)
                # A single writer owns the directory: temporaries of crashed saves go before
                # this one starts, so at most one (the save in flight) ever exists.
                operation = "removing the temporary of an earlier save"
                self._remove_temporaries(keep_token=token)
            except OSError as exc:
                prepared = from_os_error(exc, operation, self.directory)
        prepared = agree(comm, prepared)  # every rank raises it, before any collective write
        if prepared:
            raise prepared
        datasets = {
            name: {"shape": list(decomp.global_shape), "dtype": np.dtype(a.dtype).str}
            for name, a in arrays.items()
        }
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "step": step,
            "attrs": comm.bcast(user, root=0) if comm.Get_size() > 1 else user,
            "library_version": _library_version(),
            "nranks": comm.Get_size(),
            "dims": json.dumps(list(decomp.dims)),
            "global_shape": json.dumps(list(decomp.global_shape)),
            "periodic": json.dumps(list(decomp.periodic)),
            "halo": decomp.halo,
            "datasets": json.dumps(datasets),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        meta = comm.bcast(meta, root=0) if comm.Get_size() > 1 else meta
        try:
            nbytes = sum(
                int(np.prod(decomp.global_shape)) * np.dtype(a.dtype).itemsize
                for a in arrays.values()
            )
            with Target(tmp, "w", comm, reserve=nbytes) as target:
                if target.does_io:
                    target.group.attrs["complete"] = 0
                    for key, value in meta.items():
                        target.group.attrs[key] = value
                for name, local in arrays.items():
                    write_array(target, name, local, decomp, checksum=True)
                if target.does_io:
                    target.group.attrs["complete"] = 1  # the marker, written last
                    target.group.flush()
        except BaseException:
            if rank == 0 and tmp.exists():
                tmp.unlink()
            raise
        failure = None
        if rank == 0:
            try:
                faults.inject("commit", final, rank)
                fsync_path(tmp)
                os.replace(tmp, final)
                fsync_path(self.directory, directory=True)
                self._prune()
            except OSError as exc:
                failure = from_os_error(exc, "committing the checkpoint", final)
        failure = agree(comm, failure)
        if failure:
            raise failure
        return final

    def _remove_temporaries(self, keep_token: str) -> None:
        """Rank 0: drop the temporary files of crashed saves (all but ``keep_token``'s)."""
        for entry in os.listdir(self.directory):
            if (
                entry.startswith(f".{self.prefix}_")
                and ".tmp-" in entry
                and keep_token not in entry
            ):
                faults.inject("remove", self.directory / entry, 0)
                (self.directory / entry).unlink(missing_ok=True)

    def _prune(self) -> None:
        """Rank 0: drop the oldest complete checkpoints beyond ``keep``."""
        complete = [s for s in self._candidates() if self._is_complete(self.path_of(s))]
        for s in complete[: max(0, len(complete) - self.keep)]:
            self.path_of(s).unlink(missing_ok=True)

    # -- load ---------------------------------------------------------------------------
    def load(
        self,
        step: int | None = None,
        decomp: CartDecomposition | None = None,
        backend: Any = None,
    ) -> LoadedCheckpoint:
        """Collective. Read checkpoint ``step`` (default: the latest) onto ``decomp``.

        Parameters
        ----------
        step : int, optional
            Default :meth:`latest`.
        decomp : CartDecomposition, optional
            The reader's layout, any rank count; default: the writer's global shape,
            periodicity and halo over this checkpoint's communicator.
        backend : str or Backend, optional
            Device of the returned arrays when ``decomp`` is not given.

        Raises
        ------
        StorageError
            No checkpoint to load.
        CorruptDataError
            The file is truncated or damaged, lacks its ``complete`` marker or a dataset it
            lists, or a dataset fails its checksum (the message names file and dataset).
        LayoutMismatchError
            A dataset's shape or dtype differs from the file's metadata, or the global shape
            differs from ``decomp``'s.
        """
        comm = self.comm
        if step is None:
            step = self.latest()
            if step is None:
                raise MissingDataError(
                    "no complete checkpoint to load", path=str(self.directory), all_ranks=True
                )
        path = self.path_of(int(step))
        if comm.Get_rank() == 0 and not path.exists():
            error = "no such checkpoint"
        else:
            error = None
        error = _agree(comm, error)
        if error:
            raise MissingDataError(error, path=str(path), all_ranks=True)
        try:
            target = Target(path, "r", comm).__enter__()
        except StorageError as exc:
            raise CorruptDataError(
                f"the checkpoint cannot be opened (truncated or damaged): {exc}",
                path=str(path),
                all_ranks=True,
            ) from exc
        try:
            meta, problem = None, None
            if target.does_io:
                meta, problem = self._read_meta(target.group)
            if comm.Get_size() > 1 and target.kind == "gather":
                meta = comm.bcast(meta, root=0)
            problem = _agree(comm, problem)
            if problem:
                kind, message, dataset = problem
                cls = LayoutMismatchError if kind == "layout" else CorruptDataError
                raise cls(message, path=str(path), dataset=dataset, all_ranks=True)
            shape = tuple(json.loads(meta["global_shape"]))
            if decomp is None:
                decomp = CartDecomposition(
                    shape,
                    periodic=tuple(json.loads(meta["periodic"])),
                    halo=int(meta["halo"]),
                    comm=comm,
                    backend=backend,
                )
            elif decomp.global_shape != shape:
                raise LayoutMismatchError(
                    f"checkpoint global shape {shape} != reader's {decomp.global_shape}",
                    path=str(path),
                    all_ranks=True,
                )
            datasets = json.loads(meta["datasets"])
            arrays = {
                name: read_array(target, name, decomp, dtype=np.dtype(info["dtype"]))
                for name, info in datasets.items()
            }
        except BaseException as exc:  # one rank's failure ends the job (Target.__exit__)
            target.__exit__(type(exc), exc, exc.__traceback__)
            raise
        target.__exit__(None, None, None)
        info = {k: v for k, v in meta.items() if k not in ("attrs",)}
        return LoadedCheckpoint(
            step=int(meta["step"]),
            arrays=arrays,
            attrs=json.loads(meta["attrs"]),
            meta=info,
            decomp=decomp,
            path=path,
        )

    @staticmethod
    def _read_meta(
        f: h5py.File,
    ) -> tuple[dict[str, Any] | None, tuple[str, str, str | None] | None]:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format") != FORMAT:
            return None, ("corrupt", "not an hpc checkpoint (no format attribute)", None)
        if not int(attrs.get("complete", 0)):
            return None, ("corrupt", "the checkpoint lacks its 'complete' marker", None)
        meta = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in attrs.items()}
        for name, info in json.loads(meta["datasets"]).items():
            if name not in f or not isinstance(f[name], h5py.Dataset):
                return None, ("corrupt", "a dataset listed in the metadata is missing", name)
            dset = f[name]
            if list(dset.shape) != info["shape"] or dset.dtype != np.dtype(info["dtype"]):
                return None, (
                    "layout",
                    f"stored {tuple(dset.shape)} {dset.dtype} != recorded "
                    f"{tuple(info['shape'])} {np.dtype(info['dtype'])}",
                    name,
                )
            if not dset.fletcher32:
                return None, ("corrupt", "the dataset lost its checksum filter", name)
        return meta, None
