"""Portfolio risk: value at risk and expected shortfall by Monte Carlo on correlated risk
factors with full revaluation, and by historical simulation from a returns table in HDF5.

Conventions: P&L is the change in portfolio value over the horizon (positive = gain). With
``n`` scenarios and tail probability ``a = 1 - level``, ``k = ceil(n a)``: VaR is minus the
``k``-th smallest P&L and ES is minus the mean of the ``k`` smallest (the FRTB choices are
``level=0.99`` for VaR and ``0.975`` for ES).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy import special

from hpc.dispatch import DeviceTable
from hpc.rng import RandomStreams
from hpc.run import map_blocks

from .instruments import European, _finite, _positive, _whole

SPECIAL = DeviceTable("risk.var")
"""The special functions of each device: ``SPECIAL.on(backend).erfc(backend, x)`` (SciPy's
on the CPU; on the GPU a numba.cuda kernel of libdevice's ``erfc``, one thread per value,
on the backend's arrays)."""


@SPECIAL.cpu("erfc")
def _erfc_cpu(backend: Any, x: Any) -> Any:
    return special.erfc(x)


def _erfc_threads(out, x):  # type: ignore[no-untyped-def]
    """GPU: ``out[i] = erfc(x[i])``, one thread per value (a template of hpc.jit)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.erfc(x[i])


cuda: Any = None  # placeholder: the generated kernel module imports numba's


@SPECIAL.gpu("erfc")
def _erfc_gpu(backend: Any, x: Any) -> Any:
    from hpc.jit import specialise

    kernel = specialise("risk_erfc", [_erfc_threads], target="cuda")._erfc_threads
    flat = backend.xp.ascontiguousarray(x).ravel()
    out = backend.xp.empty_like(flat)
    if flat.size:
        backend.launch(kernel, (flat.size,), out, flat)
    return out.reshape(x.shape)


def _floats(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array, or a ValueError naming the field."""
    if value is None or isinstance(value, str | bytes | dict):
        raise ValueError(f"{name}={value!r}: expected numbers")
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected numbers") from None
    if out.dtype.kind == "b" or np.asarray(value).dtype.kind == "b":
        raise ValueError(f"{name}={value!r}: expected numbers, got bools")
    return out


__all__ = ["Market", "Position", "RiskResult", "monte_carlo_var", "historical_var", "tail_risk"]


@dataclass(frozen=True)
class Market:
    """Correlated geometric Brownian motions: ``spots``, ``vols`` and ``dividends`` per asset,
    one ``rate``, and the ``correlation`` matrix of their Brownian motions (symmetric, unit
    diagonal, positive semi-definite; checked)."""

    spots: Any
    vols: Any
    correlation: Any
    rate: float = 0.0
    dividends: Any = None

    def __post_init__(self) -> None:
        spots = _floats("spots", self.spots).ravel()
        vols = _floats("vols", self.vols).ravel()
        d = len(spots)
        if d == 0:
            raise ValueError("spots: need at least one asset")
        divs = np.zeros(d) if self.dividends is None else _floats("dividends", self.dividends)
        divs = divs.ravel()
        for name, v in (("spots", spots), ("vols", vols), ("dividends", divs)):
            if len(v) != d:
                raise ValueError(f"{name}: {len(v)} values for {d} assets")
            if not np.isfinite(v).all():
                raise ValueError(f"{name}: must be finite, got {v.tolist()}")
        if (spots <= 0).any():
            raise ValueError(f"spots: must be > 0, got {spots.tolist()}")
        if (vols < 0).any():
            raise ValueError(f"vols: must be >= 0, got {vols.tolist()}")
        corr = _floats("correlation", self.correlation)
        if corr.shape != (d, d):
            raise ValueError(f"correlation: shape {corr.shape}, expected ({d}, {d})")
        if not np.isfinite(corr).all() or not np.allclose(corr, corr.T, atol=1e-12):
            raise ValueError("correlation: must be finite and symmetric")
        if not np.allclose(np.diag(corr), 1.0, atol=1e-12):
            raise ValueError(f"correlation: diagonal must be 1, got {np.diag(corr).tolist()}")
        low = float(np.linalg.eigvalsh(corr).min())
        if low < -1e-10:
            raise ValueError(
                f"correlation: not positive semi-definite (smallest eigenvalue {low:.3g})"
            )
        object.__setattr__(self, "spots", spots)
        object.__setattr__(self, "vols", vols)
        object.__setattr__(self, "dividends", divs)
        object.__setattr__(self, "correlation", corr)
        object.__setattr__(self, "rate", _finite("rate", self.rate))

    @property
    def loading(self) -> np.ndarray:
        """``L`` with ``L L^T = correlation`` (eigen-factorisation: also for singular PSD)."""
        w, v = np.linalg.eigh(self.correlation)
        return v * np.sqrt(np.clip(w, 0.0, None))


@dataclass(frozen=True)
class Position:
    """``quantity`` units of asset ``asset`` (``option=None``) or of a European option on it."""

    asset: int
    quantity: float
    option: European | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "asset", _whole("asset", self.asset, minimum=0))
        object.__setattr__(self, "quantity", _finite("quantity", self.quantity))
        if self.option is not None and not isinstance(self.option, European):
            raise ValueError(f"option: expected a European option, got {self.option!r}")


