"""Physical operators of the SQL engine: columns on each rank, one Exchange operator moving rows."""
