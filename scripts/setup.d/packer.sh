#!/usr/bin/env bash
# Packer from Debian bookworm (1.6.6: the only version obtainable here; its bundled
# amazon-ebs, googlecompute and azure-arm builders let `packer validate` run offline).
set -euo pipefail
if ! command -v packer >/dev/null; then
  apt-get -o DPkg::Lock::Timeout=600 update
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends \
    install -t bookworm packer
fi
export CHECKPOINT_DISABLE=1
packer version
