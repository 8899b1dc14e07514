"""Device implementations chosen once: a table of named operations per device kind.

Domain logic never asks which device it runs on. A module lists its operations' CPU and GPU
implementations (and per-device constants such as block sizes) in a :class:`DeviceTable`;
an index, solver or engine takes the set of its backend once (:meth:`DeviceTable.on`) and
calls ``ops.name(...)`` from then on. Where the algorithm is the same on both devices it is
written once instead (:func:`hpc.jit.specialise` generates both targets from one template).

Examples
--------
>>> OPS = DeviceTable("vector.flat")
>>> OPS.constants("cpu", db_block=1024)
>>> @OPS.cpu("search")
... def _search_cpu(xp, queries, k): ...
>>> ops = OPS.on(get_backend("cpu"))
>>> ops.search(np, q, 10), ops.db_block
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

__all__ = ["DeviceTable", "KINDS"]

KINDS = ("cpu", "gpu")


class DeviceTable:
    """Named operations and constants, one entry per device kind (``"cpu"``, ``"gpu"``).

    Parameters
    ----------
    name : str
        Says whose table it is in errors (``"vector.flat"``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        # each device's namespace, built once: a search of one query must not rebuild it
        self._built: dict[str, types.SimpleNamespace] = {}

    def _put(self, kind: str, key: str, value: Any) -> None:
        if kind not in self._entries:
            raise ValueError(f"{self.name}: device kind {kind!r}: expected one of {KINDS}")
        if key in self._entries[kind]:
            raise ValueError(f"{self.name}: {key!r} is already registered for {kind}")
        self._entries[kind][key] = value
        self._built.clear()

    def register(self, kind: str, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``fn`` implements ``op`` on ``kind`` (``fn`` is returned unchanged)."""
        if kind not in self._entries:
            raise ValueError(f"{self.name}: device kind {kind!r}: expected one of {KINDS}")

        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._put(kind, op, fn)
            return fn

        return add

    def cpu(self, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: the CPU implementation of ``op``."""
        return self.register("cpu", op)

    def gpu(self, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: the GPU implementation of ``op``."""
        return self.register("gpu", op)

    def both(self, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: one implementation of ``op`` for every device (written with ``xp``)."""

        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            for kind in KINDS:
                self._put(kind, op, fn)
            return fn

        return add

    def constants(self, kind: str, **values: Any) -> None:
        """Per-device values (block sizes, capabilities) read as ``ops.<name>``."""
        for key, value in values.items():
            self._put(kind, key, value)

    def on(self, backend: Any) -> types.SimpleNamespace:
        """The operations and constants of ``backend``'s device (a Backend or its name).

        Raises
        ------
        ValueError
            When an entry that another device has is missing for this one (a table must
            be complete for every device it lists).
        """
        kind = backend if isinstance(backend, str) else backend.name
        built = self._built.get(kind)
        if built is not None:
            return built
        if kind not in self._entries:
            raise ValueError(f"{self.name}: no implementations for device {kind!r}")
        mine = self._entries[kind]
        every = set().union(*(e.keys() for e in self._entries.values()))
        missing = sorted(every - mine.keys())
        if missing:
            raise ValueError(f"{self.name}: {', '.join(missing)} not implemented for {kind}")
        built = self._built[kind] = types.SimpleNamespace(kind=kind, **mine)
        return built
