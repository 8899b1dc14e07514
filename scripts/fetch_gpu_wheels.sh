#!/usr/bin/env bash
# Wheels the GPU machine's image lacks for the SQL checks (it has pyarrow and pandas, no
# internet): sqlglot, duckdb and tpchgen-cli for CPython 3.12 on x86-64 Linux, into .whl/
# (ignored by git; name it in the device run's carry). scripts/gpu_check.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
PY=${PY:-.venv/bin/python}
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat+=(--platform "$p")
done
for pkg in "sqlglot==$($PY -c 'import sqlglot; print(sqlglot.__version__)')" \
           "duckdb==$($PY -c 'import duckdb; print(duckdb.__version__)')" tpchgen-cli; do
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" -d .whl "$pkg"
done
ls -l .whl