@dataclass(frozen=True)
class RiskResult:
    """VaR and ES at their levels, the horizon and the scenario count."""

    var: float
    es: float
    var_level: float
    es_level: float
    horizon: float
    scenarios: int
    value: float


def _bs_value(
    spot: Any, option: European, tau: float, rate: float, div: float, vol: float,
    xp: Any = np, erfc: Any = special.erfc,
) -> Any:  # fmt: skip
    """Black-Scholes-Merton values for an array of spots, ``tau`` years before expiry
    (``xp``, ``erfc``: the array module of ``spot`` and the complementary error function
    on its arrays)."""
    k = option.strike
    if tau <= 0.0 or vol == 0.0:
        fwd = spot * math.exp((rate - div) * max(tau, 0.0))
        intrinsic = xp.maximum(fwd - k, 0.0) if option.kind == "call" else xp.maximum(k - fwd, 0.0)
        return math.exp(-rate * max(tau, 0.0)) * intrinsic
    s = vol * math.sqrt(tau)
    d1 = (xp.log(spot / k) + (rate - div + 0.5 * vol * vol) * tau) / s
    d2 = d1 - s
    cdf = lambda x: 0.5 * erfc(-x / math.sqrt(2.0))  # noqa: E731
    df, qf = math.exp(-rate * tau), math.exp(-div * tau)
    if option.kind == "call":
        return spot * qf * cdf(d1) - k * df * cdf(d2)
    return k * df * cdf(-d2) - spot * qf * cdf(-d1)


def _revalue(
    market: Market, positions: list[Position], spots: Any, elapsed: float, xp: Any = np,
    erfc: Any = special.erfc,
) -> Any:  # fmt: skip
    """Portfolio value for scenario spots ``(n, d)`` after ``elapsed`` years (an array of
    ``xp``, as ``spots``)."""
    total = xp.zeros(spots.shape[0])
    for pos in positions:
        s = spots[:, pos.asset]
        if pos.option is None:
            total += pos.quantity * s
        else:
            tau = pos.option.maturity - elapsed
            total += pos.quantity * _bs_value(
                s,
                pos.option,
                tau,
                market.rate,
                market.dividends[pos.asset],
                market.vols[pos.asset],
                xp,
                erfc,
            )
    return total


def tail_risk(
    pnl: np.ndarray, var_level: float = 0.99, es_level: float = 0.975
) -> tuple[float, float]:
    """``(VaR, ES)`` of a P&L sample (module conventions)."""
    pnl = np.sort(np.asarray(pnl, dtype=np.float64))
    if len(pnl) == 0:
        raise ValueError("no scenarios")
    return _from_tail(pnl, *_tail_counts(len(pnl), var_level, es_level))


def _tail_counts(n: int, var_level: float, es_level: float) -> tuple[int, int]:
    """``(k_VaR, k_ES)``: how many of the ``n`` smallest P&Ls each measure looks at."""
    kv = max(1, math.ceil(n * (1 - var_level) - 1e-9))
    ke = max(1, math.ceil(n * (1 - es_level) - 1e-9))
    return kv, ke


def _from_tail(tail: np.ndarray, kv: int, ke: int) -> tuple[float, float]:
    """``(VaR, ES)`` from the sorted smallest P&Ls (at least ``max(kv, ke)`` of them)."""
    return float(-tail[kv - 1]), float(-tail[:ke].mean())


def _check(
    market: Market, positions: list[Position], horizon: float, var_level: float, es_level: float
) -> None:
    _positive("horizon", horizon)
    for name, level in (("var_level", var_level), ("es_level", es_level)):
        if not 0.5 < level < 1:
            raise ValueError(f"{name}={level}: must lie in (0.5, 1)")
    if not positions:
        raise ValueError("positions: empty portfolio")
    for i, pos in enumerate(positions):
        if not 0 <= pos.asset < len(market.spots):
            raise ValueError(
                f"positions[{i}].asset={pos.asset}: the market has {len(market.spots)} assets"
            )
        _finite(f"positions[{i}].quantity", pos.quantity)


