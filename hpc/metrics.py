"""A run record's figures in Prometheus' text format, for a node exporter's textfile collector.

:func:`write_metrics` turns a :class:`hpc.runrecord.RunRecord` dict into gauges in a
``CollectorRegistry`` of its own (nothing of the process's default registry leaks in) and
writes them with ``prometheus_client.write_to_textfile`` (a temporary renamed into place, so
the collector never reads half a file). Point ``--metrics`` into the collector's directory
(``--collector.textfile.directory``) with a name ending in ``.prom``.

Metrics (labels ``command``: the subcommand such as ``risk price``, ``backend``):

- ``hpc_run_info{version, devices, ranks}`` 1
- ``hpc_run_wall_seconds``, ``hpc_run_ranks``
- ``hpc_run_rate{unit}``, ``hpc_run_work{unit}``
- ``hpc_run_limit{unit}``, ``hpc_run_achieved{unit}``, ``hpc_run_fraction_of_limit``
- ``hpc_run_gpu_utilisation_mean_percent{rank}``, ``hpc_run_gpu_utilisation_max_percent{rank}``,
  ``hpc_run_gpu_memory_used_max_bytes{rank}`` (GPU runs)
- ``hpc_run_timestamp_seconds``: when the file was written (Unix time)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["write_metrics", "subcommand"]


def subcommand(command: str) -> str:
    """Local. ``risk price`` from ``hpc risk price book.json --paths 1e6``: the words after
    ``hpc`` up to the first option or argument that is a path or number."""
    words = command.split()[1:] if command.startswith("hpc") else command.split()
    out = []
    for w in words[:2]:
        if w.startswith("-") or not w.replace("-", "").isalpha():
            break
        out.append(w)
    return " ".join(out)


def write_metrics(path: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Local. Write ``record``'s figures to ``path`` in Prometheus' text exposition format.

    Call it on one rank (rank 0); the record is the job's (see :meth:`RunRecord.finish`).
    """
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    registry = CollectorRegistry()
    base = {"command": subcommand(str(record.get("command", ""))), "backend": record["backend"]}
    names = list(base)

    def gauge(name: str, doc: str, value: Any, **labels: str) -> None:
        if value is None:
            return
        g = Gauge(name, doc, [*names, *labels], registry=registry)
        g.labels(**base, **labels).set(float(value))

    info = Gauge(
        "hpc_run_info",
        "the run: library version and devices",
        [*names, "version", "devices"],
        registry=registry,
    )
    info.labels(
        **base, version=str(record["hpc_version"]), devices=json.dumps(record["devices"])
    ).set(1)
    gauge("hpc_run_wall_seconds", "wall time of the slowest rank", record["wall_seconds"])
    gauge("hpc_run_ranks", "MPI ranks", record["ranks"])
    if "rate" in record:
        gauge("hpc_run_rate", "the domain's rate", record["rate"], unit=record["rate_unit"])
    if "work" in record:
        gauge("hpc_run_work", "work done", record["work"], unit=record["work_unit"])
    if "limit" in record:
        unit = record["limit_unit"]
        gauge("hpc_run_limit", "the rate's ceiling", record["limit"], unit=unit)
        gauge(
            "hpc_run_achieved",
            "the figure set against the limit",
            record.get("achieved"),
            unit=unit,
        )
        gauge("hpc_run_fraction_of_limit", "achieved / limit", record.get("fraction_of_limit"))
    for gpu in record.get("gpu", []):
        r = str(gpu.get("rank", 0))
        gauge(
            "hpc_run_gpu_utilisation_mean_percent",
            "NVML GPU utilisation, mean",
            gpu.get("utilisation_mean_percent"),
            rank=r,
        )
        gauge(
            "hpc_run_gpu_utilisation_max_percent",
            "NVML GPU utilisation, max",
            gpu.get("utilisation_max_percent"),
            rank=r,
        )
        gauge(
            "hpc_run_gpu_memory_used_max_bytes",
            "NVML used GPU memory, max",
            gpu.get("memory_used_max_bytes"),
            rank=r,
        )
    gauge("hpc_run_timestamp_seconds", "when this file was written", time.time())
    write_to_textfile(str(path), registry)
