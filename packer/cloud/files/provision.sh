#!/bin/sh
# Runs as root on the temporary build VM (Debian 12): Apptainer + squashfuse, the SIF,
# the unprivileged `syndeo` user and the per-node service (installed, not enabled).
set -eu
BAKE=/tmp/syndeo-bake
export DEBIAN_FRONTEND=noninteractive
APT="apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends"

apt-get update
if [ -n "${APPTAINER_DEB_URL:-}" ]; then
  $APT install curl ca-certificates
  curl -fsSL -o /tmp/apptainer.deb "$APPTAINER_DEB_URL"
  $APT install /tmp/apptainer.deb
  rm -f /tmp/apptainer.deb
else
  # Debian 12 has no apptainer; sid's needs a newer libc (pulled from sid, pinned low
  # so nothing else ever upgrades from sid).
  cat > /etc/apt/sources.list.d/syndeo-sid.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  printf 'Package: *\nPin: release n=sid\nPin-Priority: 100\n' > /etc/apt/preferences.d/syndeo-sid
  apt-get update
  $APT install -t sid apptainer
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
install -m 0644 "$BAKE/syndeo-node.service" /etc/systemd/system/syndeo-node.service
systemctl daemon-reload

# The image must start as the service user before we call the VM image good.
runuser -u syndeo -- apptainer exec --containall --cleanenv /opt/syndeo/syndeo.sif \
  python -c "import ray, syndeo; print('syndeo image ok, ray', ray.__version__)"

apt-get clean
rm -rf /var/lib/apt/lists/* "$BAKE"
