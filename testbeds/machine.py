"""Machine-wide test beds, made safe for two checkouts on one machine.

What can be scoped to this checkout is (names derived from a short hash of the
checkout's path): the test image's directory and the interpreter that launches
container and Slurm runs as the CI user (``.venv/ci-user``, this checkout's code).
What cannot -- the local Slurm cluster owns ``/etc/slurm``, a bridge, network
namespaces and the daemons' ports -- is taken under a machine-wide lock for as
long as a test session uses it, and a cluster the session did not start is
neither adopted for cleanup nor torn down.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_KEY = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]

# Outside the checkout and /tmp/pytest-of-root (0700): the unprivileged user that
# runs the containers must be able to read the SIF.  One per checkout: another
# checkout's image was built from other sources.
IMAGE_DIR = Path(
    os.environ.get("SYNDEO_TEST_IMAGE_DIR", f"/var/tmp/syndeo-test-image-{CHECKOUT_KEY}")
)
LOCK_DIR = Path("/var/lock")
SLURM_TESTBED_LOCK = LOCK_DIR / "syndeo-slurm-testbed.lock"


@contextlib.contextmanager
def machine_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive flock on ``path``; say so if another checkout has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            print(
                f"waiting for the {what} (in use by {holder or 'another process'})",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} for {ROOT}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
