"""Stream-and-collide kernels generated from the lattice: one description, CPU and GPU.

The fused pull kernel is written out per lattice, collision and precision as Python source with
every direction unrolled (the form a compiler turns into straight-line code), then compiled by
numba: ``njit(parallel=True)`` over the rows of a box on the CPU, or ``numba.cuda.jit`` with one
thread per cell on the GPU. The same generated cell body is used for both.

The source is written to the kernel cache (:func:`hpc.jit.load_source`: ``HPC_CACHE_DIR``,
default ``~/.cache/hpc``) under a name hashed from its text, so numba's on-disk cache applies
and later runs start instantly.

Cell update (pull scheme, two buffers): each population is pulled from the neighbour it streams
from; if that neighbour is a wall (flag 1) the population leaving this cell towards the wall is
reflected instead (half-way bounce-back), plus ``6 w_i c_i . U`` for a moving wall (flag 2, wall
velocity U). Then BGK, TRT or MRT collision with the Guo forcing term, optionally with a
Smagorinsky eddy viscosity (a local relaxation time from the cell's non-equilibrium stress).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from .lattice import Lattice, moment_basis

__all__ = [
    "kernel_source",
    "load_kernel",
    "mrt_rate_names",
    "FLUID",
    "WALL",
    "MOVING_WALL",
    "PATTERNS",
    "COLLISIONS",
]

FLUID, WALL, MOVING_WALL = 0, 1, 2
COLLISIONS = ("bgk", "trt", "mrt")
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


class _Indexed:
    """Array accesses as ``f[i, x, y]``: the GPU form (any array shape)."""

    def __init__(self, d: int) -> None:
        self.d = d

    def _at(self, shift: tuple[int, ...]) -> str:
        return ", ".join(
            _AXES[a] + (" + ONE" if s > 0 else " - ONE" if s < 0 else "")
            for a, s in enumerate(shift)
        )

    def f(self, i: int, shift: tuple[int, ...]) -> str:
        return f"f[{i}, {self._at(shift)}]"

    def g(self, i: int) -> str:
        return f"g[{i}, {self._at((0,) * self.d)}]"

    def flag(self, shift: tuple[int, ...]) -> str:
        return f"flags[{self._at(shift)}]"


class _Flat:
    """Array accesses as ``ff[c + K]`` on flat views, with every offset a compile-time constant.

    The CPU form: with constant offsets all reads of ``f`` form one group of addresses and all
    writes of ``g`` another, so LLVM needs a single overlap check to vectorise the innermost
    loop (with runtime strides it needs one per population pair, and D3Q19 exceeds its limit).
    """

    def __init__(self, ghost_shape: tuple[int, ...]) -> None:
        self.d = len(ghost_shape)
        self.cells = int(np.prod(ghost_shape))
        self.strides = [int(np.prod(ghost_shape[a + 1 :])) for a in range(self.d)]
        self.constants: dict[str, int] = {}

    def _name(self, value: int) -> str:
        name = f"K{value}" if value >= 0 else f"M{-value}"
        self.constants[name] = abs(value)
        return name

    def _index(self, offset: int) -> str:
        if offset == 0:
            return "c"
        return f"c + {self._name(offset)}" if offset > 0 else f"c - {self._name(offset)}"

    def _shift(self, shift: tuple[int, ...]) -> int:
        return sum(s * st for s, st in zip(shift, self.strides, strict=True))

    def f(self, i: int, shift: tuple[int, ...]) -> str:
        return f"ff[{self._index(i * self.cells + self._shift(shift))}]"

    def g(self, i: int) -> str:
        return f"gg[{self._index(i * self.cells)}]"

    def flag(self, shift: tuple[int, ...]) -> str:
        return f"flat_flags[{self._index(self._shift(shift))}]"


def _lin(coeffs: Any, names: list[str]) -> str:
    """``sum_i coeffs[i] * names[i]`` with exact (rational) coefficients, terms of equal
    coefficient summed first (one multiply per distinct value)."""
    by: dict[Fraction, list[str]] = {}
    for k, n in zip(coeffs, names, strict=True):
        k = Fraction(k)
        if k:
            by.setdefault(abs(k), []).append(("+ " if k > 0 else "- ") + n)
    terms = []
    for k in sorted(by):
        group = " ".join(by[k])
        if k == 1:
            terms.append(group)
        else:
            inner = group[2:] if group.startswith("+ ") else "-" + group[2:]
            terms.append(f"+ {_num(float(k))} * ({inner})")
    if not terms:
        return "T(0.0)"
    text = " ".join(terms)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _pairs(d: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(d) for b in range(a, d)]


def _smagorinsky_lines(lat: Lattice, forcing: bool) -> list[str]:
    """Local relaxation rate ``oml`` (and ``apl = 1 - oml / 2``) of the Smagorinsky closure.

    ``Pi_ab = sum_i c_ia c_ib (p_i - feq_i)`` (pre-collision, with Guo's force correction
    ``+ (u_a F_b + u_b F_a) / 2``), then Hou et al. (1996):
    ``tau_eff = (tau + sqrt(tau^2 + 18 sqrt(2) C_s^2 |Pi| / rho)) / 2``, ``|Pi| = sqrt(Pi:Pi)``;
    ``CF`` holds ``18 sqrt(2) C_s^2`` and ``TAU`` the molecular ``tau``.
    """
    d, q = lat.d, lat.q
    c = lat.c.tolist()
    lines = []
    norm = []
    for a, b in _pairs(d):
        mom = _lin([c[i][a] * c[i][b] for i in range(q)], [f"p{i}" for i in range(q)])
        eq = f"rho * (u{a} * u{b}" + (" + T(1.0) / T(3.0))" if a == b else ")")
        fix = f" + T(0.5) * (u{a} * F{b} + u{b} * F{a})" if forcing else ""
        lines.append(f"P{a}{b} = {mom} - {eq}{fix}")
        norm.append(f"P{a}{b} * P{a}{b}" if a == b else f"T(2.0) * P{a}{b} * P{a}{b}")
    lines += [
        "pn = math.sqrt(" + " + ".join(norm) + ")",
        "oml = T(2.0) / (TAU + math.sqrt(TAU * TAU + CF * pn * inv))",
        "apl = T(1.0) - T(0.5) * oml",
    ]
    return lines


def mrt_rate_names(lattice: Lattice) -> list[str]:
    """The MRT kernel's rate arguments: one per non-conserved moment, in basis order."""
    basis = moment_basis(lattice)
    return [f"s{k}" for k, g in enumerate(basis.groups) if g not in ("rho", "j")]


