"""Unpacking a .tar.gz that came through the rendezvous, safely, on any Python 3.11.

A work dir or a job's outputs is written by someone who can write the cluster's prefix,
not by us: only regular files and directories are unpacked, never an absolute path, a
``..`` or a link, and never more than ``max_bytes`` in ``max_members`` entries.  The
archive is read as a stream, one member at a time, and each limit is checked as the
member arrives: an archive bomb (a million empty files in 2 MiB) is refused at its
limit, not after every header was read into memory.  What was unpacked before a refusal
is removed again.  (Python's own ``filter="data"`` checks paths and links but not counts
or sizes, and is missing from the 3.11 releases some hosts still have.)
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

# Entries (files and directories) in one archive: a work dir or outputs/ with more is
# not something a person packs by hand (a venv or node_modules left in it, or a bomb).
MAX_MEMBERS = 20_000
_CHUNK = 1 << 20


class UnsafeArchive(ValueError):
    pass


def safe_extract(
    data: bytes | BinaryIO, dest: Path, max_bytes: int, max_members: int = MAX_MEMBERS
) -> list[str]:
    """Unpack ``data`` (the archive's bytes, or a file open on it) into ``dest``; the
    names of the files unpacked.

    Raises :class:`UnsafeArchive` (or :class:`tarfile.TarError` for a corrupt one) and
    leaves ``dest`` as it was (what this call created is removed).
    """
    created: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return _extract(data, dest, max_bytes, max_members, created)
    except BaseException:
        for path in reversed(created):
            with contextlib.suppress(OSError):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        raise


def _extract(
    data: bytes | BinaryIO, dest: Path, max_bytes: int, max_members: int, created: list[Path]
) -> list[str]:
    names: list[str] = []
    root = dest.resolve()
    total = 0
    # "r|gz": a stream, one header at a time; nothing is kept of members already seen.
    fileobj = io.BytesIO(data) if isinstance(data, bytes) else data
    with tarfile.open(fileobj=fileobj, mode="r|gz") as tar:
        count = 0
        while (m := tar.next()) is not None:
            # TarFile keeps every header it read, also when streaming (not in its stubs).
            tar.members = []  # type: ignore[attr-defined]
            count += 1
            if count > max_members:
                raise UnsafeArchive(f"it holds more than {max_members} entries")
            path = PurePosixPath(m.name)
            if path.is_absolute() or ".." in path.parts or not (m.isfile() or m.isdir()):
                raise UnsafeArchive(f"refusing {m.name!r} (only plain files and directories)")
            total += m.size
            if total > max_bytes:
                raise UnsafeArchive(f"it unpacks to more than {max_bytes >> 20} MiB")
            target = (root / m.name).resolve()
            if not target.is_relative_to(root):
                raise UnsafeArchive(f"refusing {m.name!r} (outside the destination)")
            _make_parents(target.parent, root, created)
            if m.isdir():
                _make_parents(target, root, created)
                continue
            source = tar.extractfile(m)
            assert source is not None  # a regular file always has data
            if not target.exists():
                created.append(target)
            with source, target.open("wb") as out:
                shutil.copyfileobj(source, out, _CHUNK)
            target.chmod(0o755 if m.mode & 0o111 else 0o644)
            names.append(m.name)
    return names


def _make_parents(path: Path, root: Path, created: list[Path]) -> None:
    """``mkdir -p`` of ``path`` below ``root``, recording each directory it made."""
    missing = []
    while path != root and not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir()
        created.append(directory)
