"""Under NUMBA_ENABLE_CUDASIM=1: the numba.cuda alignment kernel gives the CPU scores."""

from __future__ import annotations

import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run under the CUDA simulator"

from hpc.domains.align import Scoring, score_pairs  # noqa: E402
from hpc.domains.align.batch import encode_all  # noqa: E402
from hpc.domains.align.cuda_kernels import score_pairs_gpu  # noqa: E402


def main() -> int:
    rng = np.random.default_rng()
    cases = [
        (Scoring("BLOSUM62", 11, 1), "ARNDCQEGHILKMFPSTWYV"),
        (Scoring("DNA", 2, 5, convention="first"), "ACGTN"),  # extend > first
    ]
    for scoring, letters in cases:
        qs = ["".join(rng.choice(list(letters), int(rng.integers(1, 12)))) for _ in range(6)]
        ts = ["".join(rng.choice(list(letters), int(rng.integers(1, 14)))) for _ in range(6)]
        qe, te = encode_all(qs, scoring), encode_all(ts, scoring)
        idx = np.arange(len(qs))
        for mode in ("local", "global", "semi-global"):
            cpu = score_pairs(qs, ts, scoring, mode, backend="cpu")
            gpu = score_pairs_gpu(qe, te, idx, idx, scoring, {"local": 0, "global": 1}.get(mode, 2))
            assert np.array_equal(cpu, gpu), (scoring, mode, cpu, gpu)
    print("cudasim: GPU alignment scores equal the CPU scores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
