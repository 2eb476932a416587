"""The SSH test bed: real sshd hosts in network namespaces, up once per session.

``ssh_hosts`` is a :class:`testbeds.sshhosts.Bed` of 3 hosts under
``<checkout>/.testbed/ssh``; the unprivileged user ``syndeo-ci`` logs in to each
with ``bed.key`` and verifies host keys against ``bed.known_hosts``
(``bed.ssh_options()`` has both).  ``bed_s3`` is a moto_server listening on the
bridge address, reachable from inside every host.  Both are torn down at the end
of the session whatever happens (also on Ctrl-C and SIGTERM), and nothing of the
bed may survive.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from testbeds import sshhosts
from testbeds.objectstores import Server, start_server
from testbeds.users import CI_USER, UserRun, give_to_ci_user

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / ".testbed" / "ssh"
HOSTS = 3


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    # pytest runs fixture teardown on KeyboardInterrupt, not on a bare SIGTERM.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def ssh_hosts() -> Iterator[sshhosts.Bed]:
    assert os.geteuid() == 0, "the SSH bed needs root (network namespaces, sshd)"
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        # Waits for another session of this checkout; clears an interrupted one's leftovers.
        with sshhosts.session(BASE, n=HOSTS) as bed:
            yield bed
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sshhosts.leftovers(BASE) == []


@pytest.fixture(scope="session")
def bed_s3(ssh_hosts: sshhosts.Bed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """moto_server on the bed's bridge address (``server.endpoint``), for the hosts."""
    logs = tmp_path_factory.mktemp("bed-s3")
    server = start_server("s3", logs, host=ssh_hosts.host_ip)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def run(ssh_hosts: sshhosts.Bed) -> Iterator[UserRun]:
    """One run of the CI user on the bed: its dir and, beside it, its SYNDEO_HOME."""
    root = Path(f"/home/{CI_USER}/t-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    run = UserRun(root)
    yield run
    run.remove()
