"""Run under mpirun: Monte Carlo prices and VaR/ES on this rank count, several batch sizes,
are bitwise the single-process results."""

from __future__ import annotations

import sys

from hpc.domains.risk import (
    GBM,
    American,
    AsianArithmetic,
    Barrier,
    Basket,
    European,
    Heston,
    Lookback,
    Market,
    Position,
    american_lsm,
    price,
    price_basket,
    price_heston,
)
from hpc.domains.risk.var import monte_carlo_var

from hpc.comm import world

CORR = [[1.0, 0.6, 0.3], [0.6, 1.0, 0.4], [0.3, 0.4, 1.0]]


def _same_on_mpi(fn, model, option, paths, seed, batches, **kw) -> int:  # type: ignore[no-untyped-def]
    """Assert ``fn`` gives the local executor's result bitwise on MPI for every batch size;
    the number of checks."""
    ref = fn(model, option, paths=paths, seed=seed, executor="local", **kw)
    for batch in batches:
        got = fn(model, option, paths=paths, seed=seed, executor="mpi", batch=batch, **kw)
        assert (got.price, got.stderr, got.paths) == (ref.price, ref.stderr, ref.paths), (
            option, batch, got, ref)
    return len(batches)


def main() -> int:
    comm = world()
    model = GBM(spot=100.0, vol=0.25, rate=0.03, dividend=0.01)
    checked = 0
    for option in (European(95.0, 0.5, "put"), AsianArithmetic(100.0, 1.0, "call", 12)):
        checked += _same_on_mpi(price, model, option, 100_000, 11, (None, 1, 3, 7), block=1024)
    # every model and the American: the wrappers and the one entry point, any batch
    heston = Heston(spot=100.0, v0=0.05, kappa=1.2, theta=0.04, xi=0.4, rho=-0.6, rate=0.02)
    basket = Market([100.0, 50.0, 80.0], [0.2, 0.35, 0.25], CORR, rate=0.02)
    cases = [
        (price_heston, heston, European(100.0, 0.25, "call"), 20_000),
        (price, heston, AsianArithmetic(100.0, 0.25, "put", 4), 20_000),
        (price_basket, basket, Basket([0.3, 0.5, 0.2], 80.0, 1.0, "put"), 50_000),
        (price, model, Barrier(100.0, 0.5, "call", 115.0, "up", "out", 16), 50_000),
        (price, model, Lookback(0.5, "put", monitoring=12), 20_000),
        (price, heston, Lookback(0.5, "call", strike=100.0, monitoring=8), 20_000),
        (american_lsm, model, American(100.0, 1.0, "put", 8), 20_000),
    ]
    for fn, m, option, paths in cases:
        checked += _same_on_mpi(fn, m, option, paths, 5, (None, 1, 3))
    market = basket
    book = [Position(0, 10.0), Position(1, -5.0, European(55.0, 0.5, "call")), Position(2, 3.0)]
    kw = dict(horizon=10 / 250, scenarios=300_001, seed=3)
    ref = monte_carlo_var(market, book, **kw, executor="local")
    for batch in (None, 2):
        got = monte_carlo_var(market, book, **kw, executor="mpi", batch=batch)
        assert (got.var, got.es) == (ref.var, ref.es), (batch, got, ref)
        checked += 1
    if comm.rank == 0:
        print(f"risk: {checked} prices on {comm.size} ranks bitwise equal to one process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
