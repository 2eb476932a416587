#!/usr/bin/env bash
# Slurm test cluster prerequisites (issue 5): slurmctld, slurmd, client tools, munge,
# and the unprivileged user `syndeo-ci` that submits jobs in tests.  Idempotent.
#
# Always `-t bookworm`: another setup script may add Debian sid for apptainer, and an
# unpinned install would then pull sid's Slurm, which does not match bookworm's libs.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "slurm.sh: must run as root (installs packages, creates a user)" >&2
  exit 1
fi

PKGS=(slurmctld slurmd slurm-client munge iproute2 util-linux)
APT=(apt-get -o DPkg::Lock::Timeout=600)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  # No init system here: keep postinst scripts from starting daemons (we start our own).
  policy_tmp=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy_tmp=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy_tmp"
    chmod 0755 "$policy_tmp"
  fi
  trap '[[ -n "$policy_tmp" ]] && rm -f "$policy_tmp"' EXIT
  export DEBIAN_FRONTEND=noninteractive
  if ! "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}"; then
    "${APT[@]}" update
    "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}"
  fi
fi

# Jobs are submitted as this user (HPC users are never root); apptainer.sh creates it too.
id syndeo-ci >/dev/null 2>&1 || useradd -m -s /bin/bash syndeo-ci

echo "slurm.sh: $(slurmctld -V) with munge $(munged --version 2>&1 | head -1 | awk '{print $1}')"
