#!/usr/bin/env bash
# A second unprivileged user, `syndeo-ci2`: the "other user on a shared machine" of
# the scratch-ownership tests (it pre-creates directories and symlinks at the paths
# syndeo-ci's nodes will use).  Idempotent.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "second-user.sh: needs root (useradd)" >&2
  exit 1
fi
id syndeo-ci2 >/dev/null 2>&1 || useradd -m -s /bin/bash syndeo-ci2
