"""Models and instruments, validated on construction (each error names the field and value)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GBM", "European", "AsianArithmetic", "AsianGeometric"]


def _positive(name: str, value: float, allow_zero: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={value!r}: must be finite and {bound}")
    return v


def _finite(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}={value!r}: must be finite")
    return v


def _kind(value: str) -> str:
    if value not in ("call", "put"):
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
        if int(self.fixings) != self.fixings or self.fixings < 1:
            raise ValueError(f"fixings={self.fixings!r}: must be a whole number >= 1")
        object.__setattr__(self, "fixings", int(self.fixings))

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
