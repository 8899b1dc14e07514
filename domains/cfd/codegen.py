"""Stream-and-collide kernels generated from the lattice: one description, CPU and GPU.

The fused pull kernel is written out per lattice, collision and precision as Python source with
every direction unrolled (the form a compiler turns into straight-line code), then compiled by
numba: ``njit(parallel=True)`` over the rows of a box on the CPU, or ``numba.cuda.jit`` with one
thread per cell on the GPU. The same generated cell body is used for both.

The source is written to a cache folder (``HPC_CACHE_DIR``, default ``~/.cache/hpc``) under a
name hashed from its text, so numba's on-disk cache applies and later runs start instantly.

Cell update (pull scheme, two buffers): each population is pulled from the neighbour it streams
from; if that neighbour is a wall (flag 1) the population leaving this cell towards the wall is
reflected instead (half-way bounce-back), plus ``6 w_i c_i . U`` for a moving wall (flag 2, wall
velocity U). Then BGK or TRT collision with the Guo forcing term.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .lattice import Lattice

__all__ = ["kernel_source", "load_kernel", "FLUID", "WALL", "MOVING_WALL"]

FLUID, WALL, MOVING_WALL = 0, 1, 2
_AXES = "xyz"


def _num(v: float) -> str:
    return f"T({float(v)!r})"


def _dot(c: tuple[int, ...], names: list[str]) -> str:
    terms = []
    for ci, n in zip(c, names, strict=True):
        if ci == 1:
            terms.append(f"+ {n}")
        elif ci == -1:
            terms.append(f"- {n}")
        elif ci != 0:
            terms.append(f"+ {ci} * {n}")
    if not terms:
        return "T(0.0)"
    text = " ".join(terms)
    return text[2:] if text.startswith("+ ") else f"-{text[2:]}"


def _cell_body(
    lat: Lattice, collision: str, forcing: bool, indent: str, walls: bool = True
) -> list[str]:
    d, q = lat.d, lat.q
    c = [tuple(int(v) for v in row) for row in lat.c.tolist()]
    opp = lat.opposite.tolist()
    idx = ", ".join(_AXES[:d])
    uw = [f"U{a}" for a in range(d)]
    out = [f"if flags[{idx}] == {FLUID}:" if walls else "if True:  # an all-fluid box"]
    ind = indent + "    "
    body = []
    for i in range(q):
        if not any(c[i]):
            body.append(f"p{i} = f[{i}, {idx}]")
            continue
        src = ", ".join(
            f"{_AXES[a]} - ONE"
            if c[i][a] > 0
            else (f"{_AXES[a]} + ONE" if c[i][a] < 0 else _AXES[a])
            for a in range(d)
        )
        lid = _num(6.0 * lat.w[i])
        if not walls:
            body.append(f"p{i} = f[{i}, {src}]")
            continue
        body += [
            f"fl = flags[{src}]",
            f"if fl == {FLUID}:",
            f"    p{i} = f[{i}, {src}]",
            f"elif fl == {WALL}:",
            f"    p{i} = f[{opp[i]}, {idx}]",
            "else:",
            f"    p{i} = f[{opp[i]}, {idx}] + {lid} * ({_dot(c[i], uw)})",
        ]
    body.append("rho = " + " + ".join(f"p{i}" for i in range(q)))
    body.append("inv = T(1.0) / rho")
    for a in range(d):
        terms = " ".join(("+ " if c[i][a] > 0 else "- ") + f"p{i}" for i in range(q) if c[i][a])
        shift = f" + T(0.5) * F{a}" if forcing else ""
        body.append(
            f"u{a} = ({terms[2:] if terms.startswith('+ ') else '-' + terms[2:]}{shift}) * inv"
        )
    u = [f"u{a}" for a in range(d)]
    body.append("usq = " + " + ".join(f"u{a} * u{a}" for a in range(d)))
    if forcing:
        body.append("uF = " + " + ".join(f"u{a} * F{a}" for a in range(d)))
    done = set()
    for i in range(q):
        if i in done:
            continue
        j = opp[i]
        w = lat.w[i]
        cu = _dot(c[i], u)
        if i == j:  # the rest population: only the even part
            body.append(f"eq = {_num(w)} * rho * (T(1.0) - T(1.5) * usq)")
            src_term = f" + ap * {_num(w)} * (-T(3.0) * uF)" if forcing else ""
            body.append(f"g[{i}, {idx}] = p{i} - omp * (p{i} - eq){src_term}")
            done.add(i)
            continue
        body += [
            f"cu = {cu}",
            f"eqp = {_num(w)} * rho * (T(1.0) + T(4.5) * cu * cu - T(1.5) * usq)",
            f"eqm = {_num(w)} * rho * T(3.0) * cu",
            f"fp = T(0.5) * (p{i} + p{j})",
            f"fm = T(0.5) * (p{i} - p{j})",
            "rp = omp * (fp - eqp)",
            "rm = omm * (fm - eqm)",
        ]
        if forcing:
            cf = _dot(c[i], [f"F{a}" for a in range(d)])
            body += [
                f"cF = {cf}",
                f"sp = ap * {_num(w)} * (T(9.0) * cu * cF - T(3.0) * uF)",
                f"sm = am * {_num(w)} * T(3.0) * cF",
                f"g[{i}, {idx}] = p{i} - rp - rm + sp + sm",
                f"g[{j}, {idx}] = p{j} - rp + rm + sp - sm",
            ]
        else:
            body += [f"g[{i}, {idx}] = p{i} - rp - rm", f"g[{j}, {idx}] = p{j} - rp + rm"]
        done.update((i, j))
    out += [ind + line for line in body]
    return [indent + out[0]] + out[1:]


def kernel_source(
    lattice: Lattice, collision: str, forcing: bool, dtype: Any, target: str, walls: bool = True
) -> str:
    """Python source of the fused stream-and-collide kernel ``stream_collide``.

    Signature: ``(f, g, flags, lo0, hi0, lo1, hi1[, lo2, hi2], omega_plus, omega_minus,
    F..., U...)``
    updating the cells of the box ``[lo, hi)`` of the ghosted local arrays ``f`` (in) and ``g``
    (out), both ``(q, *ghost_shape)``. For BGK, ``omega_minus`` must equal ``omega_plus``.
    ``walls=False`` gives the branch-free variant for boxes whose cells and neighbours are all
    fluid (the compiler can then vectorise the innermost loop).
    """
    if collision not in ("bgk", "trt"):
        raise ValueError(f"collision={collision!r}: expected 'bgk' or 'trt'")
    if target not in ("cpu", "gpu"):
        raise ValueError(f"target={target!r}")
    d = lattice.d
    tname = "float32" if np.dtype(dtype) == np.float32 else "float64"
    bounds = ", ".join(f"lo{a}, hi{a}" for a in range(d))
    forces = ", ".join(f"F{a}_" for a in range(d))
    walls = ", ".join(f"U{a}_" for a in range(d))
    lines = [
        f'"""Generated: {lattice.name} {collision.upper()} forcing={forcing} walls={walls} '
        f'{tname} {target}."""',
        "import numpy as np",
        "from numba import cuda, njit, prange"
        if target == "gpu"
        else "from numba import njit, prange",
        f"T = np.{tname}",
        "",
    ]
    header = f"def stream_collide(f, g, flags, {bounds}, omega_p, omega_m, {forces}, {walls}):"
    prelude = [
        "omp = T(omega_p)",
        "omm = T(omega_m)",
        "ap = T(1.0) - T(0.5) * omp",
        "am = T(1.0) - T(0.5) * omm",
    ]
    prelude += [f"F{a} = T(F{a}_)" for a in range(d)] + [f"U{a} = T(U{a}_)" for a in range(d)]
    if target == "cpu":
        lines += ["@njit(parallel=True, cache=True, nogil=True, error_model='numpy')", header]
        # Unsigned indices: numba then emits no negative-index wrap-around, which otherwise
        # keeps LLVM from vectorising the innermost loop.
        lines += ["    " + p for p in prelude] + ["    ONE = np.uint64(1)"]
        lines.append("    for x in prange(np.uint64(lo0), np.uint64(hi0)):")
        indent = "        "
        for a in range(1, d):
            lines.append(f"{indent}for {_AXES[a]} in range(np.uint64(lo{a}), np.uint64(hi{a})):")
            indent += "    "
        lines += _cell_body(lattice, collision, forcing, indent, walls)
    else:
        lines += ["@cuda.jit", header]
        lines += ["    " + p for p in prelude] + ["    ONE = 1"]
        grid = ", ".join(f"t{a}" for a in reversed(range(d)))  # fastest thread index: last axis
        lines.append(f"    {grid} = cuda.grid({d})")
        for a in range(d):
            lines.append(f"    {_AXES[a]} = lo{a} + t{a}")
        cond = " or ".join(f"{_AXES[a]} >= hi{a}" for a in range(d))
        lines += [f"    if {cond}:", "        return"]
        lines += _cell_body(lattice, collision, forcing, "    ", walls)
    return "\n".join(lines) + "\n"


def _cache_dir() -> Path:
    from hpc.config import settings

    path = Path(settings().cache_dir) / "lbm"
    path.mkdir(parents=True, exist_ok=True)
    return path


_loaded: dict[str, Any] = {}


def load_kernel(
    lattice: Lattice, collision: str, forcing: bool, dtype: Any, target: str, walls: bool = True
) -> Any:
    """The compiled kernel (generated, written to the cache folder and imported once)."""
    text = kernel_source(lattice, collision, forcing, dtype, target, walls)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if digest in _loaded:
        return _loaded[digest]
    name = f"lbm_{lattice.name.lower()}_{collision}_{digest}"
    path = _cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: ranks generating at once never see half a file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _loaded[digest] = module.stream_collide
    return module.stream_collide
