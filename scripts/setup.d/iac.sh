#!/usr/bin/env bash
# Static checks of the Terraform modules: checkov in its own venv (.venv-iac), because
# checkov's bundled `hcl2` module (bc-python-hcl2) clashes with python-hcl2 in .venv.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECKOV_VERSION=3.3.30
PYTHON=${PYTHON:-python3}
VENV=.venv-iac
installed=$("$VENV/bin/python" -m pip show checkov 2>/dev/null || true)
if [ -x "$VENV/bin/checkov" ] && grep -qx "Version: $CHECKOV_VERSION" <<<"$installed"; then
  echo "[iac] checkov $CHECKOV_VERSION present in $VENV"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
"$VENV/bin/python" -m pip install -q "checkov==$CHECKOV_VERSION" 2>&1 | grep -v '^WARNING: Location' || true
CKV_SKIP_PACKAGE_UPDATE_CHECK=true BC_SKIP_MAPPING=TRUE "$VENV/bin/checkov" --version
