#!/bin/sh
# Runs inside %post of both definitions: installs the pinned Python environment from
# the staged build context (/opt/syndeo-build) without touching the network.
set -eu
CTX=/opt/syndeo-build

# An extra CA bundle (TLS-intercepting proxy, corporate CA) is trusted system-wide, so
# the storage SDKs inside the container can reach object stores behind that proxy.
if [ -s "$CTX/extra-ca.crt" ]; then
  cp "$CTX/extra-ca.crt" /usr/local/share/ca-certificates/syndeo-extra.crt
  update-ca-certificates
fi

python3 -m venv /opt/syndeo
# No index, no cache, no user or host pip config: the wheelhouse is the only source,
# so the build works air-gapped and behind a proxy alike.
export PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A lock with hashes (what `python -m syndeo.image lock` writes) is installed in pip's
# hash-checking mode: every wheel must be the file the lock names.  syndeo's own wheel,
# built from this checkout just now, has no hash in the lock: it goes in afterwards,
# without dependencies (the lock already installed every one of them).
if grep -q -- '--hash=sha256:' "$CTX/requirements.lock"; then
  /opt/syndeo/bin/pip install --no-index --find-links "$CTX/wheelhouse" --require-hashes \
    -r "$CTX/requirements.lock"
  /opt/syndeo/bin/pip install --no-index --find-links "$CTX/wheelhouse" --no-deps \
    "syndeo==$(cat "$CTX/syndeo-version")"
else
  /opt/syndeo/bin/pip install --no-index --find-links "$CTX/wheelhouse" \
    -r "$CTX/requirements.lock" "syndeo==$(cat "$CTX/syndeo-version")"
fi

# Lean: no build context, no apt lists, no docs.  __pycache__ stays on purpose: the SIF
# is read-only, so without it every Python (and every Ray worker) recompiles on start.
rm -rf "$CTX" /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \
  /root/.cache
/opt/syndeo/bin/python -c "import ray, gymnasium, mujoco, numpy, syndeo"
