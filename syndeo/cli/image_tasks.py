"""invoke tasks for the image (thin: the work is in :mod:`syndeo.image`).

Wired into ``tasks.py`` as ``invoke build`` / ``invoke image.build`` and ``invoke image.verify``.
"""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.core.errors import SyndeoError
from syndeo.image import build as image_build
from syndeo.image import manifest as image_manifest


@task(
    auto_shortflags=False,
    help={
        "base": "debootstrap (Debian mirror; default) or docker (python slim; needs Docker Hub)",
        "output": "SIF path (default .syndeo/image/syndeo-<base>.sif)",
        "force": "rebuild even if nothing changed",
        "extra_ca": "PEM bundle to trust inside the image (TLS-intercepting proxy)",
        "no_packer": "call apptainer directly instead of through Packer",
        "compression": "gzip (default, mounts everywhere) or lz4 (faster build and start, larger)",
        "base_image": "docker: the base by digest, e.g. python:3.11-slim-bookworm@sha256:…",
    },
)
def build(
    c: Context,
    base: str = "debootstrap",
    output: str = "",
    force: bool = False,
    extra_ca: str = "",
    no_packer: bool = False,
    compression: str = "gzip",
    base_image: str = "",
) -> None:
    """Build the Syndeo Apptainer image (cached: a no-op when nothing changed)."""
    if base not in ("debootstrap", "docker"):
        raise Exit(f"syndeo: error: --base must be debootstrap or docker, not {base!r}", code=2)
    if compression not in ("gzip", "lz4"):
        raise Exit(f"syndeo: error: --compression must be gzip or lz4, not {compression!r}", code=2)
    try:
        manifest = image_build.build(
            "docker" if base == "docker" else "debootstrap",
            Path(output) if output else None,
            force=force,
            extra_ca=Path(extra_ca) if extra_ca else None,
            compression="lz4" if compression == "lz4" else "gzip",
            use_packer=not no_packer,
            build_args={"BASE": base_image} if base_image else None,
        )
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("syndeo: interrupted", code=130) from None
    print(manifest.sif)


@task(auto_shortflags=False, help={"sif": "path of the SIF to check"})
def verify(c: Context, sif: str) -> None:
    """Check a SIF: header, partitions and the sha256 recorded in its manifest."""
    try:
        manifest = image_manifest.verify_sif(Path(sif))
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"ok: {sif}" + (f" sha256:{manifest.sha256}" if manifest else " (no manifest)"))
