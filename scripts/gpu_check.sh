#!/usr/bin/env bash
# GPU checks for a lent GPU machine (its image has CuPy, numba-cuda, mpi4py and h5py; no
# internet). Installs the project without dependencies, runs the tests marked `gpu`, the halo
# exchange of CuPy arrays on 1 rank and (if the MPI allows) 2 ranks, and the GPU halo benchmark.
# Writes a short table to $OUT/gpu_check.txt when OUT is set. Meant to finish in under 8 minutes.
# `scripts/gpu_check.sh sql` (or core, cfd, mc, align, vector) runs only those parts; the SQL part
# needs the wheels of scripts/fetch_gpu_wheels.sh in .whl/ (carry it).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.txt"
export PYTHONUNBUFFERED=1 HPC_TEST_DEVICE=gpu HPC_BACKEND=gpu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=${PY:-python3}
status=0
step() { echo "== $*" | tee -a "$LOG"; }
PARTS=${*:-core cfd mc align vector sql}
want() { [[ " $PARTS " == *" $1 "* ]]; }

step "install"
$PY -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3 | tee -a "$LOG"
$PY -m pip install -q pytest pytest-timeout hypothesis 2>/dev/null || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
$PY -m hpc info 2>&1 | tee -a "$LOG"

if want core; then
step "tests marked gpu (1 rank)"
timeout 300 $PY -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -15 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

step "halo exchange of CuPy arrays on 2 ranks (staged, then CUDA-aware if supported)"
for aware in 0 1; do
  HPC_CUDA_AWARE_MPI=$aware timeout 180 $PY -m hpc.launcher -n 2 tests/core/check_halo_gpu.py \
    2>&1 | tail -5 | tee -a "$LOG"
done

step "hpc bench halo --json (GPU backend, 1 and 2 ranks)"
timeout 120 $PY -m hpc bench halo --json --backend gpu 2>&1 | tail -1 | tee -a "$LOG"
timeout 180 $PY -m hpc.launcher -n 2 -m hpc bench halo --json --backend gpu 2>&1 | tail -1 \
  | tee -a "$LOG"


fi
if want cfd; then
step "CFD on the GPU: cavity 64^2 Re=100 vs Ghia, and hpc bench lbm"
timeout 240 $PY -m hpc cfd cavity --n 64 --re 100 --backend gpu --check-every 5000 2>&1 | tail -3 \
  | tee -a "$LOG"
timeout 240 $PY -m hpc bench lbm --json --backend gpu --no-lbmpy --size3d 256 2>&1 | tail -1 \
  | tee -a "$LOG"
step "CFD bodies on the GPU: cylinder vs the CPU path (1e-12), bitwise repeatable, MLUPS"
timeout 300 $PY tests/domains/cfd/check_bodies_gpu.py gpu bench 2>&1 | tail -5 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

fi
if want mc; then
step "Monte Carlo on the GPU: hpc bench mc (GPU vs CPU price on the same samples, QuantLib if installed)"
timeout 240 $PY -m hpc bench mc --json --backend gpu --paths 2e7 --european-paths 2e8 \
  --peer-fraction 0.0005 2>&1 | tail -1 | tee -a "$LOG"
fi
if want align; then
step "align: GPU scores vs CPU, and hpc bench align --json --backend gpu"
timeout 60 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_align.py 2>&1 | tail -5 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
timeout 90 $PY -m hpc bench align --json --backend gpu --reps 3 2>&1 | tail -1 | tee -a "$LOG"
fi
if want vector; then
step "vector: hpc bench knn on the GPU (exact + IVF-Flat, 1e6 x 128, 1e4 queries)"
timeout 170 $PY -m hpc bench knn --json --backend gpu --exact-queries 1e4 --cases flat,ivfflat 2>&1 \
  | tail -1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if want sql; then
step "sql: GPU kernels vs CPU, TPC-H on the GPU engine vs DuckDB, hpc bench join and tpch"
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    2>&1 | tail -2 | tee -a "$LOG"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
timeout 120 $PY -m pytest -q -m gpu -p no:cacheprovider tests/domains/sql/test_sql.py \
  tests/domains/sql/test_sql_device.py::test_cudf_round_trip_and_query 2>&1 | tail -5 \
  | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
TPCH=/tmp/tpch-sf1
[ -f $TPCH/lineitem.parquet ] || timeout 90 $PY -m hpc sql tpch-gen --sf 1 --out $TPCH \
  2>&1 | tail -1 | tee -a "$LOG"
timeout 150 $PY tests/domains/sql/check_sql_gpu_engine.py gpu $TPCH 1 3 5 6 10 12 14 19 2>&1 | tail -12 \
  | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
timeout 120 $PY -m hpc bench join --json --backend gpu 2>&1 | tail -1 | tee -a "$LOG"
timeout 200 $PY -m hpc bench tpch --json --backend gpu --resident --data $TPCH --no-polars --reps 3 \
  --queries 1,3,5,6,10,12,14,19 2>&1 | tail -1 | tee -a "$LOG"
fi
exit $status
