"""Monte Carlo risk: option pricing under geometric Brownian motion, reproducible on any
number of ranks (counter-based random streams, fixed blocks, exact reduction)."""

from .american import American, american_lsm
from .analytic import black_scholes, geometric_asian
from .basket import Basket, price_basket
from .engine import PriceResult, price
from .heston import price_heston
from .instruments import GBM, AsianArithmetic, AsianGeometric, Barrier, European, Heston
from .var import Market, Position, RiskResult, historical_var, monte_carlo_var

__all__ = [
    "GBM",
    "Basket",
    "price_basket",
    "Heston",
    "price_heston",
    "American",
    "american_lsm",
    "European",
    "AsianArithmetic",
    "AsianGeometric",
    "Barrier",
    "PriceResult",
    "price",
    "black_scholes",
    "geometric_asian",
    "Market",
    "Position",
    "RiskResult",
    "monte_carlo_var",
    "historical_var",
]
