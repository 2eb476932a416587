"""What comes through the rendezvous as a .tar.gz is unpacked only as plain files below
the destination, within a size limit, on every Python 3.11 (some lack filter="data")."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from syndeo.core.archive import UnsafeArchive, safe_extract


def _archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _link(name: str, to: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, to
    return info, None


def test_plain_files_and_dirs_are_unpacked_with_their_x_bit(tmp_path: Path) -> None:
    names = safe_extract(
        _archive(_file("a.txt"), _file("d/run.sh", b"#!/bin/sh\n", 0o700)), tmp_path, 1000
    )
    assert names == ["a.txt", "d/run.sh"]
    assert (tmp_path / "d" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    "member",
    [
        _file("/etc/evil"),
        _file("../evil"),
        _file("d/../../evil"),
        _link("l", "/etc/passwd"),
        _link("h", "a.txt", tarfile.LNKTYPE),
    ],
    ids=["absolute", "dotdot", "nested-dotdot", "symlink", "hardlink"],
)
def test_anything_but_plain_files_below_dest_is_refused(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None]
) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafeArchive, match="refusing"):
        safe_extract(_archive(_file("a.txt"), member), dest, 1000)
    assert list(dest.iterdir()) == []  # checked before anything is written
    assert not (tmp_path / "evil").exists()


def test_the_size_limit_holds_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="more than"):
        safe_extract(_archive(_file("a", b"x" * 600), _file("b", b"y" * 600)), tmp_path, 1000)
    assert list(tmp_path.iterdir()) == []
