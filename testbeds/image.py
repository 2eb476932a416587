"""The test image: the real Syndeo SIF, built the way users build it and kept once per
checkout in ``testbeds.machine.IMAGE_DIR`` (the build is cached by its inputs' digest,
so a second session only re-hashes it).

``python -m testbeds.image`` builds it ahead: ``scripts/test`` starts that in the
background before the rest of the setup, the lint and the tests that need no image
(tests/conftest.py runs those first), so the ~2-3 min build is off the suite's clock.
One build at a time (a lock in the image's directory): the first test that needs the
image waits for that build and finds the image up to date.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from syndeo.image import build, manifest
from testbeds.machine import IMAGE_DIR, machine_lock

# lz4, not the default gzip: every container a test starts (hundreds of Slurm, SSH and
# AWS nodes in the suite) reads Python and Ray through squashfuse, which decompresses
# afresh in each one, and the suite is CPU-bound.  Measured on this machine: a Ray head
# with four tasks in the image took 5.4 s of CPU from lz4 against 6.7-8.0 s from gzip,
# and the build 83 s against 136 s.  The default (gzip) is built and run by
# tests/apptainer/test_image_from_wheel.py.
COMPRESSION: build.Compression = "lz4"


def test_image() -> manifest.ImageManifest:
    """The SIF the container, Slurm and AWS tests run; ``SYNDEO_TEST_SIF`` names an
    already-built one instead (a developer shortcut: CI never sets it, it builds)."""
    reuse = os.environ.get("SYNDEO_TEST_SIF")
    if reuse:
        found = manifest.verify_sif(Path(reuse))
        if found is None:
            raise RuntimeError(f"SYNDEO_TEST_SIF={reuse} has no manifest")
        return found
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    IMAGE_DIR.chmod(0o755)  # the unprivileged user that runs the containers reads it
    with machine_lock(IMAGE_DIR / "build.lock", "test image build"):
        return build.build("debootstrap", IMAGE_DIR / "syndeo.sif", compression=COMPRESSION)


# Not a test, whatever its name: pytest must not collect it from a test module's imports.
test_image.__test__ = False  # type: ignore[attr-defined]


if __name__ == "__main__":
    print(f"test image: {test_image().sif}", file=sys.stderr)
