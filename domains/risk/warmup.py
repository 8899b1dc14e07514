"""Warm-up tasks of the risk domain (see :mod:`hpc.warmup`): every path kernel on a few blocks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_MODEL = dict(spot=100.0, vol=0.2, rate=0.03, dividend=0.01)
_PATHS = 4096


def _payoffs() -> None:
    from .engine import price
    from .instruments import GBM, AsianArithmetic, AsianGeometric, European

    model = GBM(**_MODEL)
    options = [
        European(strike=100.0, maturity=1.0),
        AsianArithmetic(strike=100.0, maturity=1.0, fixings=12),
        AsianGeometric(strike=100.0, maturity=1.0, fixings=12),
    ]
    for option in options:
        price(model, option, paths=_PATHS)


def _barrier() -> None:
    from .engine import price
    from .instruments import GBM, Barrier

    option = Barrier(strike=100.0, maturity=1.0, barrier=130.0, monitoring=12)
    for greeks in (True, False):  # with the bumped copies, and the price alone
        price(GBM(**_MODEL), option, paths=_PATHS, greeks=greeks)


def _american() -> None:
    from .american import American, american_lsm
    from .instruments import GBM

    american_lsm(GBM(**_MODEL), American(strike=100.0, maturity=1.0, kind="put", exercises=8),
                 paths=_PATHS)


def _basket_and_var() -> None:
    from .basket import Basket, price_basket
    from .instruments import European
    from .var import Market, Position, monte_carlo_var

    market = Market(spots=[100.0, 90.0], vols=[0.2, 0.3], correlation=np.eye(2), rate=0.02)
    price_basket(market, Basket(weights=[0.5, 0.5], strike=95.0, maturity=1.0), paths=_PATHS)
    positions = [Position(0, 10.0), Position(1, -2.0, European(strike=90.0, maturity=0.5))]
    monte_carlo_var(market, positions, scenarios=_PATHS)


def _heston() -> None:
    from .heston import price_heston
    from .instruments import European, Heston

    model = Heston(spot=100.0, v0=0.04, kappa=1.5, theta=0.04, xi=0.5, rho=-0.7, rate=0.03)
    price_heston(model, European(strike=100.0, maturity=0.5), paths=_PATHS)


TASKS: list[tuple[str, Callable[[], object]]] = [
    ("European and Asian path kernels", _payoffs),
    ("barrier path kernel", _barrier),
    ("American (Longstaff-Schwartz)", _american),
    ("basket and Monte Carlo VaR", _basket_and_var),
    ("Heston path kernel", _heston),
]
