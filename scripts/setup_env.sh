#!/usr/bin/env bash
# Build the project's environment in .venv: system MPI and parallel HDF5, mpi4py built against
# that MPI, h5py built against that HDF5, then the project itself (editable) with its test extras.
# Idempotent: a second run reuses what already works and rebuilds nothing.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-test,bench,dask,notebooks,sql}
log() { printf '[setup] %s\n' "$*"; }

# 1. MPI and parallel HDF5: use what the site provides (modules, MPICC, HDF5_DIR), else Debian's.
need_pkgs=()
command -v "${MPICC:-mpicc}" >/dev/null 2>&1 || need_pkgs+=(openmpi-bin libopenmpi-dev)
if [ -z "${HDF5_DIR:-}" ] && ! pkg-config --exists hdf5-openmpi 2>/dev/null \
    && ! pkg-config --exists hdf5-mpich 2>/dev/null; then
  need_pkgs+=(libhdf5-openmpi-dev)
fi
command -v pkg-config >/dev/null 2>&1 || need_pkgs+=(pkg-config)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need_pkgs[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      "${need_pkgs[@]}" libhdf5-openmpi-dev pkg-config openmpi-bin libopenmpi-dev >/dev/null
  else
    echo "[setup] error: missing ${need_pkgs[*]}; load your site's MPI and parallel HDF5 modules" \
         "(or set MPICC and HDF5_DIR), or run as root on Debian/Ubuntu to install them." >&2
    exit 1
  fi
fi
export MPICC=${MPICC:-mpicc}

# NCBI BLAST+ is the reference the alignment statistics are tested against: installed where we
# may (root with apt-get), otherwise those tests are skipped.
if ! command -v blastp >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing ncbi-blast+ with apt-get (the reference for alignment statistics)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ncbi-blast+ >/dev/null; } \
    || log "warning: ncbi-blast+ could not be installed; the BLAST comparison tests will skip"
fi

# 2. The virtual environment and the build tools h5py's parallel build needs.
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
# numba is installed here so that numpy is settled before h5py compiles against it.
"$PY" -m pip install -q "setuptools>=77" wheel "cython>=3" pkgconfig numpy numba

# 3. mpi4py against the system MPI (never a bundled MPI wheel).
if ! "$PY" - <<'PY' 2>/dev/null
import mpi4py, sys
cfg = mpi4py.get_config()
sys.exit(0 if cfg.get("mpicc") else 1)
PY
then
  log "building mpi4py against $(command -v "$MPICC") (a few minutes)"
  "$PY" -m pip install -q --no-cache-dir --no-binary=mpi4py --no-build-isolation "mpi4py>=3.1"
fi

# 4. h5py against parallel HDF5.
if ! "$PY" -c 'import h5py, sys; sys.exit(0 if h5py.get_config().mpi else 1)' 2>/dev/null; then
  log "building h5py against parallel HDF5 (a few minutes)"
  if [ -z "${HDF5_DIR:-}" ]; then
    if pkg-config --exists hdf5-openmpi; then export HDF5_PKGCONFIG_NAME=hdf5-openmpi
    elif pkg-config --exists hdf5-mpich; then export HDF5_PKGCONFIG_NAME=hdf5-mpich; fi
  fi
  CC="$MPICC" HDF5_MPI=ON "$PY" -m pip install -q --no-cache-dir --force-reinstall --no-deps \
    --no-binary=h5py --no-build-isolation "h5py>=3.10"
fi

# 5. The project, editable, with its extras. pip keeps the source builds above (already satisfied).
log "installing the project (editable) with extras [$EXTRAS]"
"$PY" -m pip install -q --no-build-isolation -e ".[$EXTRAS]"

# 6. Bytecode of every installed module, written now: with PYTHONDONTWRITEBYTECODE set (as on
# many CI runners) each process would otherwise compile numpy, numba, scipy ... again (~1.5 s).
"$PY" -m compileall -q -j 0 "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  >/dev/null || true

"$PY" - <<'PY'
import h5py, mpi4py
from mpi4py import MPI
assert h5py.get_config().mpi, "h5py was not built with MPI"
print("[setup] ok:", MPI.Get_library_version().splitlines()[0].strip(),
      "| mpi4py", mpi4py.__version__, "| h5py", h5py.__version__, "(mpi) | HDF5",
      h5py.version.hdf5_version)
PY
