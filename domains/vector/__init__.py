"""Vector search: exact and IVF k-nearest-neighbour indexes, sharded over MPI ranks."""

from ._base import FORMAT_VERSION, METRICS, VectorIndex, load_index
from .flat import FlatIndex
from .ivf import IVFFlatIndex, IVFPQIndex
from .kmeans import kmeans
from .sharded import ShardedIndex

__all__ = [
    "FORMAT_VERSION",
    "METRICS",
    "VectorIndex",
    "FlatIndex",
    "IVFFlatIndex",
    "IVFPQIndex",
    "ShardedIndex",
    "kmeans",
    "load_index",
]