def _mrt_lines(lat: Lattice, forcing: bool, les: bool, store: Any) -> list[str]:
    """MRT collision in raw orthogonal moments with Guo forcing.

    For each non-conserved moment ``k``: ``r_k = s_k (m_k - meq_k) - (1 - s_k / 2) S_k``,
    where ``meq_k`` and ``S_k`` are the moments of the BGK equilibrium and of Guo's source
    (closed-form polynomials in ``rho``, ``u``, ``F`` with exact coefficients); the momentum
    rows take ``r = -F`` (their exact value) and density none. Then
    ``f*_i = p_i - sum_k M_ki r_k / |M_k|^2`` (``M^-1 = M^T diag(1/|M_k|^2)``). With every
    rate equal, this is BGK.
    """
    d, q = lat.d, lat.q
    basis = moment_basis(lat)
    M = basis.matrix.tolist()
    norms = basis.norms.tolist()
    c = lat.c.tolist()
    w = [Fraction(float(v)).limit_denominator(1000) for v in lat.w]
    p = [f"p{i}" for i in range(q)]
    lines = []
    rr = {}
    for k, group in enumerate(basis.groups):
        if group == "rho":
            continue
        if group == "j":
            axis = [sum(M[k][i] * c[i][b] for i in range(q)) != 0 for b in range(d)].index(True)
            if forcing:
                lines.append(f"r{k} = -F{axis} * {_num(1.0 / norms[k])}")
                rr[k] = f"r{k}"
            continue
        row = M[k]
        # equilibrium moment: rho (a0 + 3 b.u + C:uu)
        a0 = sum(row[i] * w[i] for i in range(q))
        terms = [_num(float(a0))] if a0 else []
        for a in range(d):
            b = 3 * sum(row[i] * w[i] * c[i][a] for i in range(q))
            if b:
                terms.append(f"{_num(float(b))} * u{a}")
        for a, b in _pairs(d):
            k2 = sum(
                row[i] * w[i] * (Fraction(9, 2) * c[i][a] * c[i][b] - Fraction(3, 2) * (a == b))
                for i in range(q)
            )
            k2 = k2 * (1 if a == b else 2)
            if k2:
                terms.append(f"{_num(float(k2))} * u{a} * u{b}")
        meq = f"rho * ({' + '.join(terms)})" if terms else "T(0.0)"
        if les and group == "nu":
            A = f"(oml * {_num(1.0 / norms[k])})"
            B = f"(apl * {_num(1.0 / norms[k])})"
        else:
            A, B = f"A{k}", f"B{k}"
        line = f"r{k} = {A} * ({_lin(row, p)} - {meq})"
        if forcing:
            fterms = []
            for a in range(d):
                b = 3 * sum(row[i] * w[i] * c[i][a] for i in range(q))
                if b:
                    fterms.append(f"{_num(float(b))} * F{a}")
            for a in range(d):
                for b in range(d):
                    g = sum(
                        row[i] * w[i] * (9 * c[i][a] * c[i][b] - 3 * (a == b)) for i in range(q)
                    )
                    if g:
                        fterms.append(f"{_num(float(g))} * u{a} * F{b}")
            if fterms:
                line += f" - {B} * ({' + '.join(fterms)})"
        lines.append(line)
        rr[k] = f"r{k}"
    keys = sorted(rr)
    for i in range(q):
        corr = _lin([M[k][i] for k in keys], [rr[k] for k in keys])
        lines += store(i, f"p{i} - ({corr})")
    return lines


