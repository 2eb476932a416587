"""What comes through the rendezvous as a .tar.gz is unpacked only as plain files below
the destination, within a size and a count limit, read as a stream, on every Python 3.11
(some lack filter="data")."""

from __future__ import annotations

import io
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from syndeo.core.archive import MAX_MEMBERS, UnsafeArchive, safe_extract


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
    assert list(dest.iterdir()) == []  # what came before it is removed again
    assert not (tmp_path / "evil").exists()


def test_the_size_limit_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="more than"):
        safe_extract(_archive(_file("a", b"x" * 600), _file("b", b"y" * 600)), tmp_path, 1000)
    assert list(tmp_path.iterdir()) == []


def _empty_files(count: int) -> bytes:
    """An archive of ``count`` empty files: tiny packed, one header each unpacked."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo()
        for i in range(count):
            info.name = f"f{i}"
            tar.addfile(info)
    return buf.getvalue()


def test_an_archive_of_too_many_entries_is_refused_as_it_streams(tmp_path: Path) -> None:
    """The bomb of the review (a million empty files in 2 MiB) on a smaller scale: it is
    refused at the entry limit, having read no more headers than that (the old code's
    getmembers() read and kept every one first: ~375 MiB for a million)."""
    bomb = _empty_files(40_000)  # ~380 KB packed
    dest = tmp_path / "dest"
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchive, match="more than 1000 entries"):
            safe_extract(bomb, dest, 1 << 30, max_members=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 40,000 headers kept would be ~15 MiB; 1,000 and the gzip window take ~1.5-2.1 MiB
    # (more when the suite has run in the same process): 4 MiB still tells them apart.
    assert peak < 4 * 1024 * 1024, peak
    assert list(dest.iterdir()) == []  # the 1,000 files it unpacked are gone again
    assert MAX_MEMBERS == 20_000  # the default both sides apply (pack_workdir, the agent)


def test_an_archive_at_the_entry_limit_is_unpacked(tmp_path: Path) -> None:
    names = safe_extract(_empty_files(100), tmp_path, 1000, max_members=100)
    assert len(names) == 100 and len(list(tmp_path.iterdir())) == 100
