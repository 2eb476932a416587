"""Bad images and definitions end in one ImageError naming the cause."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from syndeo.core.errors import ImageError
from syndeo.image import build, inputs, manifest

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]


def test_missing_sif(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="container image not found"):
        manifest.verify_sif(tmp_path / "absent.sif")


def test_truncated_sif_is_corrupt(sif: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.sif"
    with sif.open("rb") as src:
        cut.write_bytes(src.read(1 << 20))  # header intact, partitions gone
    with pytest.raises(ImageError, match="corrupt SIF image"):
        manifest.verify_sif(cut)


def test_tampered_sif_fails_its_manifest(sif: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.sif"
    shutil.copy2(sif, copy)
    shutil.copy2(manifest.manifest_path(sif), manifest.manifest_path(copy))
    with copy.open("r+b") as fh:
        fh.seek(copy.stat().st_size // 2)
        chunk = fh.read(16)
        fh.seek(-16, 1)
        fh.write(bytes(b ^ 0xFF for b in chunk))
    with pytest.raises(ImageError, match="sha256 differs"):
        manifest.verify_sif(copy)


def test_definition_build_failure_names_the_cause(sif: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.def"
    broken.write_text(
        f"Bootstrap: localimage\nFrom: {sif}\n\n%post\n"
        "    echo 'syndeo-test: deliberate failure' >&2\n    exit 7\n"
    )
    out = tmp_path / "out" / "broken.sif"
    with pytest.raises(ImageError, match=r"failed \(exit") as err:
        build.build("debootstrap", out, definition=broken, use_packer=False)
    assert str(out) + ".build.log" in str(err.value)
    assert not out.exists()
    log = Path(str(out) + ".build.log").read_text()
    assert "deliberate failure" in log


def test_missing_definition(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="image definition not found"):
        build.build("debootstrap", tmp_path / "x.sif", definition=tmp_path / "none.def")


def test_cli_reports_one_line_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "-r",
            str(inputs.REPO),
            "image.verify",
            "--sif",
            str(tmp_path / "nope.sif"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "container image not found" in proc.stderr
    assert "Traceback" not in proc.stderr
