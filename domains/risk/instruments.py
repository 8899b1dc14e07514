"""Models and instruments, validated on construction (each error names the field and value)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "GBM", "Heston", "European", "AsianArithmetic", "AsianGeometric", "Barrier", "Lookback",
    "BGK_BETA",
]  # fmt: skip

BGK_BETA = 0.5825971579390106  # -zeta(1/2) / sqrt(2 pi): Broadie-Glasserman-Kou


def _number(name: str, value: object) -> float:
    """``value`` as a float, or a ValueError naming the field (a bool is not a number)."""
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: expected a number, got a bool")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}={value!r}: expected a number, got {type(value).__name__}"
        ) from None


def _positive(name: str, value: float, allow_zero: bool = False) -> float:
    v = _number(name, value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={value!r}: must be finite and {bound}")
    return v


def _finite(name: str, value: float) -> float:
    v = _number(name, value)
    if not math.isfinite(v):
        raise ValueError(f"{name}={value!r}: must be finite")
    return v


def _whole(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``, or a ValueError naming the field."""
    v = _number(name, value)
    if not math.isfinite(v) or v != int(v) or v < minimum:
        raise ValueError(f"{name}={value!r}: must be a whole number >= {minimum}")
    return int(v)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy's bool
        raise ValueError(f"{name}={value!r}: expected true or false")
    return bool(value)


def _kind(value: str) -> str:
    if not isinstance(value, str) or value not in ("call", "put"):
        raise ValueError(f"kind={value!r}: expected 'call' or 'put'")
    return value


@dataclass(frozen=True)
class GBM:
    """Geometric Brownian motion under the risk-neutral measure:
    ``dS = (r - q) S dt + sigma S dW``.

    Attributes
    ----------
    spot, vol : float
        ``S(0) > 0`` and ``sigma >= 0``.
    rate, dividend : float
        Continuously compounded ``r`` and dividend yield ``q``.
    """

    spot: float
    vol: float
    rate: float = 0.0
    dividend: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "spot", _positive("spot", self.spot))
        object.__setattr__(self, "vol", _positive("vol", self.vol, allow_zero=True))
        object.__setattr__(self, "rate", _finite("rate", self.rate))
        object.__setattr__(self, "dividend", _finite("dividend", self.dividend))


@dataclass(frozen=True)
class _Option:
    strike: float
    maturity: float
    kind: str = "call"

    def __post_init__(self) -> None:
        object.__setattr__(self, "strike", _positive("strike", self.strike))
        object.__setattr__(self, "maturity", _positive("maturity", self.maturity))
        _kind(self.kind)

    @property
    def steps(self) -> int:
        return 1


@dataclass(frozen=True)
class European(_Option):
    """European call or put on ``S(T)``."""


@dataclass(frozen=True)
class _Asian(_Option):
    fixings: int = 12

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "fixings", _whole("fixings", self.fixings))

    @property
    def steps(self) -> int:
        return self.fixings


@dataclass(frozen=True)
class AsianArithmetic(_Asian):
    """Call or put on the arithmetic mean of ``S`` at ``fixings`` equally spaced dates
    ``T/n, 2T/n, ..., T``."""


@dataclass(frozen=True)
class AsianGeometric(_Asian):
    """Call or put on the geometric mean of ``S`` at ``fixings`` equally spaced dates."""


@dataclass(frozen=True)
class Barrier(_Option):
    """Knock-in or knock-out European call or put, monitored at ``monitoring`` equally spaced
    dates ``T/n .. T``.

    ``continuity_correction=True`` prices the continuously monitored contract instead: the
    simulated barrier is moved towards the spot by ``exp(-beta sigma sqrt(T/n))`` (Broadie,
    Glasserman and Kou, 1997; ``beta = 0.5826``).
    """

    barrier: float = 120.0
    direction: str = "up"
    knock: str = "out"
    monitoring: int = 252
    continuity_correction: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "barrier", _positive("barrier", self.barrier))
        if not isinstance(self.direction, str) or self.direction not in ("up", "down"):
            raise ValueError(f"direction={self.direction!r}: expected 'up' or 'down'")
        if not isinstance(self.knock, str) or self.knock not in ("in", "out"):
            raise ValueError(f"knock={self.knock!r}: expected 'in' or 'out'")
        object.__setattr__(self, "monitoring", _whole("monitoring", self.monitoring))
        object.__setattr__(
            self,
            "continuity_correction",
            _flag("continuity_correction", self.continuity_correction),
        )

    @property
    def steps(self) -> int:
        return self.monitoring

    def simulated_barrier(self, vol: float) -> float:
        """The barrier the discrete simulation uses (shifted under the correction)."""
        if not self.continuity_correction:
            return self.barrier
        shift = BGK_BETA * vol * (self.maturity / self.monitoring) ** 0.5
        return self.barrier * math.exp(-shift if self.direction == "up" else shift)


@dataclass(frozen=True)
class Lookback:
    """Discretely monitored lookback call or put, the extremum taken over ``S(0)`` and the
    ``monitoring`` equally spaced dates ``T/n, 2T/n, .., T`` (``S(T)`` among them).

    Floating strike (``strike=None``): call ``S(T) - min S``, put ``max S - S(T)``. Fixed
    strike ``K``: call ``max(max S - K, 0)``, put ``max(K - min S, 0)``. The continuously
    monitored contract is the limit of many dates; the discrete extremum differs from the
    continuous one by a factor of about ``exp(-+beta sigma sqrt(T/n))`` (Broadie,
    Glasserman and Kou; :data:`BGK_BETA`).
    """

    maturity: float
    kind: str = "call"
    strike: float | None = None
    monitoring: int = 252

    def __post_init__(self) -> None:
        object.__setattr__(self, "maturity", _positive("maturity", self.maturity))
        _kind(self.kind)
        if self.strike is not None:
            object.__setattr__(self, "strike", _positive("strike", self.strike))
        object.__setattr__(self, "monitoring", _whole("monitoring", self.monitoring))

    @property
    def floating(self) -> bool:
        """True for a floating strike (no ``strike`` given)."""
        return self.strike is None

    @property
    def steps(self) -> int:
        return self.monitoring


@dataclass(frozen=True)
class Heston:
    """Heston stochastic volatility under the risk-neutral measure:
    ``dS = (r - q) S dt + sqrt(v) S dW_s``, ``dv = kappa (theta - v) dt + xi sqrt(v) dW_v``,
    ``d<W_s, W_v> = rho dt``. Simulated by full-truncation Euler (Lord, Koekkoek and van Dijk,
    2010) on ``steps_per_year`` steps."""

    spot: float
    v0: float
    kappa: float
    theta: float
    xi: float
    rho: float
    rate: float = 0.0
    dividend: float = 0.0
    steps_per_year: int = 250

    def __post_init__(self) -> None:
        object.__setattr__(self, "spot", _positive("spot", self.spot))
        for name in ("v0", "kappa", "theta", "xi"):
            object.__setattr__(self, name, _positive(name, getattr(self, name), allow_zero=True))
        rho = _finite("rho", self.rho)
        if not -1.0 <= rho <= 1.0:
            raise ValueError(f"rho={self.rho!r}: must lie in [-1, 1]")
        object.__setattr__(self, "rate", _finite("rate", self.rate))
        object.__setattr__(self, "dividend", _finite("dividend", self.dividend))
        object.__setattr__(self, "steps_per_year", _whole("steps_per_year", self.steps_per_year))
