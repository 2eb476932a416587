"""A wheelhouse larger than any part of an upload goes through each object store and
back without being held whole in memory: the launcher's upload and the node's download
stay far below the payload's size (Python's own allocations, traced), and the bytes that
come back are the bytes that went up."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbeds.objectstores import Server
from tests.rendezvous.conftest import CLOUD, cloud_backend

pytestmark = pytest.mark.objectstore

PAYLOAD = 64 * 2**20  # eight of the 8 MiB parts the stores take a wheelhouse in


def _peak(work: Callable[[], object]) -> int:
    """The most memory Python's allocator held at once while ``work`` ran, in bytes."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _random_file(path: Path, size: int) -> str:
    """``size`` random bytes (nothing to compress) written piece by piece; their sha256."""
    sha = hashlib.sha256()
    with path.open("wb") as fh:
        for _ in range(size // 2**20):
            piece = os.urandom(2**20)
            sha.update(piece)
            fh.write(piece)
    return sha.hexdigest()


def _same(a: Path, b: Path) -> bool:
    def pieces(path: Path) -> Iterator[bytes]:
        with path.open("rb") as fh:
            while piece := fh.read(2**20):
                yield piece

    return all(x == y for x, y in zip(pieces(a), pieces(b), strict=True))


@pytest.mark.parametrize("kind", CLOUD)
def test_a_wheelhouse_streams_through_the_store_in_bounded_memory(
    kind: str,
    tmp_path: Path,
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src, got = tmp_path / "wheels.tar.gz", tmp_path / "got.tar.gz"
    digest = _random_file(src, PAYLOAD)
    rdv = cloud_backend(kind, shared_server(kind), monkeypatch).open()
    sent: list[int] = []
    up = _peak(lambda: rdv.put_wheelhouse_file(digest, src, sent.append))
    assert sum(sent) > PAYLOAD  # all of it, sealed
    down = _peak(lambda: rdv.get_wheelhouse_file(digest, got))
    assert got.stat().st_size == PAYLOAD and _same(src, got)
    print(
        f"{kind}: {PAYLOAD >> 20} MiB up with a peak of {up / 2**20:.1f} MiB, "
        f"down with {down / 2**20:.1f} MiB"
    )
    # About one part in memory at a time, the same for any size (measured: 21-23 MiB up,
    # 9-15 MiB down, for 40 MiB as for 80 MiB), where a whole payload would be 64 MiB.
    assert up < PAYLOAD // 2, f"upload peak {up / 2**20:.1f} MiB"
    assert down < PAYLOAD // 3, f"download peak {down / 2**20:.1f} MiB"


@pytest.mark.parametrize("kind", CLOUD)
def test_a_wheelhouse_cut_short_leaves_nothing_in_the_store(
    kind: str,
    tmp_path: Path,
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher fails after two parts went up (its disk, a Ctrl-C): no object is left
    under the digest, so the next submit uploads it whole rather than finding a cut one."""
    rdv = cloud_backend(kind, shared_server(kind), monkeypatch).open()
    key = "a0/wheelhouses/" + "ab" * 32 + ".tar.gz"

    def cut() -> Iterator[bytes]:
        for _ in range(20):
            yield os.urandom(2**20)
        raise OSError("the launcher's disk failed")

    with pytest.raises(OSError, match="disk failed"):
        rdv._create_stream(key, cut())
    assert rdv._list("a0/wheelhouses/") == []
    assert rdv._create_stream(key, iter([b"whole"])) and rdv._read(key) == b"whole"