def _bgk_lines(lat: Lattice, forcing: bool, om: str, ap: str, store: Any) -> list[str]:
    """BGK collision as ``f*_i = (1 - omega) p_i + omega f_eq_i (+ Guo's source)``, with the
    factors shared by the populations of equal weight formed once per cell.

    ``omega f_eq_i = W_w (b + 4.5 cu^2) + V_w cu`` where ``W_w = w omega rho``,
    ``V_w = 3 w omega rho`` and ``b = 1 - 1.5 u.u``, ``cu = c_i . u``: about two thirds of
    the operations of relaxing each population to its equilibrium written out (D2Q9: about
    65 against 100), the same operations on every cell. ``om`` and ``ap`` name the rate and
    ``1 - om / 2`` (per cell with the Smagorinsky closure).
    """
    d, q = lat.d, lat.q
    c = [tuple(int(v) for v in row) for row in lat.c.tolist()]
    opp = lat.opposite.tolist()
    u = [f"u{a}" for a in range(d)]
    weights = sorted({float(v) for v in lat.w})
    wname = {w: k for k, w in enumerate(weights)}
    lines = [f"keep = T(1.0) - {om}", "base = T(1.0) - T(1.5) * usq", f"orho = {om} * rho"]
    for w, k in wname.items():
        lines += [f"W{k} = {_num(w)} * orho", f"V{k} = {_num(3.0 * w)} * orho"]
        if forcing:
            lines += [f"S{k} = {ap} * {_num(w)}"]
    done: set[int] = set()
    for i in range(q):
        if i in done:
            continue
        j = opp[i]
        k = wname[float(lat.w[i])]
        if i == j:  # the rest population: only the even part
            src = f" + S{k} * (-T(3.0) * uF)" if forcing else ""
            lines += store(i, f"keep * p{i} + W{k} * base{src}")
            done.add(i)
            continue
        lines += [
            f"cu = {_dot(c[i], u)}",
            f"eqp = W{k} * (base + T(4.5) * cu * cu)",
            f"eqm = V{k} * cu",
        ]
        ends = ("", "")
        if forcing:
            lines += [
                f"cF = {_dot(c[i], [f'F{a}' for a in range(d)])}",
                f"sp = S{k} * (T(9.0) * cu * cF - T(3.0) * uF)",
                f"sm = S{k} * T(3.0) * cF",
            ]
            ends = (" + (sp + sm)", " + (sp - sm)")
        lines += store(i, f"keep * p{i} + (eqp + eqm){ends[0]}")
        lines += store(j, f"keep * p{j} + (eqp - eqm){ends[1]}")
        done.update((i, j))
    return lines


PATTERNS = ("pull", "aa-stream", "aa-local")


