"""moto_server as the AWS the launcher's boto3 clients reach (EC2, IAM), for tests of
the AWS target's own calls without the emulated machines."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testbeds.objectstores import running


@contextmanager
def moto_aws(monkeypatch: pytest.MonkeyPatch, where: Path) -> Iterator[None]:
    """Every AWS_* setting of the environment replaced by the server's (its endpoint
    and credentials), for as long as the server runs."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    with running("s3", where) as server:
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        yield
