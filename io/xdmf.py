"""XDMF sidecars: let ParaView and VisIt open array datasets of our HDF5 files directly."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import h5py

from .atomic import atomic_open

__all__ = ["write_xdmf"]

_TYPES = {"f": "Float", "i": "Int", "u": "UInt"}


def _xml_vector(values: Sequence[float]) -> str:
    text = " ".join(str(float(v)) for v in values)
    return f'<DataItem Dimensions="{len(values)}" Format="XML">{text}</DataItem>'


def write_xdmf(
    h5_path: str | os.PathLike[str],
    datasets: Sequence[str],
    spacing: Sequence[float] | None = None,
    origin: Sequence[float] | None = None,
    xdmf_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Local (call on one rank). Write an XDMF file describing ``datasets`` on a uniform grid.

    All datasets must share one 2-D or 3-D shape; they become cell-centred attributes of a
    ``CoRectMesh`` with the given spacing and origin (defaults 1 and 0). The XDMF file refers to
    the HDF5 file by its name relative to the XDMF file's folder.

    Returns
    -------
    Path
        The XDMF file (default: the HDF5 path with suffix ``.xmf``).
    """
    h5_path = Path(h5_path)
    out = Path(xdmf_path) if xdmf_path is not None else h5_path.with_suffix(".xmf")
    with h5py.File(h5_path, "r") as f:
        shapes = {tuple(f[name].shape) for name in datasets}
        if len(shapes) != 1:
            raise ValueError(f"datasets {list(datasets)} have different shapes {sorted(shapes)}")
        shape = shapes.pop()
        if len(shape) not in (2, 3):
            raise ValueError(f"XDMF grids here are 2-D or 3-D; the datasets are {shape}")
        types = {name: (f[name].dtype.kind, f[name].dtype.itemsize) for name in datasets}
    nd = len(shape)
    spacing = list(spacing or [1.0] * nd)
    origin = list(origin or [0.0] * nd)
    nodes = " ".join(str(n + 1) for n in shape)
    topology = "3DCoRectMesh" if nd == 3 else "2DCoRectMesh"
    geometry = "ORIGIN_DXDYDZ" if nd == 3 else "ORIGIN_DXDY"
    rel = os.path.relpath(h5_path.resolve(), out.resolve().parent)
    attrs = []
    for name in datasets:
        kind, size = types[name]
        dims = " ".join(str(n) for n in shape)
        attrs.append(
            f'      <Attribute Name="{name.strip("/")}" AttributeType="Scalar" Center="Cell">\n'
            f'        <DataItem Dimensions="{dims}" NumberType="{_TYPES.get(kind, "Float")}" '
            f'Precision="{size}" Format="HDF">{rel}:/{name.strip("/")}</DataItem>\n'
            "      </Attribute>"
        )
    text = (
        '<?xml version="1.0" ?>\n<Xdmf Version="3.0">\n  <Domain>\n'
        '    <Grid Name="grid" GridType="Uniform">\n'
        f'      <Topology TopologyType="{topology}" Dimensions="{nodes}"/>\n'
        f'      <Geometry GeometryType="{geometry}">\n'
        f"        {_xml_vector(origin)}\n"
        f"        {_xml_vector(spacing)}\n"
        "      </Geometry>\n" + "\n".join(attrs) + "\n    </Grid>\n  </Domain>\n</Xdmf>\n"
    )
    with atomic_open(out) as fh:
        fh.write(text)
    return out
