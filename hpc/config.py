"""Every ``HPC_*`` environment variable, read in one place.

The values are read when first asked for (not at import), so a launcher or a test can set them
before the first use. ``docs/core.md`` lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Settings", "settings"]

_BACKENDS = ("auto", "cpu", "gpu")


def _flag(name: str, value: str | None) -> bool | None:
    """Parse an optional on/off variable: unset or empty -> None."""
    if value is None or value.strip() == "":
        return None
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r}: expected 0 or 1")


@dataclass(frozen=True)
class Settings:
    """A snapshot of the library's environment settings.

    Attributes
    ----------
    backend : {"auto", "cpu", "gpu"}
        ``HPC_BACKEND``: device choice (default ``auto``: the GPU when CuPy finds one, else CPU).
    cuda_aware_mpi : bool or None
        ``HPC_CUDA_AWARE_MPI``: force (1) or forbid (0) passing device buffers to MPI; unset means
        detect from the MPI library.
    abort_on_exception : bool
        ``HPC_ABORT_ON_EXCEPTION``: install the excepthook that aborts the whole MPI job when one
        rank raises (default 1; only ever active when the world has more than one rank).
    test_device : str
        ``HPC_TEST_DEVICE``: ``gpu`` enables the tests marked ``gpu``.
    cache_dir : str
        ``HPC_CACHE_DIR``: where generated kernels are kept (default ``~/.cache/hpc``, or
        ``$XDG_CACHE_HOME/hpc``).
    io_mode : {"auto", "mpio", "serial"}
        ``HPC_IO_MODE``: parallel HDF5 (``mpio``) when h5py has MPI and there is more than one
        rank (``auto``), or always through rank 0 (``serial``: gather/scatter).
    """

    backend: str = "auto"
    cuda_aware_mpi: bool | None = None
    abort_on_exception: bool = True
    test_device: str = "cpu"
    io_mode: str = "auto"
    cache_dir: str = ""


# the variables a snapshot depends on (HOME: the default cache directory)
_NAMES = ("HPC_BACKEND", "HPC_IO_MODE", "HPC_ABORT_ON_EXCEPTION", "HPC_CUDA_AWARE_MPI",
          "HPC_TEST_DEVICE", "HPC_CACHE_DIR", "XDG_CACHE_HOME", "HOME")
_last: tuple[tuple[str | None, ...], Settings] | None = None


def settings() -> Settings:
    """Read the ``HPC_*`` variables now and return them.

    The snapshot is parsed again only when one of the variables changed since the last
    call (a call per kernel launch or search then costs a few dictionary lookups, not the
    parsing and path expansion).

    Raises
    ------
    ValueError
        If a variable holds a value outside its allowed set (the message names it).
    """
    global _last
    env = os.environ
    key = _snapshot()
    if _last is not None and _last[0] == key:
        return _last[1]
    result = _read(env)
    _last = (key, result)
    return result


def _snapshot() -> tuple:
    """The raw (encoded) values of :data:`_NAMES` now. ``os.environ.get`` encodes the name
    and decodes the value on every call (about 0.7 us each, 6 us for the eight); the
    mapping's own dictionary of encoded names answers the same in a few hundred nanoseconds.
    ``_data`` is what every ``os.environ`` write updates; an implementation without it takes
    the slow path."""
    data = getattr(os.environ, "_data", None)
    if data is None or not _ENCODED:
        return tuple(os.environ.get(name) for name in _NAMES)
    return tuple(map(data.get, _ENCODED))


_ENCODE = getattr(os.environ, "encodekey", None)
_ENCODED = tuple(map(_ENCODE, _NAMES)) if _ENCODE is not None else ()


def _read(env: os._Environ[str]) -> Settings:
    backend = env.get("HPC_BACKEND", "auto").strip().lower() or "auto"
    if backend not in _BACKENDS:
        raise ValueError(f"HPC_BACKEND={backend!r}: expected one of {', '.join(_BACKENDS)}")
    io_mode = env.get("HPC_IO_MODE", "auto").strip().lower() or "auto"
    if io_mode not in ("auto", "mpio", "serial"):
        raise ValueError(f"HPC_IO_MODE={io_mode!r}: expected auto, mpio or serial")
    abort = _flag("HPC_ABORT_ON_EXCEPTION", env.get("HPC_ABORT_ON_EXCEPTION"))
    return Settings(
        backend=backend,
        cuda_aware_mpi=_flag("HPC_CUDA_AWARE_MPI", env.get("HPC_CUDA_AWARE_MPI")),
        abort_on_exception=True if abort is None else abort,
        test_device=env.get("HPC_TEST_DEVICE", "cpu").strip().lower() or "cpu",
        io_mode=io_mode,
        cache_dir=env.get("HPC_CACHE_DIR")
        or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hpc"),
    )
