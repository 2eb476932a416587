#!/usr/bin/env bash
# Debian's cloud-init, only for `cloud-init schema --config-file` (offline validation
# of the user-data terraform/modules/node renders).  Idempotent.  No init system
# here, and none of its services may start: policy-rc.d keeps postinst quiet.
set -euo pipefail
if command -v cloud-init >/dev/null 2>&1; then
  echo "cloudinit.sh: $(cloud-init --version 2>&1)"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "cloudinit.sh: must run as root (installs Debian's cloud-init)" >&2
  exit 1
fi
policy_tmp=""
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  policy_tmp=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' >"$policy_tmp"
  chmod 0755 "$policy_tmp"
fi
trap 'if [[ -n "$policy_tmp" ]]; then rm -f "$policy_tmp"; fi' EXIT
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600)
# -t bookworm: sid may be in the sources (apptainer.sh), never take cloud-init from it.
if ! "${APT[@]}" install -y --no-install-recommends -t bookworm cloud-init; then
  "${APT[@]}" update
  "${APT[@]}" install -y --no-install-recommends -t bookworm cloud-init
fi
echo "cloudinit.sh: $(cloud-init --version 2>&1)"
