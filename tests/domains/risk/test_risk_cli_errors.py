"""Bad input to ``hpc risk price`` and ``hpc risk var``: empty, missing, unreadable, malformed
files and fields of the wrong type are one line ``hpc risk <command>: error: <message>`` naming
the file (and field), exit status 2, no traceback, and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

GOOD_MODEL = {"spot": 100, "vol": 0.2, "rate": 0.01}
GOOD_ITEM = {"name": "call", "type": "european", "strike": 100, "maturity": 1.0}
GOOD_MARKET = {"spots": [100, 50], "vols": [0.2, 0.3], "correlation": [[1, 0.3], [0.3, 1]]}
GOOD_POSITION = {"asset": 0, "quantity": 10}


def _portfolio(model=GOOD_MODEL, items=(GOOD_ITEM,)):
    return json.dumps({"model": model, "instruments": list(items)})


def _book(market=GOOD_MARKET, positions=(GOOD_POSITION,)):
    return json.dumps({"market": market, "positions": list(positions)})


def _hpc(*argv):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "hpc", "risk", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def _assert_reported(proc, command, *words):
    prefix = f"hpc risk {command}: error: "
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith(prefix), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


# ------------------------------------------------------- the loaders, in process (fast)

PORTFOLIO_CASES = {
    "empty": ("", "the file is empty"),
    "blank": ("  \n\n", "the file is empty"),
    "truncated": (_portfolio()[:-5], "not valid JSON at line 1"),
    "not an object": ("[1, 2]", "expected an object with 'model' and 'instruments'"),
    "no instruments": (
        json.dumps({"model": GOOD_MODEL, "instruments": []}),
        "'instruments' must be a non-empty list",
    ),
    "model a list": (_portfolio(model=[100, 0.2]), "model: expected an object with fields"),
    "model a number": (_portfolio(model=5), "model: expected an object with fields"),
    "spot a string": (
        _portfolio(model={"spot": "abc", "vol": 0.2}),
        "spot='abc': expected a number",
    ),
    "vol a bool": (_portfolio(model={"spot": 100, "vol": True}), "vol=True: expected a number"),
    "vol null": (_portfolio(model={"spot": 100, "vol": None}), "vol=None: expected a number"),
    "unknown model field": (
        _portfolio(model={"spot": 100, "vol": 0.2, "sigma": 1}),
        "unknown field(s) ['sigma']",
    ),
    "instrument a string": (_portfolio(items=["call"]), "instruments[0]: expected an object"),
    "type a list": (
        _portfolio(items=[{**GOOD_ITEM, "type": ["european"]}]),
        "type=['european']; expected one of",
    ),
    "strike a list": (
        _portfolio(items=[{**GOOD_ITEM, "strike": [100]}]),
        "instruments[0] (call): strike=[100]: expected a number",
    ),
    "kind a number": (_portfolio(items=[{**GOOD_ITEM, "kind": 1}]), "kind=1: expected 'call'"),
    "fixings a string": (
        _portfolio(items=[{"type": "asian", "strike": 100, "maturity": 1, "fixings": "x"}]),
        "fixings='x': expected a number",
    ),
    "fixings a fraction": (
        _portfolio(items=[{"type": "asian", "strike": 100, "maturity": 1, "fixings": 2.5}]),
        "fixings=2.5: must be a whole number >= 1",
    ),
    "monitoring a dict": (
        _portfolio(items=[{"type": "barrier", "strike": 100, "maturity": 1, "monitoring": {}}]),
        "monitoring={}: expected a number",
    ),
    "correction a string": (
        _portfolio(
            items=[
                {
                    "type": "barrier",
                    "strike": 100,
                    "maturity": 1,
                    "continuity_correction": "yes",
                }
            ]
        ),
        "continuity_correction='yes': expected true or false",
    ),
    "exercises a bool": (
        _portfolio(items=[{"type": "american", "strike": 100, "maturity": 1, "exercises": True}]),
        "exercises=True: expected a number",
    ),
    "name a list": (
        _portfolio(items=[{**GOOD_ITEM, "name": ["x"]}]),
        "name=['x']; expected a string",
    ),
    "duplicate names": (_portfolio(items=[GOOD_ITEM, GOOD_ITEM]), "names must be unique"),
    "bad yaml": ("model: [1, 2\n", "not valid YAML"),
}


@pytest.mark.parametrize("case", sorted(PORTFOLIO_CASES))
def test_a_bad_portfolio_file_names_the_file_and_the_field(tmp_path, case):
    from hpc.domains.risk.portfolio import PortfolioError, load_portfolio

    text, words = PORTFOLIO_CASES[case]
    path = tmp_path / ("book.yaml" if case == "bad yaml" else "book.json")
    path.write_text(text)
    with pytest.raises(PortfolioError) as info:
        load_portfolio(path)
    assert str(path) in str(info.value) and words in str(info.value), str(info.value)


BOOK_CASES = {
    "empty": ("", "the file is empty"),
    "no positions": (_book(positions=()), "'positions' must be a non-empty list"),
    "market a list": (_book(market=[1, 2]), "market: expected an object with fields"),
    "spots a string": (_book(market={**GOOD_MARKET, "spots": "abc"}), "spots='abc': expected"),
    "no assets": (
        _book(market={"spots": [], "vols": [], "correlation": []}),
        "spots: need at least one asset",
    ),
    "correlation ragged": (
        _book(market={**GOOD_MARKET, "correlation": [[1, 0.3], [0.3]]}),
        "correlation=",
    ),
    "asset a string": (_book(positions=[{"asset": "x", "quantity": 1}]), "asset='x': expected"),
    "asset a fraction": (
        _book(positions=[{"asset": 0.5, "quantity": 1}]),
        "positions[0]: asset=0.5: must be a whole number >= 0",
    ),
    "asset out of range": (_book(positions=[{"asset": 2, "quantity": 1}]), "the market has 2"),
    "quantity a string": (
        _book(positions=[{"asset": 0, "quantity": "many"}]),
        "positions[0]: quantity='many': expected a number",
    ),
    "option a number": (
        _book(positions=[{"asset": 0, "quantity": 1, "option": 5}]),
        "positions[0].option: expected an object",
    ),
    "position a list": (_book(positions=[[0, 1]]), "positions[0]: expected an object"),
}


@pytest.mark.parametrize("case", sorted(BOOK_CASES))
def test_a_bad_book_file_names_the_file_and_the_field(tmp_path, case):
    from hpc.domains.risk.portfolio import PortfolioError, load_book

    text, words = BOOK_CASES[case]
    path = tmp_path / "book.json"
    path.write_text(text)
    with pytest.raises(PortfolioError) as info:
        load_book(path)
    assert str(path) in str(info.value) and words in str(info.value), str(info.value)


def test_missing_directory_binary_and_unreadable_files(tmp_path, monkeypatch):
    from pathlib import Path

    from hpc.domains.risk.portfolio import PortfolioError, load_book, load_portfolio

    for load in (load_portfolio, load_book):
        with pytest.raises(PortfolioError, match="no such file"):
            load(tmp_path / "nowhere.json")
        with pytest.raises(PortfolioError, match="is a directory, not a file"):
            load(tmp_path)
        binary = tmp_path / "binary.json"
        binary.write_bytes(b"\xff\xfe\x00\x01")
        with pytest.raises(PortfolioError, match="not a UTF-8 text file") as info:
            load(binary)
        assert str(binary) in str(info.value)
    # unreadable: the tests run as root here, so chmod 000 would not stop the read; make the
    # read itself fail as an unreadable file does
    path = tmp_path / "secret.json"
    path.write_text(_portfolio())

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(PortfolioError, match="cannot be read: Permission denied") as info:
        load_portfolio(path)
    assert str(path) in str(info.value)


def test_wrong_types_in_the_python_api_name_the_field():
    from hpc.domains.risk import GBM, Barrier, European, Heston
    from hpc.domains.risk.var import Market, Position

    for make, words in [
        (lambda: GBM(spot="x", vol=0.2), "spot='x'"),
        (lambda: GBM(spot=100, vol=None), "vol=None"),
        (lambda: European(100, [1.0]), "maturity=[1.0]"),
        (lambda: Barrier(100, 1.0, monitoring=float("inf")), "monitoring=inf"),
        (lambda: Barrier(100, 1.0, direction=["up"]), "direction=['up']"),
        (lambda: Heston(100, 0.04, 1, 0.04, 0.3, -0.5, steps_per_year="many"), "steps_per_year"),
        (lambda: Market([100], [True], [[1]]), "vols="),
        (lambda: Position(-1, 1.0), "asset=-1"),
        (lambda: Position(0, 1.0, option="call"), "option"),
    ]:
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
            make()


# ------------------------------------------------------------- the commands, end to end


@pytest.mark.parametrize(
    ("text", "extra", "words"),
    [
        ("", [], ["the file is empty"]),
        ("{not json", [], ["not valid JSON"]),
        (_portfolio(model={"spot": "abc", "vol": 0.2}), [], ["model: spot='abc'"]),
        (_portfolio(model=[1, 2]), [], ["model: expected an object"]),
        (_portfolio(), ["--paths", "nan"], ["--paths nan: expected a whole number >= 2"]),
        (_portfolio(), ["--paths", "inf"], ["--paths inf"]),
        (_portfolio(), ["--paths", "1"], ["--paths 1: expected a whole number >= 2"]),
        (
            _portfolio(items=[{"type": "american", "strike": 100, "maturity": 1}]),
            ["--paths", "5"],
            ["--paths 5: expected a whole number >= 10"],
        ),
    ],
)
def test_hpc_risk_price_reports_bad_input(tmp_path, text, extra, words):
    path = tmp_path / "book.json"
    path.write_text(text)
    out = tmp_path / "out.h5"
    proc = _hpc("price", str(path), "--executor", "local", "--out", str(out), *extra)
    _assert_reported(proc, "price", *words)
    assert not out.exists()


def test_hpc_risk_price_missing_directory_and_unwritable_out(tmp_path):
    _assert_reported(_hpc("price", str(tmp_path / "no.json")), "price", "no such file")
    _assert_reported(_hpc("price", str(tmp_path)), "price", "is a directory, not a file")
    path = tmp_path / "book.json"
    path.write_text(_portfolio())
    out = tmp_path / "missing" / "prices.h5"
    proc = _hpc("price", str(path), "--executor", "local", "--paths", "1e4", "--out", str(out))
    # refused before pricing: nothing printed, nothing written
    _assert_reported(proc, "price", f"--out {out}: no such directory")
    assert proc.stdout == "" and not out.parent.exists()
    proc = _hpc("price", str(path), "--executor", "local", "--out", str(tmp_path))
    _assert_reported(proc, "price", "is a directory")


@pytest.mark.parametrize(
    ("text", "extra", "words"),
    [
        ("", [], ["the file is empty"]),
        (_book(positions=[{"asset": "x", "quantity": 1}]), [], ["positions[0]: asset='x'"]),
        (_book(positions=[{"asset": 0, "quantity": 1, "option": 5}]), [], [".option: expected"]),
        (_book(), ["--scenarios", "nan"], ["--scenarios nan: expected a whole number >= 1"]),
        (_book(), ["--scenarios", "0"], ["--scenarios 0"]),
        (_book(), ["--horizon-days", "-1"], ["--horizon-days -1: must be > 0"]),
        (_book(), ["--var-level", "2"], ["--var-level 2: must lie in (0.5, 1)"]),
        (_book(), ["--method", "historical"], ["--method historical needs --returns"]),
    ],
)
def test_hpc_risk_var_reports_bad_input(tmp_path, text, extra, words):
    path = tmp_path / "book.json"
    path.write_text(text)
    _assert_reported(_hpc("var", str(path), *extra), "var", *words)


def test_hpc_risk_var_reports_bad_returns_tables(tmp_path):
    from hpc.io import write_table

    path = tmp_path / "book.json"
    path.write_text(_book())
    historical = ["var", str(path), "--method", "historical", "--returns"]
    _assert_reported(_hpc(*historical, f"{tmp_path / 'no.h5'}:daily"), "var", "no.h5")
    _assert_reported(_hpc(*historical, f"{path}:daily"), "var", "book.json")  # not HDF5
    good = {"a": np.zeros(10), "b": np.zeros(10)}
    write_table(tmp_path / "r.h5", "daily", good)
    write_table(tmp_path / "r.h5", "three", {**good, "c": np.zeros(10)})
    write_table(tmp_path / "r.h5", "text", {"a": np.zeros(10), "b": np.array(["x"] * 10)})
    returns = str(tmp_path / "r.h5")
    _assert_reported(_hpc(*historical, f"{returns}:three"), "var", "returns: shape (10, 3)")
    _assert_reported(_hpc(*historical, f"{returns}:text"), "var", "column 'b' is not numeric")
    _assert_reported(_hpc(*historical, f"{returns}:nosuch"), "var", "nosuch")
