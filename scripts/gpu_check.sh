#!/usr/bin/env bash
# GPU checks for a lent GPU machine (its image has CuPy, numba-cuda, mpi4py and h5py; no
# internet). Installs the project without dependencies, runs the tests marked `gpu`, the halo
# exchange of CuPy arrays on 1 rank and (if the MPI allows) 2 ranks, and a quick grid of each GPU
# benchmark (lbm, halo, join, knn, align, mc: 3-4 points each, smallest first, GRID_S seconds a
# benchmark, default 60: the six grids take at most 6 minutes): per point ours, the peer where it runs on this machine (else none) and
# the fraction of the device's peak measured in the same run (benchmarks/device_peak.py: device
# copy bandwidth for lbm, halo, join; sgemm, int32 add/max, fp64 FMA rates for knn, align, mc).
# Writes a short table to $OUT/gpu_check.txt and each grid point's JSON to $OUT/grid_NAME_K.json.
# `scripts/gpu_check.sh sql` (or core, cfd, mc, align, vector) runs only those parts, each with
# its benchmark's grid; `scripts/gpu_check.sh lbm` (or halo, join, knn) runs only that grid. The
# SQL part and the join grid use the wheels of scripts/fetch_gpu_wheels.sh in .whl/ (carry it).
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
GRID_S=${GRID_S:-60}  # seconds each benchmark's grid may take, all its points together

