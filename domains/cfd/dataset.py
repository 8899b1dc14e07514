"""A result file of ``hpc cfd`` as an :class:`xarray.Dataset` (besides its XDMF sidecar).

The fields (``rho``, ``ux``, ``uy`` (``uz``), ``solid``) become variables on the cell-centre
coordinates ``x``, ``y`` (``z``) in lattice units (cell ``i`` at ``i + 1/2``); a force history
(table ``forces``) becomes variables on the dimension ``sample`` with ``step`` as its
coordinate; the file's attributes become the dataset's.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["open_dataset"]

_FIELDS = ("rho", "ux", "uy", "uz", "solid")


def open_dataset(path: str | os.PathLike[str]) -> Any:
    """Local. Read an ``hpc cfd`` result into an ``xarray.Dataset`` (in memory).

    Parameters
    ----------
    path : str or path
        A file written by ``hpc cfd ... --out``.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    hpc.io.errors.MissingDataError
        When the file holds no velocity field.
    """
    import h5py
    import xarray as xr
    from hpc.io import read_table
    from hpc.io.errors import MissingDataError

    from hpc.comm import self_comm

    with h5py.File(path, "r") as f:
        if "ux" not in f:
            raise MissingDataError("not an hpc cfd result: no velocity field", str(path), "ux")
        fields = {name: f[name][...] for name in _FIELDS if name in f}
        attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in f.attrs.items()}
        has_forces = "forces" in f
    dims = ("x", "y", "z")[: fields["ux"].ndim]
    coords: dict[str, Any] = {
        d: np.arange(n) + 0.5 for d, n in zip(dims, fields["ux"].shape, strict=True)
    }
    data: dict[str, Any] = {name: (dims, values) for name, values in fields.items()}
    if has_forces:
        table = read_table(path, "forces", comm=self_comm())  # one reader, all the rows
        coords["step"] = ("sample", np.asarray(table.pop("step")))
        data.update({name: ("sample", np.asarray(col)) for name, col in table.items()})
    return xr.Dataset(data, coords=coords, attrs=attrs)