def monte_carlo_var(
    market: Market,
    positions: list[Position],
    horizon: float = 10 / 250,
    scenarios: int = 1_000_000,
    seed: int = 0,
    var_level: float = 0.99,
    es_level: float = 0.975,
    executor: str = "local",
    batch: int | None = None,
    comm: Any = None,
    scheduler: Any = None,
    backend: Any = None,
) -> RiskResult:
    """VaR and ES over ``horizon`` years: correlated GBM scenarios of the spots, every position
    revalued in closed form (collective for ``executor="mpi"``).

    ``backend`` (as in :func:`.engine.price`: ``"cpu"``, ``"gpu"``, a
    :class:`hpc.backend.Backend`; default ``HPC_BACKEND``) is where the scenario blocks
    run: the same array code on the backend's module (NumPy or CuPy), the normals drawn on
    the device (:meth:`hpc.rng.RandomStreams.normals`), the normal CDF's ``erfc`` from
    :data:`SPECIAL`; only each block's tail comes back to the host. The GPU's VaR equals the
    CPU's to rounding (CuPy's exp/log and libdevice's erfc against NumPy's and SciPy's),
    each bitwise reproducible on its own.

    Scenario ``i`` uses the normals of index ``i`` of ``RandomStreams(seed)``. Scenarios run in
    fixed blocks over the executor's workers (``"local"``, ``"mpi"``, ``"dask"``, as
    :func:`hpc.run.map_blocks`); each block returns only its ``k`` smallest P&Ls (``k`` the
    larger tail count), which hold the global ``k`` smallest, so memory and traffic are a
    few tails, not all scenarios, and the result is bitwise the same on any executor, rank
    count or batch size.
    """
    _check(market, positions, horizon, var_level, es_level)
    n = int(scenarios)
    if n < 1:
        raise ValueError(f"scenarios={scenarios}: need at least 1")
    kv, ke = _tail_counts(n, var_level, es_level)
    k = max(kv, ke)
    block = min(n, max(1 << 16, 4 * k))
    nblocks = math.ceil(n / block)
    from hpc.backend import get_backend

    be = get_backend(backend)
    now = float(_revalue(market, positions, market.spots[None, :], 0.0)[0])
    fn = partial(
        _block_tails,
        backend=be,
        n=n,
        block=block,
        k=k,
        market=market,
        positions=positions,
        horizon=horizon,
        seed=seed,
        now=now,
    )
    rows = map_blocks(fn, nblocks, k, executor, batch, comm, scheduler)
    var, es = _from_tail(np.sort(np.asarray(rows).ravel())[:k], kv, ke)
    return RiskResult(var, es, var_level, es_level, horizon, n, now)


def _block_tails(
    first: int,
    count: int,
    n: int,
    block: int,
    k: int,
    market: Market,
    positions: list[Position],
    horizon: float,
    seed: int,
    now: float,
    backend: Any = None,
) -> np.ndarray:
    """Rows of the ``k`` smallest P&Ls of scenario blocks ``first .. first + count - 1``,
    sorted, padded with ``+inf`` where a block holds fewer than ``k`` (host rows; the
    scenarios live on ``backend``'s device)."""
    from hpc.backend import get_backend, to_host

    be = get_backend(backend)
    xp, erfc = be.xp, partial(SPECIAL.on(be).erfc, be)
    rows = np.full((count, k), np.inf)
    spots0, vols = xp.asarray(market.spots), xp.asarray(market.vols)
    drift = xp.asarray((market.rate - market.dividends - 0.5 * market.vols**2) * horizon)
    loading = xp.asarray(market.loading.T)
    streams = RandomStreams(seed)
    for r in range(count):
        lo = (first + r) * block
        hi = min(n, lo + block)
        z = streams.normals(lo, hi - lo, len(market.spots), backend=be) @ loading
        spots = spots0 * xp.exp(drift + vols * math.sqrt(horizon) * z)
        pnl = _revalue(market, positions, spots, horizon, xp, erfc) - now
        m = min(k, len(pnl))
        rows[r, :m] = to_host(xp.sort(xp.partition(pnl, m - 1)[:m]))
    return rows


def historical_var(
    market: Market,
    positions: list[Position],
    returns: Any,
    horizon: float = 1 / 250,
    var_level: float = 0.99,
    es_level: float = 0.975,
) -> RiskResult:
    """VaR and ES from historical log returns ``(n, d)`` (one row per day, one column per
    asset; e.g. ``np.column_stack`` of an hpc.io table's columns): each row shocks today's
    spots, positions are revalued ``horizon`` years later.

    No ``backend``: the sample is the history (thousands of days, one vectorised pass on the
    host), too small for a device to pay for the transfer.
    """
    _check(market, positions, horizon, var_level, es_level)
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] != len(market.spots):
        raise ValueError(f"returns: shape {r.shape}, expected (days, {len(market.spots)})")
    if not np.isfinite(r).all():
        bad = np.argwhere(~np.isfinite(r))[0]
        raise ValueError(f"returns: non-finite value at row {bad[0]}, column {bad[1]}")
    spots = market.spots * np.exp(r)
    now = float(_revalue(market, positions, market.spots[None, :], 0.0)[0])
    pnl = _revalue(market, positions, spots, horizon) - now
    var, es = tail_risk(pnl, var_level, es_level)
    return RiskResult(var, es, var_level, es_level, horizon, len(r), now)
