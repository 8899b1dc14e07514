"""Run records: what ran, where, how long and how fast, stored in the output file.

A :class:`RunRecord` is started when a command starts and finished when its work is done
(collective: the wall time is the slowest rank's, the devices every rank's). Its
:meth:`~RunRecord.as_dict` is a flat-ish JSON-serialisable dict:

==========================  ==============================================================
``command``                 the command line (``hpc risk price book.json --paths 1e6 ...``)
``hpc_version``             the library's version
``ranks``                   MPI ranks of the run
``backend``                 ``cpu`` or ``gpu``
``devices``                 ``{device name: ranks using it}`` (CPU model or GPU name)
``started``                 UTC start, ISO 8601
``wall_seconds``            the slowest rank's wall time
``rate``, ``rate_unit``     the domain's rate (``paths/s``, ``MLUPS``, ``GFLOP/s`` ...)
``work``, ``work_unit``     the amount of work the rate divides (optional)
``limit``, ``limit_unit``   where one is defined: the rate's ceiling (memory bandwidth,
                            FLOP rate) and ``fraction_of_limit`` the achieved fraction;
                            ``achieved`` the achieved figure in ``limit_unit``
``gpu``                     on a GPU: utilisation (mean, max, %) and used memory (max,
                            bytes) sampled by NVML in a background thread, per rank's device
==========================  ==============================================================

:func:`write_run_record` stores it as attributes of the group ``run`` of an HDF5 file (lists
and dicts as JSON text), plus the whole record as JSON in the attribute ``json`` (or, for files
that must hold only datasets at the root, as the JSON root attribute ``run_record``);
:func:`read_run_record` gives the dict back.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "RunRecord",
    "GPUSampler",
    "write_run_record",
    "read_run_record",
    "gemm_peak_flops",
    "RECORD_GROUP",
]

RECORD_GROUP = "run"
ROOT_ATTRIBUTE = "run_record"


def cpu_name() -> str:
    """Local. The CPU model (``/proc/cpuinfo``'s model name where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _visible_nvml_index(device_id: int) -> int | str:
    """NVML's handle for CUDA device ``device_id`` (NVML ignores CUDA_VISIBLE_DEVICES)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible:
        return device_id
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    entry = entries[device_id] if device_id < len(entries) else str(device_id)
    return int(entry) if entry.isdigit() else entry


class GPUSampler:
    """Local. Utilisation and used memory of one GPU, sampled by NVML every ``interval``
    seconds in a daemon thread, from :meth:`start` to :meth:`stop`.

    Without NVML (no driver, no nvidia-ml-py) or without that device the sampler is inert:
    :attr:`available` is False and :meth:`stop` returns None; nothing raises.
    """

    def __init__(self, device_id: int = 0, interval: float = 0.5) -> None:
        self.interval = float(interval)
        self.available = False
        self.name: str | None = None
        self._handle: Any = None
        self._util: list[float] = []
        self._mem: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            which = _visible_nvml_index(device_id)
            if isinstance(which, int):
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(which)
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(which)
            name = pynvml.nvmlDeviceGetName(self._handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
            self.available = True
        except Exception:  # no library, no driver, no such device: skipped, as documented
            self._handle = None

    def _sample(self) -> None:
        import pynvml

        try:
            util = pynvml.nvmlDeviceGetUtilizationRates(self._handle)
            mem = pynvml.nvmlDeviceGetMemoryInfo(self._handle)
        except Exception:  # a transient NVML failure loses one sample, not the run
            return
        self._util.append(float(util.gpu))
        self._mem.append(int(mem.used))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> GPUSampler:
        """Start sampling (no-op when unavailable)."""
        if self.available and self._thread is None:
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="hpc-nvml", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling; the summary (None when unavailable)."""
        if not self.available:
            return None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sample()
        n = len(self._util)
        return {
            "name": self.name,
            "samples": n,
            "utilisation_mean_percent": sum(self._util) / n if n else None,
            "utilisation_max_percent": max(self._util) if n else None,
            "memory_used_max_bytes": max(self._mem) if self._mem else None,
        }


class RunRecord:
    """Collective over ``comm`` at :meth:`finish`. The record of one run (see the module).

    Parameters
    ----------
    comm : MPI.Comm, optional
        The run's ranks (default :func:`hpc.comm.world`).
    backend : str or Backend, optional
        The backend the work runs on (its name is recorded; ``gpu`` samples the rank's GPU).
    argv : sequence of str, optional
        The command line (default ``["hpc", *sys.argv[1:]]``).
    sample_gpu : bool
        Sample the GPU with NVML while the run lasts (only with the gpu backend).
    """

    def __init__(
        self,
        comm: Any = None,
        backend: Any = None,
        argv: Sequence[str] | None = None,
        sample_gpu: bool = True,
    ) -> None:
        from .comm import resolve_comm

        self.comm = resolve_comm(comm)
        name = getattr(backend, "name", backend)
        self.backend = str(name) if name is not None else "cpu"
        device_id = int(getattr(backend, "device_id", 0) or 0)
        self.argv = list(argv) if argv is not None else ["hpc", *sys.argv[1:]]
        self.started = datetime.now(UTC).isoformat(timespec="seconds")
        self._t0 = time.perf_counter()
        self.sampler = GPUSampler(device_id) if sample_gpu and self.backend == "gpu" else None
        if self.sampler is not None:
            self.sampler.start()
        self.record: dict[str, Any] | None = None

    def finish(
        self,
        rate: float | None = None,
        rate_unit: str | None = None,
        work: float | None = None,
        work_unit: str | None = None,
        limit: float | None = None,
        limit_unit: str | None = None,
        achieved: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Collective. Stop the clock and the GPU sampler; the record (the same on every rank).

        Parameters
        ----------
        rate, rate_unit : float, str
            The domain's rate (``paths/s``, ``MLUPS``, ``vectors/s``, ``GFLOP/s``). Default:
            ``work / wall_seconds`` in ``{work_unit}/s`` when ``work`` is given.
        work, work_unit : float, str
            How much was done (paths, cell updates, vectors).
        limit, limit_unit : float, str
            The ceiling of ``achieved`` where one is defined (bytes/s of memory bandwidth,
            FLOP/s); ``fraction_of_limit = achieved / limit``.
        achieved : float
            The figure compared with ``limit`` (default ``rate``).
        extra : mapping
            More JSON-serialisable fields (domain-specific).
        """
        from .collectives import allgather_object, allreduce

        wall = time.perf_counter() - self._t0
        gpu = self.sampler.stop() if self.sampler is not None else None
        wall = float(allreduce(wall, "max", self.comm))
        device = gpu["name"] if gpu and gpu.get("name") else cpu_name()
        per_rank = allgather_object((device, gpu), self.comm)
        devices: dict[str, int] = {}
        for name, _ in per_rank:
            devices[name] = devices.get(name, 0) + 1
        if rate is None and work is not None and work_unit:
            rate, rate_unit = work / max(wall, 1e-12), f"{work_unit}/s"
        record: dict[str, Any] = {
            "command": shlex.join(self.argv),
            "hpc_version": _version(),
            "ranks": self.comm.Get_size(),
            "backend": self.backend,
            "devices": dict(sorted(devices.items())),
            "started": self.started,
            "wall_seconds": wall,
        }
        if rate is not None:
            record["rate"] = float(rate)
            record["rate_unit"] = rate_unit or ""
        if work is not None:
            record["work"] = float(work)
            record["work_unit"] = work_unit or ""
        if limit is not None and limit > 0:
            got = achieved if achieved is not None else rate
            record["limit"] = float(limit)
            record["limit_unit"] = limit_unit or ""
            if got is not None:
                record["achieved"] = float(got)
                record["fraction_of_limit"] = float(got) / float(limit)
        samples = [{"rank": r, **g} for r, (_, g) in enumerate(per_rank) if g]
        if samples:
            record["gpu"] = samples
        if extra:
            record.update(json.loads(json.dumps(dict(extra))))
        self.record = record
        return record


def _version() -> str:
    import hpc

    return str(hpc.__version__)


def write_run_record(
    path_or_group: Any,
    record: Mapping[str, Any],
    comm: Any = None,
    group: str | None = RECORD_GROUP,
) -> None:
    """Collective. Store ``record`` in the HDF5 file (or open group) ``path_or_group``: the
    group ``run``, one attribute per field (lists and dicts as JSON), and the attribute
    ``json`` with the whole record. An existing record is replaced.

    ``group=None`` stores only the JSON, as the root attribute ``run_record``: for files whose
    readers take every root member for a dataset (vector index files).

    Every rank passes the same record (rank 0's is written).
    """
    from hpc.io.files import as_target

    from .collectives import bcast_object
    from .comm import resolve_comm

    comm = resolve_comm(comm)
    values = bcast_object(dict(record), 0, comm)
    text = json.dumps(values, sort_keys=True)
    with as_target(path_or_group, "a", comm) as target:
        if not target.does_io:
            return
        root = target.group
        if group is None:
            root.attrs[ROOT_ATTRIBUTE] = text
            return
        if group in root:
            del root[group]
        g = root.create_group(group)
        for key, value in values.items():
            g.attrs[key] = json.dumps(value) if isinstance(value, dict | list | tuple) else value
        g.attrs["json"] = text


def read_run_record(path: str | os.PathLike[str], group: str = RECORD_GROUP) -> dict[str, Any]:
    """Local. The run record stored in the HDF5 file ``path``: the group ``group``'s, else
    the root attribute ``run_record`` (KeyError naming the file when it has neither)."""
    import h5py

    with h5py.File(path, "r") as f:
        if group in f:
            text = f[group].attrs["json"]
        elif ROOT_ATTRIBUTE in f.attrs:
            text = f.attrs[ROOT_ATTRIBUTE]
        else:
            raise KeyError(f"{str(path)!r} holds no run record (no group {group!r})")
    return dict(json.loads(text.decode() if isinstance(text, bytes) else str(text)))


def gemm_peak_flops(backend: Any = None, n: int = 1024, repeats: int = 3) -> float:
    """Local. This device's float32 GEMM rate (FLOP/s): the best of ``repeats`` products of
    two ``n x n`` matrices with the backend's BLAS (NumPy's, or cuBLAS through CuPy).

    A measured ceiling for GEMM-bound work (k-NN, k-means): ``fraction_of_limit`` then says
    how close a run came to what this machine's BLAS reaches, which a nominal peak (clock x
    lanes x cores) overstates on shared or throttled machines.
    """
    from .backend import get_backend

    be = get_backend(backend)
    xp = be.xp
    a = xp.ones((n, n), dtype=xp.float32)
    b = xp.ones((n, n), dtype=xp.float32)
    (a @ b)[0, 0].item()  # warm: BLAS threads, cuBLAS handle
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        (a @ b)[0, 0].item()
        be.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / max(best, 1e-12)


def copy_bandwidth(comm: Any = None, nbytes: int = 1 << 26, repeats: int = 3) -> float:
    """Collective over ``comm``. The memory bandwidth of every rank copying at once (bytes/s
    read + written over all ranks): the best of ``repeats`` copies of ``nbytes`` per rank.

    The measured ceiling of memory-bound work (a lattice Boltzmann step reads and writes
    every population once): ``fraction_of_limit`` then compares a run with what this
    machine's memory delivers now, not with a data-sheet figure.
    """
    import numpy as np

    from .collectives import allreduce
    from .comm import resolve_comm

    comm = resolve_comm(comm)
    src = np.ones(max(nbytes // 8, 1))
    dst = np.empty_like(src)
    np.copyto(dst, src)  # pages touched before timing
    best = float("inf")
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, allreduce(time.perf_counter() - t0, "max", comm))
    return comm.Get_size() * 2.0 * src.nbytes / max(best, 1e-12)
