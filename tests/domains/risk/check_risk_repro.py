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


def main() -> int:
    comm = world()
    model = GBM(spot=100.0, vol=0.25, rate=0.03, dividend=0.01)
    checked = 0
    for option in (European(95.0, 0.5, "put"), AsianArithmetic(100.0, 1.0, "call", 12)):
        ref = price(model, option, paths=100_000, seed=11, block=1024, executor="local")
        for batch in (None, 1, 3, 7):
            got = price(
                model, option, paths=100_000, seed=11, block=1024, executor="mpi", batch=batch
            )
            assert (got.price, got.stderr, got.paths) == (ref.price, ref.stderr, ref.paths), (
                option,
                batch,
                got,
                ref,
            )
            checked += 1
    # every model and the American: the wrappers and the one entry point, any batch
    heston = Heston(spot=100.0, v0=0.05, kappa=1.2, theta=0.04, xi=0.4, rho=-0.6, rate=0.02)
    basket = Market([100.0, 50.0, 80.0], [0.2, 0.35, 0.25], CORR, rate=0.02)
    cases = [
        (price_heston, heston, European(100.0, 0.25, "call"), 20_000),
        (price, heston, AsianArithmetic(100.0, 0.25, "put", 4), 20_000),
        (price_basket, basket, Basket([0.3, 0.5, 0.2], 80.0, 1.0, "put"), 50_000),
        (price, model, Barrier(100.0, 0.5, "call", 115.0, "up", "out", 16), 50_000),
        (american_lsm, model, American(100.0, 1.0, "put", 8), 20_000),
    ]
    for fn, m, option, paths in cases:
        ref = fn(m, option, paths=paths, seed=5, executor="local")
        for batch in (None, 1, 3):
            got = fn(m, option, paths=paths, seed=5, executor="mpi", batch=batch)
            assert (got.price, got.stderr, got.paths) == (ref.price, ref.stderr, ref.paths), (
                option,
                batch,
                got,
                ref,
            )
            checked += 1
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
