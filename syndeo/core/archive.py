"""Unpacking a .tar.gz that came through the rendezvous, safely, on any Python 3.11.

A work dir or a job's outputs is written by someone who can write the cluster's prefix,
not by us: only regular files and directories are unpacked, never an absolute path, a
``..`` or a link, and never more than ``max_bytes``.  (Python's own ``filter="data"``
does the same but is missing from the 3.11 releases some hosts still have.)
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path, PurePosixPath


class UnsafeArchive(ValueError):
    pass


def safe_extract(data: bytes, dest: Path, max_bytes: int) -> list[str]:
    """Unpack ``data`` into ``dest``; the names of the files unpacked."""
    names: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        total = 0
        for m in members:
            path = PurePosixPath(m.name)
            if path.is_absolute() or ".." in path.parts or not (m.isfile() or m.isdir()):
                raise UnsafeArchive(f"refusing {m.name!r} (only plain files and directories)")
            total += m.size
            if total > max_bytes:
                raise UnsafeArchive(f"it unpacks to more than {max_bytes >> 20} MiB")
        root = dest.resolve()
        for m in members:
            target = (root / m.name).resolve()
            if not target.is_relative_to(root):
                raise UnsafeArchive(f"refusing {m.name!r} (outside the destination)")
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(m)
            assert source is not None  # a regular file always has data
            with source, target.open("wb") as out:
                out.write(source.read())
            target.chmod(0o755 if m.mode & 0o111 else 0o644)
            names.append(m.name)
    return names
