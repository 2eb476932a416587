#!/usr/bin/env bash
# The benchmark's optional RLlib baseline: ray[rllib]'s dependencies + torch (CPU wheel).
# Idempotent.  We install the extra's packages one by one rather than `ray[rllib]`
# because that extra pins gymnasium==1.2.2 and would downgrade the gymnasium 1.4
# the benchmark uses (RLlib 2.60's PPO sampling works with 1.4, checked here).
# torch is pinned: 2.13.0 resolves to the CPU wheel on disk; a bare `torch` pulls
# a multi-GB CUDA build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${SYNDEO_PYTHON:-$ROOT/.venv/bin/python}"

if "$PY" - <<'CHECK' 2>/dev/null; then
import importlib.util as u, sys
mods = ("torch", "tree", "scipy", "pandas", "lz4", "pyarrow", "ormsgpack", "tensorboardX")
sys.exit(0 if all(u.find_spec(m) for m in mods) else 1)
CHECK
  echo "bench.sh: RLlib baseline dependencies present"
else
  "$PY" -m pip install --quiet "torch==2.13.0" dm_tree scipy pandas lz4 "pyarrow>=17" \
    "ormsgpack>=1.7" "tensorboardX>=1.9" fsspec pyyaml requests
fi
"$PY" -c 'import gymnasium, torch, ray.rllib.algorithms.ppo' \
  || { echo "bench.sh: RLlib baseline does not import" >&2; exit 1; }
echo "bench.sh: ok (gymnasium $("$PY" -c 'import gymnasium; print(gymnasium.__version__)'))"
