"""Monte Carlo risk: option pricing under geometric Brownian motion, correlated GBM and Heston
through one entry point (:func:`price`), reproducible on any number of ranks (counter-based
random streams, fixed blocks, exact reduction)."""

from __future__ import annotations

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "GBM": ".instruments",
        "Basket": ".basket",
        "price_basket": ".basket",
        "Heston": ".instruments",
        "price_heston": ".heston",
        "American": ".american",
        "american_lsm": ".american",
        "European": ".instruments",
        "AsianArithmetic": ".instruments",
        "AsianGeometric": ".instruments",
        "Barrier": ".instruments",
        "Lookback": ".instruments",
        "PriceResult": ".engine",
        "price": ".engine",
        "black_scholes": ".analytic",
        "geometric_asian": ".analytic",
        "Market": ".var",
        "Position": ".var",
        "RiskResult": ".var",
        "monte_carlo_var": ".var",
        "historical_var": ".var",
    },
)