def _cell_body(
    lat: Lattice,
    collision: str,
    forcing: bool,
    indent: str,
    walls: bool,
    at: Any,
    pattern: str = "pull",
    les: bool = False,
) -> list[str]:
    """One cell's update as lines of source.

    Patterns (populations stored post-collision, ``f[i, x] = f*_i(x)`` at rest):

    ``pull``
        read ``f[i, x - c_i]``, write ``g[i, x]`` (two buffers).
    ``aa-stream``
        in place, first of an AA pair: read ``f[i, x - c_i]``, write the result for direction
        ``i`` to ``f[opp(i), x + c_i]``, where cell ``x + c_i`` looks for it (a wall cell too).
    ``aa-local``
        in place, second of the pair: read ``f[opp(i), x]`` (or, when ``x - c_i`` is a wall,
        the population this cell sent there, ``f[i, x - c_i]``: bounce-back), write
        ``f[i, x]``: back to the rest layout.

    Every location is read and written by one cell only, so the in-place patterns are safe in
    parallel; the collision arithmetic is the same in all three (bitwise equal results).
    """
    d, q = lat.d, lat.q
    c = [tuple(int(v) for v in row) for row in lat.c.tolist()]
    opp = lat.opposite.tolist()
    here = (0,) * d
    uw = [f"U{a}" for a in range(d)]
    local = pattern == "aa-local"
    out = [f"if {at.flag(here)} == {FLUID}:" if walls else "if True:  # an all-fluid box"]
    ind = indent + "    "
    body = []
    for i in range(q):
        src = tuple(-v for v in c[i])  # pull: from the cell the population streams from
        # where population i arrives from a fluid upstream cell, and where it is found when
        # that cell is a wall (bounce-back of this cell's own opposite population)
        stream = at.f(opp[i], here) if local else at.f(i, src)
        bounced = at.f(i, src) if local else at.f(opp[i], here)
        if not any(c[i]) or not walls:
            body.append(f"p{i} = {stream}")
            continue
        lid = _num(6.0 * lat.w[i])
        body += [
            f"fl = {at.flag(src)}",
            f"if fl == {FLUID}:",
            f"    p{i} = {stream}",
            f"elif fl == {WALL}:",
            f"    p{i} = {bounced}",
            "else:",
            f"    p{i} = {bounced} + {lid} * ({_dot(c[i], uw)})",
        ]

    def store(i: int, value: str) -> list[str]:
        if pattern == "pull":
            return [f"{at.g(i)} = {value}"]
        if local:
            return [f"{at.f(i, here)} = {value}"]
        # Also into wall cells: the local half-step reads a bounced population there.
        return [f"{at.f(opp[i], c[i])} = {value}"]

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
    om, ap = "omp", "ap"
    if les:
        body += _smagorinsky_lines(lat, forcing)
        om, ap = "oml", "apl"
    if collision == "mrt":
        body += _mrt_lines(lat, forcing, les, store)
        out += [ind + line for line in body]
        return [indent + out[0]] + out[1:]
    if collision == "bgk":
        body += _bgk_lines(lat, forcing, om, ap, store)
        out += [ind + line for line in body]
        return [indent + out[0]] + out[1:]
    done = set()
    for i in range(q):
        if i in done:
            continue
        j = opp[i]
        w = lat.w[i]
        cu = _dot(c[i], u)
        if i == j:  # the rest population: only the even part
            body.append(f"eq = {_num(w)} * rho * (T(1.0) - T(1.5) * usq)")
            src_term = f" + {ap} * {_num(w)} * (-T(3.0) * uF)" if forcing else ""
            body += store(i, f"p{i} - {om} * (p{i} - eq){src_term}")
            done.add(i)
            continue
        body += [
            f"cu = {cu}",
            f"eqp = {_num(w)} * rho * (T(1.0) + T(4.5) * cu * cu - T(1.5) * usq)",
            f"eqm = {_num(w)} * rho * T(3.0) * cu",
        ]
        body += [
            f"fp = T(0.5) * (p{i} + p{j})",
            f"fm = T(0.5) * (p{i} - p{j})",
            f"rp = {om} * (fp - eqp)",
            "rm = omm * (fm - eqm)",
        ]
        if forcing:
            cf = _dot(c[i], [f"F{a}" for a in range(d)])
            body += [
                f"cF = {cf}",
                f"sp = {ap} * {_num(w)} * (T(9.0) * cu * cF - T(3.0) * uF)",
                f"sm = am * {_num(w)} * T(3.0) * cF",
            ]
            body += store(i, f"p{i} - rp - rm + sp + sm")
            body += store(j, f"p{j} - rp + rm + sp - sm")
        else:
            body += store(i, f"p{i} - rp - rm")
            body += store(j, f"p{j} - rp + rm")
        done.update((i, j))
    out += [ind + line for line in body]
    return [indent + out[0]] + out[1:]


