"""Vector search: exact and IVF k-nearest-neighbour indexes, sharded over MPI ranks."""
