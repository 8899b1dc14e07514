"""Lazy package exports: a package names its public objects, and imports a submodule only when
one of its names is first read (PEP 562). ``import hpc`` or ``import hpc.domains.sql`` then costs
nothing until used: no MPI initialisation, no numba, pyarrow or sqlglot import.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` whose names live in submodules.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : mapping
        Public name -> relative submodule (``".solver"``) defining it under the same name.

    Examples
    --------
    >>> __getattr__, __dir__, __all__ = lazy_exports(__name__, {"LBMSolver": ".solver"})
    """
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:  # a submodule not imported yet (``hpc.domains.sql.table``)
            if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)  # later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    # A function exported under its submodule's name (``search`` of ``.search``): importing the
    # submodule sets the package attribute to the module; keep the function there instead.
    shadowed = {name for name, where in table.items() if where == f".{name}"}
    if shadowed:

        class _Package(types.ModuleType):
            def __setattr__(self, name: str, value: Any) -> None:
                if name in shadowed and getattr(value, "__name__", "") == f"{package}.{name}":
                    value = getattr(value, name)
                super().__setattr__(name, value)

        sys.modules[package].__class__ = _Package

    return __getattr__, __dir__, list(table)