def kernel_source(
    lattice: Lattice,
    collision: str,
    forcing: bool,
    dtype: Any,
    target: str,
    walls: bool = True,
    ghost_shape: tuple[int, ...] | None = None,
    pattern: str = "pull",
    les: bool = False,
) -> str:
    """Python source of the fused stream-and-collide kernel ``stream_collide``.

    Signature: ``(f, g, flags, lo0, hi0, lo1, hi1[, lo2, hi2], omega_plus, omega_minus,
    F..., U...[, s...][, tau, cfac])``: ``collision="mrt"`` adds one rate per non-conserved
    moment (:func:`mrt_rate_names`; ``omega_plus`` and ``omega_minus`` are then unused), and
    ``les=True`` (Smagorinsky) the molecular ``tau`` and ``cfac = 18 sqrt(2) C_s^2``.
    updating the cells of the box ``[lo, hi)`` of the ghosted local arrays ``f`` (in) and ``g``
    (out), both ``(q, *ghost_shape)``. For BGK, ``omega_minus`` must equal ``omega_plus``.
    ``walls=False`` gives the branch-free variant for boxes whose cells and neighbours are all
    fluid (the compiler can then vectorise the innermost loop). The CPU kernel is specialised to
    ``ghost_shape`` (required there): its strides are constants, and it refuses other shapes.
    ``pattern`` is one of :data:`PATTERNS` (see ``_cell_body``); the in-place ones update ``f``
    and ignore ``g``.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern={pattern!r}: expected one of {PATTERNS}")
    if collision not in COLLISIONS:
        raise ValueError(f"collision={collision!r}: expected one of {COLLISIONS}")
    if target not in ("cpu", "gpu"):
        raise ValueError(f"target={target!r}")
    d = lattice.d
    tname = "float32" if np.dtype(dtype) == np.float32 else "float64"
    bounds = ", ".join(f"lo{a}, hi{a}" for a in range(d))
    forces = ", ".join(f"F{a}_" for a in range(d))
    lids = ", ".join(f"U{a}_" for a in range(d))
    rates = mrt_rate_names(lattice) if collision == "mrt" else []
    extra = [f"{r}_" for r in rates] + (["tau_", "cfac_"] if les else [])
    lines = [
        f'"""Generated: {lattice.name} {collision.upper()} les={les} forcing={forcing} '
        f'walls={walls} {tname} {target} ghost_shape={ghost_shape} pattern={pattern}."""',
        "import math",
        "import numpy as np",
        "from numba import cuda, njit, prange"
        if target == "gpu"
        else "from numba import njit, prange",
        f"T = np.{tname}",
        "",
    ]
    tail = "".join(f", {x}" for x in extra)
    header = (
        f"def stream_collide(f, g, flags, {bounds}, omega_p, omega_m, {forces}, {lids}{tail}):"
    )
    prelude = [
        "omp = T(omega_p)",
        "omm = T(omega_m)",
        "ap = T(1.0) - T(0.5) * omp",
        "am = T(1.0) - T(0.5) * omm",
    ]
    prelude += [f"F{a} = T(F{a}_)" for a in range(d)] + [f"U{a} = T(U{a}_)" for a in range(d)]
    names = []  # the per-kernel constants beyond these
    if rates:
        norms = moment_basis(lattice).norms.tolist()
        k_of = [k for k, g in enumerate(moment_basis(lattice).groups) if g not in ("rho", "j")]
        for k, r in zip(k_of, rates, strict=True):
            prelude += [
                f"A{k} = T({r}_ / {float(norms[k])!r})",
                f"B{k} = T((1.0 - 0.5 * {r}_) / {float(norms[k])!r})",
            ]
            names += [f"A{k}", f"B{k}"]
    if les:
        prelude += ["TAU = T(tau_)", "CF = T(cfac_)"]
        names += ["TAU", "CF"]
    if target == "cpu":
        if ghost_shape is None or len(ghost_shape) != d:
            raise ValueError(f"the CPU kernel needs the {d}-D ghost_shape, got {ghost_shape}")
        at = _Flat(tuple(int(n) for n in ghost_shape))
        body = _cell_body(lattice, collision, forcing, " " * 8, walls, at, pattern, les)
        cells = at.cells
        shape_error = f"stream_collide: arrays must be (q, *{tuple(ghost_shape)})"
        scalars = ", ".join(
            ["omp", "omm", "ap", "am"]
            + [f"F{a}" for a in range(d)]
            + [f"U{a}" for a in range(d)]
            + names
        )
        # One row (the innermost axis) per call: its values die with the call, so LLVM sees a
        # loop without live-out values and vectorises it.
        if not walls:  # the row's remainder (see below)
            tail_body = _cell_body(lattice, collision, forcing, " " * 12, walls, at, pattern, les)
        consts = [f"    {k} = np.uint64({v})" for k, v in sorted(at.constants.items())]
        # No fastmath, not even contraction into fused multiply-adds (measured 1.15x on D2Q9
        # float64 BGK in cache, 2026-12-07): the numba.cuda kernel run by the CUDA simulator
        # (plain IEEE operations in Python) must give bitwise the CPU kernel's results.
        jit_row = "@njit(cache=True, nogil=True, error_model='numpy')"
        row_args = f"ff, gg, flat_flags, start, stop, {scalars}"
        if walls:  # branchy cells: LLVM keeps the loop scalar, a tail would only add work
            lines += [jit_row, f"def _row({row_args}):", *consts]
            lines += ["    for c in range(np.uint64(start), np.uint64(stop)):"] + body + [""]
        else:
            # LLVM's scalar remainder of the vector loop costs several vector iterations per
            # cell, most of a short row (a 38-cell float32 row: 6 of its 38 cells took about a
            # fifth of the time): the row runs whole vectors, then the rest as one loop of a
            # constant vector's trip count with a guarded body, which LLVM turns into masked
            # vector loads and stores. Same operations per lane, so bitwise the same results.
            lanes = 64 // np.dtype(dtype).itemsize  # one 512-bit vector
            lines += [jit_row, f"def _tail({row_args}):", *consts]
            lines += [
                f"    for k in range(np.uint64({lanes})):",
                "        c = np.uint64(start) + k",
                "        if c < np.uint64(stop):",
                *tail_body,
                "",
            ]
            lines += [jit_row, f"def _row({row_args}):", *consts]
            lines += [
                f"    whole = np.uint64(start) + (np.uint64(stop) - np.uint64(start)) "
                f"// np.uint64({lanes}) * np.uint64({lanes})",
                "    for c in range(np.uint64(start), whole):",
                *body,
                "    if whole < np.uint64(stop):",
                f"        _tail(ff, gg, flat_flags, whole, stop, {scalars})",
                "",
            ]
        lines += ["@njit(parallel=True, cache=True, nogil=True, error_model='numpy')", header]
        lines += [
            f"    if f.size != {lattice.q * cells} or g.size != {lattice.q * cells} "
            f"or flags.size != {cells}:",
            f"        raise ValueError({shape_error!r})",
        ]
        lines += ["    " + p for p in prelude]
        lines += [
            "    ff = f.reshape(f.size)",
            "    gg = g.reshape(g.size)",
            "    flat_flags = flags.reshape(flags.size)",
            "    for x in prange(np.uint64(lo0), np.uint64(hi0)):",
        ]
        indent = "        "
        row = f"x * np.uint64({at.strides[0]})"
        for a in range(1, d - 1):
            lines.append(f"{indent}for {_AXES[a]} in range(np.uint64(lo{a}), np.uint64(hi{a})):")
            indent += "    "
            row += f" + {_AXES[a]} * np.uint64({at.strides[a]})"
        last = d - 1
        lines += [
            f"{indent}_row(ff, gg, flat_flags, {row} + np.uint64(lo{last}), "
            f"{row} + np.uint64(hi{last}), {scalars})"
        ]
    else:
        lines += ["@cuda.jit", header]
        lines += ["    " + p for p in prelude] + ["    ONE = 1"]
        grid = ", ".join(f"t{a}" for a in reversed(range(d)))  # fastest thread index: last axis
        lines.append(f"    {grid} = cuda.grid({d})")
        for a in range(d):
            lines.append(f"    {_AXES[a]} = lo{a} + t{a}")
        cond = " or ".join(f"{_AXES[a]} >= hi{a}" for a in range(d))
        lines += [f"    if {cond}:", "        return"]
        lines += _cell_body(
            lattice, collision, forcing, "    ", walls, _Indexed(d), pattern, les
        )
    return "\n".join(lines) + "\n"


def load_kernel(
    lattice: Lattice,
    collision: str,
    forcing: bool,
    dtype: Any,
    target: str,
    walls: bool = True,
    ghost_shape: tuple[int, ...] | None = None,
    pattern: str = "pull",
    les: bool = False,
) -> Any:
    """The compiled kernel (generated, written once to the kernel cache and imported)."""
    from hpc.jit import load_source

    text = kernel_source(
        lattice, collision, forcing, dtype, target, walls, ghost_shape, pattern, les
    )
    label = f"lbm_{lattice.name.lower()}_{collision}" + ("_les" if les else "")
    return load_source(label, text, ["stream_collide"]).stream_collide
