#!/bin/sh
# Runs as root on the temporary build VM (Debian 12): Apptainer + squashfuse, the SIF,
# the unprivileged `syndeo` user and the per-node service (installed, not enabled).
set -eu
BAKE=/tmp/syndeo-bake
export DEBIAN_FRONTEND=noninteractive
APT="apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends"

# The apptainer the Syndeo recipes were verified with (shared notes apptainer.md): sid's
# 1.4.5-2, taken from a fixed snapshot of sid so that it and the packages it pulls are
# the same on every build (sid itself moves daily and keeps no old versions).
APPTAINER_SID_VERSION=1.4.5-2
SID_SNAPSHOT=${DEBIAN_SID_SNAPSHOT:-20261122T000000Z}

apt-get update
if [ -n "${APPTAINER_DEB_URL:-}" ]; then
  # A download is installed only if it is the file the builder named by its digest.
  if ! printf '%s' "${APPTAINER_DEB_SHA256:-}" | grep -Eqx '[0-9a-f]{64}'; then
    echo "provision.sh: apptainer_deb_url needs apptainer_deb_sha256 (64 hex digits)" >&2
    exit 1
  fi
  $APT install curl ca-certificates
  curl -fsSL --proto =https -o /tmp/apptainer.deb "$APPTAINER_DEB_URL"
  echo "$APPTAINER_DEB_SHA256  /tmp/apptainer.deb" | sha256sum -c -
  $APT install /tmp/apptainer.deb
  rm -f /tmp/apptainer.deb
else
  # Why sid: Debian 12 has no apptainer, and sid's is built against libc6 >= 2.38, so
  # installing it replaces libc6 and ~35 base packages with sid's (listed with their
  # versions in /etc/syndeo/from-sid.txt).  Those cannot take bookworm-security's fixes
  # (bookworm's versions are older than the installed ones): they are updated by
  # rebuilding the image from a newer snapshot (debian_sid_snapshot).  Every other
  # package stays on bookworm and gets its security updates.  The snapshot is pinned at
  # 100: nothing comes from it unless asked for (`-t sid`).  To keep the whole base on
  # bookworm, give apptainer_deb_url + apptainer_deb_sha256 instead.
  # The snapshot's Release files are signed by the Debian archive keys like the live
  # archive's (Signed-By), but expired: Check-Valid-Until must be off for it.
  cat > /etc/apt/sources.list.d/syndeo-sid.sources <<SRC
Types: deb
URIs: https://snapshot.debian.org/archive/debian/$SID_SNAPSHOT/
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
Check-Valid-Until: no
SRC
  $APT install ca-certificates  # the snapshot is served over https
  printf 'Package: *\nPin: release n=sid\nPin-Priority: 100\n' > /etc/apt/preferences.d/syndeo-sid
  apt-get update
  dpkg-query -W -f '${Package} ${Version}\n' | sort > /tmp/before-sid.txt
  $APT install -t sid "apptainer=$APPTAINER_SID_VERSION"
  install -d -m 0755 /etc/syndeo
  # What the sid install added or replaced (package version), for audits and updates.
  dpkg-query -W -f '${Package} ${Version}\n' | sort | comm -13 /tmp/before-sid.txt - \
    > /etc/syndeo/from-sid.txt
  rm -f /tmp/before-sid.txt
fi
# cloud-init runs the per-node user-data (terraform/modules/node).  Debian's AWS and
# Azure images have it; its Compute Engine images do not (they only run the guest agent).
$APT install -t bookworm squashfuse uidmap cloud-init

# squashfuse mounts the SIF instead of extracting it per start, but only if /dev/fuse
# is world read/write (Debian's default; enforce it).
echo 'KERNEL=="fuse", MODE="0666"' > /etc/udev/rules.d/60-syndeo-fuse.rules

id syndeo >/dev/null 2>&1 || useradd --system --create-home --home-dir /var/lib/syndeo \
  --shell /usr/sbin/nologin syndeo
install -d -m 0755 /opt/syndeo /etc/syndeo
install -m 0644 "$BAKE/$SIF_NAME" /opt/syndeo/syndeo.sif
install -m 0644 "$BAKE/$SIF_NAME.manifest.json" /opt/syndeo/syndeo.sif.manifest.json
install -m 0755 "$BAKE/syndeo-node" /usr/local/libexec/syndeo-node
install -m 0755 "$BAKE/syndeo-node-stopped" /usr/local/libexec/syndeo-node-stopped
install -m 0644 "$BAKE/syndeo-node.service" /etc/systemd/system/syndeo-node.service
systemctl daemon-reload

# The image must start as the service user before we call the VM image good.
runuser -u syndeo -- apptainer exec --containall --cleanenv /opt/syndeo/syndeo.sif \
  python -c "import ray, syndeo; print('syndeo image ok, ray', ray.__version__)"

apt-get clean
rm -rf /var/lib/apt/lists/* "$BAKE"
