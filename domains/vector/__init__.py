"""Vector search: exact and IVF k-nearest-neighbour indexes, sharded over MPI ranks."""

from __future__ import annotations

from hpc.lazy import lazy_exports

# name -> submodule defining it; imported when the name is first read
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "FORMAT_VERSION": "._base",
        "METRICS": "._base",
        "VectorIndex": "._base",
        "FlatIndex": ".flat",
        "IVFFlatIndex": ".ivf",
        "IVFPQIndex": ".ivf",
        "ShardedIndex": ".sharded",
        "kmeans": ".kmeans",
        "load_index": "._base",
    },
)
