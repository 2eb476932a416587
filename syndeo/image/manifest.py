"""The image's manifest: what a launcher checks before it runs a SIF.

Every built SIF has ``<sif>.manifest.json`` beside it recording its sha256 and the
digest of every build input.  Launchers only need the cheap checks here (a SIF header,
the recorded digest); building lives in :mod:`syndeo.image.build`.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from pydantic import BaseModel, ValidationError

from syndeo.core.errors import ImageError

SIF_MAGIC = b"SIF_MAGIC"  # bytes 32..41 of every SIF (after the launch script line)


class ImageManifest(BaseModel):
    sif: str
    sha256: str
    size_bytes: int
    inputs_sha256: str
    base: str
    builder: str
    built_at: str
    build_seconds: float
    versions: dict[str, str]
    compression: str = "gzip"


def manifest_path(sif: Path) -> Path:
    return sif.with_name(sif.name + ".manifest.json")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_sif(sif: Path) -> Path:
    """Cheap sanity check before launching: exists, readable, has the SIF header."""
    sif = sif.expanduser().resolve()
    if not sif.exists():
        raise ImageError(f"container image not found: {sif} (build it with `syndeo build`)")
    if not sif.is_file():
        raise ImageError(f"container image is not a file: {sif}")
    try:
        with sif.open("rb") as fh:
            head = fh.read(64)
    except OSError as err:
        raise ImageError(f"cannot read container image {sif}: {err.strerror}") from err
    if SIF_MAGIC not in head:
        raise ImageError(f"not a SIF image (corrupt or wrong file): {sif}")
    return sif


def verify_sif(sif: Path) -> ImageManifest | None:
    """Full check: header, descriptors (``apptainer sif list``) and, if a manifest is
    present, the recorded sha256.  Returns the manifest when there is one."""
    sif = check_sif(sif)
    try:
        proc = subprocess.run(
            ["apptainer", "sif", "list", str(sif)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as err:
        raise ImageError("apptainer is not installed (scripts/setup.d/apptainer.sh)") from err
    if proc.returncode != 0 or "Squashfs" not in proc.stdout:
        why = (proc.stderr.strip().splitlines() or ["no root filesystem partition"])[-1]
        raise ImageError(f"corrupt SIF image {sif}: {why}")
    # Rows look like "3 |1 |NONE |36864-277618688 |FS (Squashfs/...)": a descriptor that
    # ends past the end of the file means a truncated copy (interrupted download/rsync).
    ends = [int(m.group(1)) for m in re.finditer(r"\|\s*\d+-(\d+)\s*\|", proc.stdout)]
    size = sif.stat().st_size
    if not ends or max(ends) > size:
        raise ImageError(
            f"corrupt SIF image {sif}: truncated "
            f"({size} bytes, its partitions need {max(ends, default=0)})"
        )
    manifest = load_manifest(sif)
    if manifest is not None and sha256_file(sif) != manifest.sha256:
        raise ImageError(f"corrupt SIF image {sif}: sha256 differs from {manifest_path(sif)}")
    return manifest


def load_manifest(sif: Path) -> ImageManifest | None:
    path = manifest_path(sif)
    if not path.exists():
        return None
    try:
        return ImageManifest.model_validate_json(path.read_text())
    except (ValidationError, OSError) as err:
        raise ImageError(f"unreadable image manifest {path}: {err}") from err


def image_digest(sif: Path) -> str:
    """``sha256:<hex>`` of a SIF, for results manifests (trusts an up-to-date manifest)."""
    sif = check_sif(sif)
    manifest = load_manifest(sif)
    if manifest is not None and manifest.size_bytes == sif.stat().st_size:
        return f"sha256:{manifest.sha256}"
    return f"sha256:{sha256_file(sif)}"
