#!/usr/bin/env bash
# Slurm test cluster prerequisites: slurmctld, slurmd, client tools, munge,
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
  trap 'if [[ -n "$policy_tmp" ]]; then rm -f "$policy_tmp"; fi' EXIT
  export DEBIAN_FRONTEND=noninteractive
  if ! "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}"; then
    "${APT[@]}" update
    "${APT[@]}" install -y --no-install-recommends -t bookworm "${missing[@]}"
  fi
fi

# Jobs are submitted as this user (HPC users are never root); apptainer.sh creates it too.
id syndeo-ci >/dev/null 2>&1 || useradd -m -s /bin/bash syndeo-ci

echo "slurm.sh: $(slurmctld -V) with munge $(munged --version 2>&1 | head -1 | awk '{print $1}')"

# An interpreter the unprivileged user can run for bare-mode (no container) jobs.
# The project venv's interpreter may live under /root (pyenv), which other users
# cannot traverse; a venv from the system Python of the same minor version that
# adds the project venv's site-packages gives them the same packages, no reinstall.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROJECT_PY="${SYNDEO_PYTHON:-$ROOT/.venv/bin/python}"
# Per checkout (inside the git-ignored .venv/), so two checkouts never share one.
CI_VENV="$ROOT/.venv/ci-user"
make_ci_venv() {  # $1 = venv dir
  local venv=$1 site ver sys_py="" cand ci_site
  site=$("$PROJECT_PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  ver=$("$PROJECT_PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  for cand in "/usr/bin/python$ver" "/usr/local/bin/python$ver"; do
    [[ -x "$cand" ]] && { sys_py=$cand; break; }
  done
  if [[ -z "$sys_py" ]]; then
    echo "slurm.sh: no system python$ver for the unprivileged test user's venv" >&2
    return 1
  fi
  if [[ "$(readlink -f "$venv/bin/python" 2>/dev/null)" != "$(readlink -f "$sys_py")" ]]; then
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$sys_py" -m venv --without-pip "$venv"
  fi
  ci_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  # An `import` line in a .pth runs at startup; addsitedir also processes that dir's .pth
  # files (the editable install of syndeo is one).
  echo "import site; site.addsitedir('$site')" >"$ci_site/syndeo-project.pth"
  chmod -R a+rX "$venv"
  runuser -u syndeo-ci -- "$venv/bin/python" -c 'import ray, syndeo' \
    || { echo "slurm.sh: $venv cannot import ray/syndeo as syndeo-ci" >&2; return 1; }
}

if [[ -x "$PROJECT_PY" ]]; then
  # Tests launch as the CI user only with this checkout's venv (a machine-wide one
  # would run whichever checkout set it up last).
  make_ci_venv "$CI_VENV"
fi