# One summary line per point of a grid: ours, the peer (none when it did not run here) and the
# fraction of the device peak the benchmark measured (argv: bench, point, JSON file, exit code).
read -r -d '' GRID_LINE <<'PYEOF'
import json, sys
name, point, path, rc = sys.argv[1:5]
try:
    with open(path) as fh:
        rec = json.loads(fh.read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    why = "timed out (grid budget)" if rc in ("124", "137") else "failed"
    print(f"grid {name} [{point}]: {why}, exit {rc}")
    sys.exit(0 if rc in ("124", "137") else 1)

def g(x, unit=""):
    return "none" if x is None else f"{x:.4g}{unit}"

def peer(peers, key, field, unit):
    p = peers.get(key) or {}
    return f"{key} {g(p[field], unit)}" if field in p else "none"

rows = []
if name == "lbm":
    for c in rec["cases"]:
        lim = c["limits"]
        rows.append((f"{c['case']} {'x'.join(map(str, c['size']))}",
                     g(c["ours"]["MLUPS"], " MLUPS"), peer(c["peers"], "lbmpy", "MLUPS", " MLUPS"),
                     lim.get("fraction_of_roofline"),
                     f"device copy {g(lim.get('device_copy_GBps'), ' GB/s')}"))
elif name == "halo":
    for c in rec["cases"]:
        lim = c.get("limits", {})
        rows.append((f"{len(c['size'])}-D {'x'.join(map(str, c['size']))} h{c['halo']} "
                     f"{c['method']}", g(c["ours"]["GBps"], " GB/s sent"),
                     peer(c["peers"], "floor", "GBps", " GB/s"), lim.get("bandwidth_fraction"),
                     f"device copy {g(lim.get('device_copy_GBps'), ' GB/s')}"))
elif name == "join":
    lim, s = rec["limits"], rec["size"]
    rows.append((f"probe {s['probe']:.0e} build {s['build']:.0e}",
                 g(rec["ours"]["tuples_per_s"] / 1e6, " Mt/s"),
                 peer({k: {"Mt/s": v["tuples_per_s"] / 1e6} for k, v in rec["peers"].items()
                       if "tuples_per_s" in v}, "duckdb", "Mt/s", " Mt/s"),
                 lim.get("bandwidth_fraction"),
                 f"device copy {g(lim.get('device_copy_GBps'), ' GB/s')}"))
elif name == "knn":
    c, s = rec["cases"][0], rec["size"]
    lim = c.get("limits", {})
    rows.append((f"exact n {s['n']:.0e} d {s['dim']} nq {s['exact_queries']:.0e}",
                 f"{g(c['ours']['qps'], ' qps')} {g(c['ours']['GFLOPs'], ' GFLOP/s')}",
                 peer(c["peers"], "faiss", "qps", " qps"), lim.get("fraction_of_gemm"),
                 f"sgemm {g(lim.get('gemm_GFLOPs'), ' GFLOP/s')}"))
elif name == "align":
    for c in rec["cases"]:
        lim = c.get("limits", {})
        allc = [k for k in c["peers"] if k.endswith("_allcores")]
        rows.append((f"{c['case']} {c['cells']:.2g} cells", g(c["ours"]["GCUPS"], " GCUPS"),
                     peer(c["peers"], allc[0], "GCUPS", " GCUPS") if allc else "none",
                     lim.get("fraction_of_int32"),
                     f"int32 {g(lim.get('device_int32_ops_per_s', 0) / 1e9, ' Gop/s')}"))
elif name == "mc":
    for c in rec["cases"]:
        lim = c.get("limits", {})
        rows.append((f"{c['case']} {c['ours']['paths']:.2g} paths",
                     g(c["ours"]["path_steps_per_s"], " path-steps/s"),
                     peer(c["peers"], "quantlib", "path_steps_per_s", " path-steps/s"),
                     lim.get("fraction_of_fp64"),
                     f"fp64 FMA {g(lim.get('device_fp64_GFLOPs'), ' GFLOP/s')}"))
for label, ours, theirs, frac, peak in rows:
    print(f"grid {name} {label}: ours {ours}, peer {theirs}, fraction of peak {g(frac)}"
          f" ({peak})")
PYEOF

# grid NAME POINT...: `hpc bench NAME --json --backend gpu POINT` for each point in turn, all
# of them within GRID_S seconds (a point is cut off when they are spent, later ones skipped)
grid() {
  local name=$1 k=0 left rc
  shift
  local end=$((SECONDS + GRID_S))
  step "grid: hpc bench $name --backend gpu, $# points, at most $GRID_S s"
  for point in "$@"; do
    k=$((k + 1))
    left=$((end - SECONDS))
    if [ "$left" -lt 10 ]; then
      echo "grid $name [$point]: skipped, the grid's $GRID_S s are spent" | tee -a "$LOG"
      continue
    fi
    # shellcheck disable=SC2086  # a point is a list of options
    timeout "$left" $PY -m hpc bench "$name" --json --backend gpu $point \
      >"$OUT/grid_${name}_$k.log" 2>&1
    rc=$?
    tail -1 "$OUT/grid_${name}_$k.log" >"$OUT/grid_${name}_$k.json"
    $PY -c "$GRID_LINE" "$name" "$point" "$OUT/grid_${name}_$k.json" "$rc" 2>&1 | tee -a "$LOG"
    if [ "${PIPESTATUS[0]}" != 0 ]; then
      status=1
      tail -5 "$OUT/grid_${name}_$k.log" | tee -a "$LOG"
    fi
  done
}

# the wheels of scripts/fetch_gpu_wheels.sh (DuckDB, sqlglot, tpchgen) when carried, once
wheels() {
  [ -d .whl ] && [ -z "${WHEELS_DONE:-}" ] || return 0
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    2>&1 | tail -2 | tee -a "$LOG"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  WHEELS_DONE=1
}

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

step "hpc bench halo --json (GPU backend, 2 ranks)"
timeout 180 $PY -m hpc.launcher -n 2 -m hpc bench halo --json --backend gpu 2>&1 | tail -1 \
  | tee -a "$LOG"

fi
if want core || want halo; then
grid halo "--methods p2p --reps 50 --size2d 4096 --size3d 256 --halo 1" \
  "--methods p2p --reps 50 --size2d 16384 --size3d 512 --halo 1" \
  "--methods p2p --reps 50 --size2d 16384 --size3d 512 --halo 3" \
  "--methods p2p --reps 30 --size2d 32768 --size3d 768 --halo 2"
fi
if want cfd; then
step "CFD on the GPU: cavity 64^2 Re=100 vs Ghia"
timeout 240 $PY -m hpc cfd cavity --n 64 --re 100 --backend gpu --check-every 5000 2>&1 | tail -3 \
  | tee -a "$LOG"
step "CFD bodies on the GPU: cylinder vs the CPU path (1e-12), bitwise repeatable, MLUPS"
timeout 300 $PY tests/domains/cfd/check_bodies_gpu.py gpu bench 2>&1 | tail -5 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

fi
if want cfd || want lbm; then
grid lbm "--no-lbmpy --steps 50 --reps 3 --size2d 1024 --size3d 128" \
  "--no-lbmpy --steps 50 --reps 3 --size2d 2048 --size3d 192" \
  "--no-lbmpy --steps 50 --reps 3 --size2d 4096 --size3d 256" \
  "--no-lbmpy --steps 20 --reps 3 --size2d 8192 --size3d 384"
fi
if want mc; then
# GPU vs CPU price on the same samples in every point (the CPU pass is untimed), QuantLib if
# installed; the Asian with 252 fixings, then the European
grid mc "--repeat 3 --peer-fraction 0.0005 --paths 1e6 --european-paths 1e7" \
  "--repeat 3 --peer-fraction 0.0005 --paths 4e6 --european-paths 4e7" \
  "--repeat 3 --peer-fraction 0.0005 --paths 1.6e7 --european-paths 1.6e8"
fi
if want align; then
step "align: GPU scores vs CPU"
timeout 60 $PY -m pytest -q -m gpu -p no:cacheprovider tests/domains/align/test_align.py 2>&1 \
  | tail -5 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
grid align "--reps 3 --queries 100 --targets 100 --reads 2000" \
  "--reps 3 --queries 300 --targets 300 --reads 6000" \
  "--reps 3 --queries 600 --targets 600 --reads 20000"
fi
if want vector || want knn; then
# the exact case (GEMM + top-k), the one with a FLOP count; IVF-Flat runs in the gpu tests
# (the base set is made on the host: about 6 s per 1e6 x 128 on one core)
grid knn "--cases flat --queries 1e4 --exact-queries 1e4 --n 1e5" \
  "--cases flat --queries 1e4 --exact-queries 1e4 --n 1e6" \
  "--cases flat --queries 1e4 --exact-queries 1e4 --n 5e5 --dim 384" \
  "--cases flat --queries 1e4 --exact-queries 1e4 --n 3e6"
fi
if want sql; then
step "sql: GPU kernels vs CPU, TPC-H on the GPU engine vs DuckDB, hpc bench tpch"
wheels
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
timeout 200 $PY -m hpc bench tpch --json --backend gpu --resident --data $TPCH --no-polars --reps 3 \
  --queries 1,3,5,6,10,12,14,19 2>&1 | tail -1 | tee -a "$LOG"
fi
if want sql || want join; then
wheels  # DuckDB, the peer (ours alone without it)
grid join "--no-polars --reps 3 --probe 1e6 --build 1e5" \
  "--no-polars --reps 3 --probe 2e7 --build 2e6" \
  "--no-polars --reps 3 --probe 1e8 --build 1e7" \
  "--no-polars --reps 3 --probe 2e8 --build 2e7"
fi
exit $status
