"""Portfolios from JSON or YAML files, validated with errors naming the file and the field.

Layout::

    {"model": {"spot": 100, "vol": 0.2, "rate": 0.03, "dividend": 0.01},
     "instruments": [
        {"name": "atm call", "type": "european", "strike": 100, "maturity": 1.0, "kind": "call"},
        {"name": "asian", "type": "asian", "strike": 100, "maturity": 1.0, "fixings": 252},
        {"name": "uo call", "type": "barrier", "strike": 100, "maturity": 1.0, "barrier": 130,
         "direction": "up", "knock": "out", "monitoring": 252, "continuity_correction": true},
        {"name": "lookback", "type": "lookback", "maturity": 1.0, "kind": "put",
         "monitoring": 252}]}

``type``: european, asian (arithmetic), geometric-asian, barrier, lookback (floating strike
without ``strike``, fixed with it), american (Longstaff-Schwartz, ``exercises`` dates;
computed on every rank); other keys are the instrument's fields
(:mod:`hpc.domains.risk.instruments`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hpc.errors import HPCError

from .american import American
from .instruments import GBM, AsianArithmetic, AsianGeometric, Barrier, European, Lookback

__all__ = ["Portfolio", "load_portfolio", "load_book", "PortfolioError", "TYPES"]

TYPES = {
    "european": European,
    "asian": AsianArithmetic,
    "geometric-asian": AsianGeometric,
    "barrier": Barrier,
    "lookback": Lookback,
    "american": American,
}


class PortfolioError(HPCError, ValueError):
    """A portfolio file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Portfolio:
    model: GBM
    names: list[str]
    instruments: list[Any]


def _read(path: Path) -> Any:
    """The parsed file; a missing, unreadable, non-text or malformed file is a PortfolioError
    naming it."""
    if path.is_dir():
        raise PortfolioError(f"{path}: is a directory, not a file")
    if not path.is_file():
        raise PortfolioError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PortfolioError(f"{path}: not a UTF-8 text file ({exc.reason})") from None
    except OSError as exc:
        raise PortfolioError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if not text.strip():
        raise PortfolioError(f"{path}: the file is empty")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PortfolioError(f"{path}: not valid YAML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PortfolioError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from None


def _build(cls: Any, spec: Any, where: str) -> Any:
    known = {f.name for f in fields(cls)}
    if not isinstance(spec, dict):
        raise PortfolioError(
            f"{where}: expected an object with fields {sorted(known)}, got {type(spec).__name__}"
        )
    if not all(isinstance(key, str) for key in spec):
        raise PortfolioError(f"{where}: field names must be strings, got {sorted(map(str, spec))}")
    unknown = sorted(set(spec) - known)
    if unknown:
        raise PortfolioError(
            f"{where}: unknown field(s) {unknown}; expected some of {sorted(known)}"
        )
    try:
        return cls(**spec)
    except (TypeError, ValueError) as exc:
        raise PortfolioError(f"{where}: {exc}") from None


def load_portfolio(path: str | Path) -> Portfolio:
    """Read and validate a portfolio file (``.json``, ``.yaml`` or ``.yml``)."""
    path = Path(path)
    data = _read(path)
    if not isinstance(data, dict) or "model" not in data or "instruments" not in data:
        raise PortfolioError(f"{path}: expected an object with 'model' and 'instruments'")
    model = _build(GBM, data["model"], f"{path}: model")
    items = data["instruments"]
    if not isinstance(items, list) or not items:
        raise PortfolioError(f"{path}: 'instruments' must be a non-empty list")
    names, instruments = [], []
    for i, raw in enumerate(items):
        where = f"{path}: instruments[{i}]"
        if not isinstance(raw, dict):
            raise PortfolioError(f"{where}: expected an object")
        spec = dict(raw)
        kind = spec.pop("type", None)
        if not isinstance(kind, str) or kind not in TYPES:
            raise PortfolioError(f"{where}: type={kind!r}; expected one of {sorted(TYPES)}")
        name = spec.pop("name", f"{kind}-{i}")
        if not isinstance(name, str | int | float) or isinstance(name, bool):
            raise PortfolioError(f"{where}: name={name!r}; expected a string")
        name = str(name)
        where = f"{where} ({name})"
        names.append(name)
        instruments.append(_build(TYPES[kind], spec, where))
    if len(set(names)) != len(names):
        raise PortfolioError(f"{path}: instrument names must be unique, got {names}")
    return Portfolio(model, names, instruments)


def load_book(path: str | Path) -> tuple[Any, list[Any]]:
    """A risk book for VaR: ``(Market, positions)`` from a JSON or YAML file::

    {"market": {"spots": [100, 50], "vols": [0.2, 0.3], "correlation": [[1, 0.4],
                [0.4, 1]], "rate": 0.02, "dividends": [0.0, 0.01]},
     "positions": [{"asset": 0, "quantity": 10},
                   {"asset": 1, "quantity": -5,
                    "option": {"strike": 50, "maturity": 0.5, "kind": "put"}}]}
    """
    from .var import Market, Position

    path = Path(path)
    data = _read(path)
    if not isinstance(data, dict) or "market" not in data or "positions" not in data:
        raise PortfolioError(f"{path}: expected an object with 'market' and 'positions'")
    market = _build(Market, data["market"], f"{path}: market")
    items = data["positions"]
    if not isinstance(items, list) or not items:
        raise PortfolioError(f"{path}: 'positions' must be a non-empty list")
    positions = []
    for i, raw in enumerate(items):
        where = f"{path}: positions[{i}]"
        if not isinstance(raw, dict):
            raise PortfolioError(f"{where}: expected an object")
        spec = dict(raw)
        option = spec.pop("option", None)
        if option is not None:
            spec["option"] = _build(European, option, f"{where}.option")
        pos = _build(Position, spec, where)
        if not 0 <= int(pos.asset) < len(market.spots):
            raise PortfolioError(
                f"{where}: asset={pos.asset}; the market has {len(market.spots)} assets"
            )
        positions.append(pos)
    return market, positions
