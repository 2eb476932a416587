#!/usr/bin/env bash
# Apptainer + what an unprivileged user needs to build and run Syndeo's SIF here.
# Idempotent: safe to run again; every step checks before it changes anything.
# Why each step: see shared/notes/apptainer.md (apptainer is only in Debian sid;
# root cannot run it on this VM, so CI builds and runs the image as `syndeo-ci`).
set -euo pipefail

APT=(apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends)
export DEBIAN_FRONTEND=noninteractive
CI_USER=${SYNDEO_CI_USER:-syndeo-ci}

if [[ $(id -u) -ne 0 ]]; then
  echo "apptainer.sh: must run as root (installs packages, creates the test user)" >&2
  exit 1
fi

# 1. Debian sid as an extra source, pinned low so that only `-t sid` installs from it
#    (other scripts' bare `apt-get install X` keep getting bookworm versions).
need_update=0
if [[ ! -f /etc/apt/sources.list.d/syndeo-sid.sources ]]; then
  cat > /etc/apt/sources.list.d/syndeo-sid.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi
if [[ ! -f /etc/apt/preferences.d/syndeo-sid ]]; then
  printf 'Package: *\nPin: release n=sid\nPin-Priority: 100\n' > /etc/apt/preferences.d/syndeo-sid
fi

missing=()
command -v apptainer >/dev/null || missing+=(apptainer)
for pkg in debootstrap squashfuse uidmap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )) || (( need_update )); then
  apt-get -o DPkg::Lock::Timeout=600 update
fi
if [[ " ${missing[*]} " == *" apptainer "* ]]; then
  # apptainer 1.4 needs libc6 >= 2.38: this upgrades libc6 and ~35 base packages from sid.
  "${APT[@]}" install -t sid apptainer
fi
rest=()
for pkg in "${missing[@]}"; do [[ $pkg == apptainer ]] || rest+=("$pkg"); done
if (( ${#rest[@]} )); then
  "${APT[@]}" install -t bookworm "${rest[@]}"
fi

# 2. squashfuse mounts the SIF instead of extracting it on every exec, but apptainer
#    fails hard (no fallback) when /dev/fuse is not world read/write (0600 on this VM).
if [[ -e /dev/fuse && $(stat -c %a /dev/fuse) != 666 ]]; then
  chmod 0666 /dev/fuse
fi

# 3. The unprivileged user that builds (--fakeroot needs subuid/subgid) and runs containers.
if ! id "$CI_USER" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash "$CI_USER"
fi
for f in /etc/subuid /etc/subgid; do
  touch "$f"
  grep -q "^${CI_USER}:" "$f" || echo "${CI_USER}:200000:65536" >> "$f"
done

apptainer --version
echo "apptainer.sh: ok (user ${CI_USER}, /dev/fuse $(stat -c %a /dev/fuse))"
