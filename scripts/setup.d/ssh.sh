#!/usr/bin/env bash
# SSH test-bed prerequisites: Debian's openssh-server and openssh-client, and
# the unprivileged user `syndeo-ci` that logs in to the bed's hosts with a key.
# Idempotent: safe to run again; every step checks before it changes anything.
#
# Nothing here starts an sshd: the bed (testbeds/sshhosts.py) runs its own, one
# per network namespace, with its own config.  The system-wide service stays off.
# Always `-t bookworm`: apptainer.sh may have added Debian sid to the sources.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "ssh.sh: must run as root (installs packages, prepares the test user)" >&2
  exit 1
fi

PKGS=(openssh-server openssh-client iproute2 util-linux curl)
APT=(apt-get -o DPkg::Lock::Timeout=600)
CI_USER=${SYNDEO_CI_USER:-syndeo-ci}

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

installed_server=0
if ((${#missing[@]})); then
  [[ " ${missing[*]} " == *" openssh-server "* ]] && installed_server=1
  # No init system here: keep openssh-server's postinst from starting the system sshd.
  policy_tmp=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy_tmp=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy_tmp"
    chmod 0755 "$policy_tmp"
  fi
  trap 'if [[ -n "$policy_tmp" ]]; then rm -f "$policy_tmp"; fi' EXIT
  export DEBIAN_FRONTEND=noninteractive
  # openssh-client is named too: openssh-server needs the exact same version.
  if ! "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}" openssh-client; then
    "${APT[@]}" update
    "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}" openssh-client
  fi
fi

# Where the package was installed by us (a test machine, not one reached over SSH),
# keep its system service off at the next boot too (Debian's ssh.service and init
# script honour this file).  A machine that already had openssh-server is untouched.
if ((installed_server)) && [[ ! -e /etc/ssh/sshd_not_to_be_run ]]; then
  echo "syndeo test bed: the system sshd stays off (scripts/setup.d/ssh.sh)" >/etc/ssh/sshd_not_to_be_run
fi

# The test user (slurm.sh and apptainer.sh create it too; whichever runs first wins).
id "$CI_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$CI_USER"
# useradd leaves the password field "!" (locked).  sshd without PAM refuses every login,
# keys included, to a locked account; "*" means "no password can match" but not locked.
# Key-only login then works and password login stays impossible.
if [[ $(getent shadow "$CI_USER" | cut -d: -f2) == '!'* ]]; then
  usermod -p '*' "$CI_USER"
fi

echo "ssh.sh: $(/usr/sbin/sshd -V 2>&1 | head -1) (user ${CI_USER}; no system sshd started)"
