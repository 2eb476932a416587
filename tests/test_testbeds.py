"""Two checkouts on one machine must not break each other's test beds.

The test image and the CI user's launcher are this checkout's own; the local
Slurm cluster (machine-wide names) is held under a lock while a session uses it
(checked in ``tests/slurm/test_cluster.py``, where the cluster is up).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbeds.machine import CHECKOUT_KEY, IMAGE_DIR, ROOT, machine_lock
from tests.support.helpers import lock_is_held


def test_the_test_image_is_built_per_checkout() -> None:
    if "SYNDEO_TEST_IMAGE_DIR" not in os.environ:
        assert CHECKOUT_KEY in IMAGE_DIR.name


def test_machine_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    path = tmp_path / "bed.lock"
    with machine_lock(path, "test bed"):
        assert lock_is_held(path)
        assert str(ROOT) in path.read_text()  # who holds it, for the one who waits
    assert not lock_is_held(path)


@pytest.mark.apptainer
def test_container_runs_are_launched_with_this_checkouts_code() -> None:
    assert os.geteuid() == 0, "launches as the CI user need root (runuser)"
    from testbeds.launch import launcher_python

    python = Path(launcher_python("syndeo-ci"))
    # The interpreter itself is this checkout's (.venv/ci-user), not a machine-wide one.
    assert python.is_relative_to(ROOT), python


def test_launchers_the_tests_start_take_ctrl_c_even_from_a_background_suite() -> None:
    """Tests interrupt launchers with SIGINT, as a terminal would; a suite started in the
    background of a script inherits SIGINT ignored and would pass that on to every child
    (tests/conftest.py sets it back)."""
    import subprocess
    import sys

    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
