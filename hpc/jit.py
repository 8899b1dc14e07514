"""One Python source, several compiled kernels, each compiled once per machine.

A kernel is written once as plain module-level Python functions (*templates*): device helpers
and entry points that call each other, and helpers such as ``_exp`` or ``_pair``, by global
name. :func:`specialise` writes them out as a generated module for one *target*, with chosen
global names rebound (constants folded at compile time, a helper swapped for the target's
version), under ``HPC_CACHE_DIR/kernels`` in a file named by a hash of its text, and imports it.
The kernels there are compiled with ``cache=True``: numba's disk cache is keyed on the source
file, the function and the machine, so a second process loads them instead of compiling.

Targets
-------
``cpu``
    numba ``njit``: entry points ``parallel=True`` (``prange`` over blocks, an inner loop over
    lanes that LLVM vectorises), helpers inlined into them.
``cpu-serial``
    numba ``njit`` without threads (small kernels, reference bijections).
``cuda``
    ``numba.cuda.jit``: entry points are kernels, helpers device functions. The generated module
    imports ``cuda`` and numba's scalar types, so templates may use ``cuda.grid`` and
    ``cuda.local.array(n, float64)``.

The CPU modules import ``prange``. A template's own module may hold placeholders for these names
(``prange = range``, ``cuda = None``): importing it then needs neither numba nor a GPU.

What invalidates a generated kernel: any change of its text (the templates' source, the values
bound, the target), of the source file of a project module it imports a helper from, or of the
numba version (all part of the hash); numba itself keys its cache on the CPU. Files are created
with an atomic no-replace link, so ranks generating the same kernel at once agree on one file
and its timestamp (which numba's cache index checks).
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import hashlib
import importlib.util
import inspect
import logging
import os
import sys
import tempfile
import textwrap
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "TARGETS",
    "specialise",
    "load_source",
    "module_source",
    "compiled_kernels",
    "cache_stats",
    "kernel_dir",
    "SERIAL_BELOW",
    "serial_below",
]

TARGETS = ("cpu", "cpu-serial", "cuda")
_PROJECT = "hpc"  # modules of this distribution: their source files are hashed as dependencies
# names every generated module of a target defines (templates use them; their own modules may
# hold placeholders, so that importing them needs neither numba nor a GPU)
_CUDA_NAMES = ("cuda", "float32", "float64", "int32", "int64", "uint32", "uint64", "boolean")
_PROVIDED = {"cpu": ("prange",), "cpu-serial": ("prange",), "cuda": _CUDA_NAMES}

_lock = threading.Lock()
_loaded: dict[str, types.ModuleType] = {}  # digest -> generated module
_registry: list[tuple[str, str, Any]] = []  # (label, name, compiled kernel), in build order
_warned: set[Path] = set()


SERIAL_BELOW = 1 << 15  # work items below which a parallel kernel runs on one thread


@contextlib.contextmanager
def serial_below(items: int, threshold: int = SERIAL_BELOW) -> Iterator[None]:
    """Run the numba kernels called in the block on the calling thread alone when the work
    has fewer than ``threshold`` items (rows, elements): starting a parallel region costs
    tens of microseconds on an idle machine and milliseconds on a busy one, more than such
    work. The thread count is per calling thread (numba's ``set_num_threads``), restored on
    exit."""
    import numba

    threads = numba.get_num_threads()
    if items >= threshold or threads == 1:
        yield
        return
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(threads)


def kernel_dir() -> Path:
    """The folder of generated kernel modules (``HPC_CACHE_DIR/kernels``), created if needed."""
    from .config import settings

    path = Path(settings().cache_dir) / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    # a read-only home or cache folder: kernels still compile, cached for this user in /tmp
    fallback = Path(tempfile.gettempdir()) / f"hpc-{os.getuid()}" / "kernels"
    fallback.mkdir(parents=True, exist_ok=True)
    if path not in _warned:
        _warned.add(path)
        logging.getLogger("hpc").warning(
            "HPC_CACHE_DIR %s is not writable; generated kernels go to %s", path, fallback
        )
    return fallback


def specialise(
    label: str,
    kernels: Sequence[Callable[..., Any]],
    helpers: Sequence[Callable[..., Any]] = (),
    bind: Mapping[str, Any] | None = None,
    target: str = "cpu",
    options: Mapping[str, Any] | None = None,
) -> types.ModuleType:
    """Compile templates for one target through a generated, disk-cached module.

    Parameters
    ----------
    label : str
        Short identifier naming the generated file (``risk_lanes``); not part of the cache key.
    kernels : sequence of functions
        Entry points (plain module-level functions), compiled as kernels of ``target``.
    helpers : sequence of functions
        Functions the kernels call: inlined on the CPU, device functions on the GPU.
    bind : mapping, optional
        Global names of the templates given other values: constants (numbers, booleans,
        strings, tuples, NumPy scalars), written into the module and folded by the compiler,
        numba scalar types (``numba.float64``), or compiled functions of importable modules
        (another generated module included).
        Every other global a template reads is taken from the template's own module.
    target : {"cpu", "cpu-serial", "cuda"}
        See the module docstring.
    options : mapping, optional
        Extra decorator options of the entry points (``error_model``, ``fastmath``, ...).

    Returns
    -------
    module
        The generated module: its attributes, named as the templates, are the compiled
        functions.

    Examples
    --------
    >>> def _scale(x):
    ...     return _FACTOR * x
    >>> # m = specialise("demo", [_scale], bind={"_FACTOR": 3.0}, target="cpu-serial")
    >>> # m._scale(2.0) -> 6.0, compiled once per machine
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {TARGETS}")
    if not label.isidentifier():
        raise ValueError(f"label={label!r}: must be a Python identifier")
    text = module_source(kernels, helpers, bind or {}, target, options or {})
    return load_source(label, text, [fn.__name__ for fn in kernels])


def load_source(label: str, text: str, kernels: Sequence[str] = ()) -> types.ModuleType:
    """Import generated kernel source ``text`` from ``HPC_CACHE_DIR/kernels``, written there
    once under a name hashed from the text (for generators of their own, such as the lattice
    Boltzmann kernels). ``kernels``: names of its entry points, for :func:`cache_stats`."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    with _lock:
        if digest in _loaded:
            return _loaded[digest]
        name = f"hpc_kernels_{label}_{digest}"
        module = _import(name, _write_once(kernel_dir() / f"{name}.py", text))
        _loaded[digest] = module
        _registry.extend((label, k, getattr(module, k)) for k in kernels)
    return module


def module_source(
    kernels: Sequence[Callable[..., Any]],
    helpers: Sequence[Callable[..., Any]],
    bind: Mapping[str, Any],
    target: str,
    options: Mapping[str, Any],
) -> str:
    """The generated module's text (see :func:`specialise`); deterministic for equal input."""
    import numba

    templates = [*helpers, *kernels]
    defined = {fn.__name__ for fn in templates}
    if len(defined) != len(templates):
        raise ValueError("two templates share a name: " + ", ".join(f.__name__ for f in templates))
    provided = set(_PROVIDED[target])
    header: dict[str, str] = {}  # name -> line binding it (sorted on output: deterministic)
    depends: dict[str, str] = {}  # project source file -> its digest
    for name, value in bind.items():
        header[name] = _binding(name, value, depends, f"bind[{name!r}]")
    for fn in templates:
        for name in _global_names(fn.__code__):
            if name in defined or name in provided or name in bind:
                continue
            if name in fn.__globals__:
                where = f"global {name!r} of template {fn.__module__}.{fn.__qualname__}"
                line = _binding(name, fn.__globals__[name], depends, where)
                if header.setdefault(name, line) != line:  # templates of two modules disagree
                    raise ValueError(
                        f"{where} is `{line}` but another template's is `{header[name]}`; bind it"
                    )
            elif not hasattr(builtins, name):
                raise NameError(f"template {fn.__qualname__} reads undefined global {name!r}")
    lines = [
        '"""Generated by hpc.jit.specialise: do not edit (the file name is a hash of its text)."""',
        "# ruff: noqa",
        f"# target: {target}; numba {numba.__version__}",
        *(f"# depends: {path} {digest}" for path, digest in sorted(depends.items())),
        "from __future__ import annotations",
        "import numba as _hpc_numba",
        "import numpy as _hpc_np",
    ]
    lines.append(f"from numba import {', '.join(_PROVIDED[target])}")
    lines += [header[name] for name in sorted(header)]
    helper_deco, kernel_deco = _decorators(target, options)
    for fn in helpers:
        lines += ["", "", helper_deco, _template_source(fn)]
    for fn in kernels:
        lines += ["", "", kernel_deco, _template_source(fn)]
    return "\n".join(lines) + "\n"


def _decorators(target: str, options: Mapping[str, Any]) -> tuple[str, str]:
    """Decorator lines of helpers and entry points for ``target``."""
    opts = "".join(f", {k}={_literal(v)}" for k, v in sorted(options.items()))
    if target == "cuda":
        return "@cuda.jit(device=True)", f"@cuda.jit(cache=True{opts})"
    helper = "@_hpc_numba.njit(inline='always', cache=True)"
    parallel = "parallel=True, " if target == "cpu" else ""
    return helper, f"@_hpc_numba.njit({parallel}nogil=True, cache=True{opts})"


def _global_names(code: types.CodeType) -> Iterator[str]:
    """Names a function's code (and the code nested in it) reads as globals."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield ins.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _template_source(fn: Callable[..., Any]) -> str:
    if not isinstance(fn, types.FunctionType) or "<locals>" in fn.__qualname__:
        raise TypeError(f"{fn!r}: a template is a plain module-level function")
    text = textwrap.dedent(inspect.getsource(fn))
    if text.lstrip().startswith("@"):
        raise TypeError(f"template {fn.__qualname__} is decorated; templates are plain Python")
    return text.rstrip()


def _binding(name: str, value: Any, depends: dict[str, str], where: str) -> str:
    """The line of the generated module giving ``name`` its value."""
    if isinstance(value, types.ModuleType):
        _depend(value, depends)
        return f"import {value.__name__} as {name}"
    if type(value).__module__.startswith("numba.core.types"):  # a scalar type: float64, ...
        import numba

        if getattr(numba, str(value), None) != value:
            raise TypeError(f"{where}: numba type {value} is not numba.{value}")
        return f"{name} = _hpc_numba.{value}"
    if callable(value) and not isinstance(value, type):
        module, attr = _importable(value, where)
        _depend(sys.modules[module], depends)
        return f"from {module} import {attr} as {name}"
    return f"{name} = {_literal(value, where)}"


def _importable(fn: Any, where: str) -> tuple[str, str]:
    """``(module, attribute)`` under which the compiled function ``fn`` can be imported."""
    py = getattr(fn, "py_func", fn)
    module, attr = getattr(py, "__module__", None), getattr(py, "__name__", None)
    if module in sys.modules and getattr(sys.modules[module], attr or "", None) is fn:
        return module, attr
    raise TypeError(
        f"{where}: {fn!r} is not importable as a module attribute; make it a module-level "
        "function, or a template of this call"
    )


def _depend(module: types.ModuleType, depends: dict[str, str]) -> None:
    """Record the source digest of a project module (third-party ones are versioned)."""
    if module.__name__.split(".")[0] != _PROJECT or module.__name__.startswith("hpc_kernels_"):
        return
    path = getattr(module, "__file__", None)
    if path:
        rel = module.__name__.replace(".", "/") + ".py"
        depends[rel] = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _literal(value: Any, where: str = "option") -> str:
    """Python source of a constant that evaluates to an equal value."""
    import numpy as np

    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else f"float({value!r})"
    if isinstance(value, np.generic):
        return f"_hpc_np.{type(value).__name__}({_literal(value.item(), where)})"
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v, where) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, (set, frozenset)):
        items = ", ".join(_literal(v, where) for v in sorted(value, key=repr))
        return f"frozenset({{{items}}})" if items else "frozenset()"
    raise TypeError(f"{where}: {type(value).__name__} value {value!r} cannot be a kernel constant")


def _write_once(path: Path, text: str) -> Path:
    """``path`` holding ``text``: created atomically by whichever process comes first."""
    if path.exists():
        try:
            if path.read_text() == text:
                return path
        except OSError:
            pass
        path.unlink(missing_ok=True)  # damaged (a crash of an older writer): written anew
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, path)  # fails if another process got there first: its file is the same
    except FileExistsError:
        pass
    except OSError:  # file systems without hard links
        if not path.exists():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _import(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba and ``from <name> import f`` in dependents find it here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def compiled_kernels() -> list[tuple[str, str, Any]]:
    """``(label, name, kernel)`` of every entry point :func:`specialise` built in this process."""
    with _lock:
        return list(_registry)


def cache_stats() -> dict[str, tuple[int, int]]:
    """``"label.name" -> (cache hits, cache misses)`` of the CPU entry points built so far
    (numba's dispatcher statistics: a miss is a compilation), summed over the versions of one
    label (kernels of several payoffs, lattices or shapes)."""
    out: dict[str, tuple[int, int]] = {}
    for label, name, kernel in compiled_kernels():
        stats = getattr(kernel, "stats", None)
        if stats is not None:
            hits, misses = out.get(f"{label}.{name}", (0, 0))
            hits += sum(stats.cache_hits.values())
            misses += sum(stats.cache_misses.values())
            out[f"{label}.{name}"] = (hits, misses)
    return out
