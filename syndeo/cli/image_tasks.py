"""The repository's ``invoke image.verify`` (building the image is the user verb
``build``: :mod:`syndeo.cli.tools`)."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.core.errors import SyndeoError
from syndeo.image import manifest as image_manifest


@task(auto_shortflags=False, help={"sif": "path of the SIF to check"})
def verify(c: Context, sif: str) -> None:
    """Check a SIF: header, partitions and the sha256 recorded in its manifest."""
    try:
        manifest = image_manifest.verify_sif(Path(sif))
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"ok: {sif}" + (f" sha256:{manifest.sha256}" if manifest else " (no manifest)"))
