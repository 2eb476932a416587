"""Large wheelhouses: streamed into and out of the store record by record, and the limits
that remain (the store's largest object, the nodes' scratch space) checked before any
byte is uploaded, in one line."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher import job_client
from syndeo.rendezvous import PayloadRefused, ReadyRecord, StatusRecord, open_rendezvous
from syndeo.rendezvous.file import FileRendezvous

KEY = "cd" * 32


def _rdv(tmp_path: Path) -> FileRendezvous:
    rdv = open_rendezvous((tmp_path / "rdv").as_uri(), "big")
    assert isinstance(rdv, FileRendezvous)
    rdv.launch_key = KEY
    return rdv


def _file(tmp_path: Path, mib: int) -> tuple[Path, str]:
    path = tmp_path / "wheels.tar.gz"
    path.write_bytes(os.urandom(mib * 2**20 + 123))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_wheelhouse_streams_through_the_store_sealed(tmp_path: Path) -> None:
    rdv = _rdv(tmp_path)
    path, digest = _file(tmp_path, 5)
    sent: list[int] = []
    assert rdv.put_wheelhouse_file(digest, path, sent.append)
    assert len(sent) > 5 and max(sent) <= 2**20 + 64  # record by record, never whole
    assert not rdv.put_wheelhouse_file(digest, path)  # there already: nothing sent
    [stored] = (tmp_path / "rdv").rglob("wheelhouses/*.tar.gz")
    assert path.read_bytes()[:4096] not in stored.read_bytes()  # sealed
    got = tmp_path / "got"
    assert rdv.get_wheelhouse_file(digest, got) and got.read_bytes() == path.read_bytes()
    # Another digest's name on these bytes: not taken.
    (stored.parent / ("0" * 64 + ".tar.gz")).write_bytes(stored.read_bytes())
    with pytest.raises(PayloadRefused):  # sealed for its own key: moved, refused
        rdv.get_wheelhouse_file("0" * 64, tmp_path / "moved")
    assert not (tmp_path / "moved").exists()
    data = bytearray(stored.read_bytes())
    data[3 * 2**20] ^= 1
    stored.write_bytes(bytes(data))
    with pytest.raises(PayloadRefused):
        rdv.get_wheelhouse_file(digest, tmp_path / "changed")
    assert not (tmp_path / "changed").exists()


def test_limits_are_one_line_before_upload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rdv = _rdv(tmp_path)
    path, _ = _file(tmp_path, 3)
    said: list[str] = []
    job_client._check_limits(rdv, path.stat().st_size, said.append)
    assert said == [
        "the nodes' free space is not known yet: each node checks it before it installs"
    ]

    monkeypatch.setattr(FileRendezvous, "max_object", 2 * 2**20)
    with pytest.raises(
        ConfigError,
        match=r"^the job's wheels are 3 MiB, more than .* takes in one object \(2 MiB\)",
    ):
        job_client._check_limits(rdv, path.stat().st_size, said.append)
    monkeypatch.setattr(FileRendezvous, "max_object", None)

    now = time.time()
    rdv.publish_status(
        StatusRecord(phase="serving", nodes_expected=2, nodes_joined=[0, 1], updated_at=now)
    )
    rdv.put_ready(ReadyRecord(rank=0, free_bytes=2**40, updated_at=now))
    rdv.put_ready(ReadyRecord(rank=1, free_bytes=5 * 2**20, updated_at=now))
    with pytest.raises(ConfigError) as exc:
        job_client._check_limits(rdv, path.stat().st_size, said.append)
    assert str(exc.value) == (
        "the job's wheels are 3 MiB and need about 9 MiB on each node; rank 1 has 5 MiB "
        "free in its scratch"
    )
