"""Private directories at predictable paths on machines shared with other users.

Scratch paths are predictable (``/tmp/syndeo-<uid>/…``, ``<scratch>/sy-<job>-<rank>``),
so another user can create one first -- as their own directory, a writable one, or
a symlink -- and receive our auth token or Ray's sockets.  :func:`secure_dir` is the
one check every launcher and the node use: each level it is responsible for is
created 0700 by us, or, if it already exists, accepted only as a real directory of
ours that nobody else can write to.  Anything else is refused with one line.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from pathlib import Path

from syndeo.core.errors import InsecurePath


def _owner(uid: int) -> str:
    with contextlib.suppress(KeyError):
        return pwd.getpwuid(uid).pw_name
    return f"uid {uid}"


def _check(level: Path, what: str = "scratch dir") -> None:
    try:
        st = os.lstat(level)
        if stat.S_ISLNK(st.st_mode):
            raise InsecurePath(
                f"refusing {what} {level}: it is a symlink (to {os.readlink(level)})"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise InsecurePath(f"refusing {what} {level}: it is not a directory")
        _check_stat(level, st, what)
        # And what we actually use is what we checked: opened without following a
        # link that may have replaced it since (fails with ELOOP/ENOTDIR if so).
        fd = os.open(level, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise InsecurePath(f"refusing {what} {level}: {exc.strerror}") from None
    try:
        now = os.fstat(fd)
    finally:
        os.close(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        raise InsecurePath(f"refusing {what} {level}: it was replaced while being checked")
    _check_stat(level, now, what)


def _check_stat(level: Path, st: os.stat_result, what: str) -> None:
    if st.st_uid != os.getuid():
        raise InsecurePath(
            f"refusing {what} {level}: it belongs to {_owner(st.st_uid)}, not to us "
            "(created by another user before us?); remove it or use another location"
        )
    if stat.S_IMODE(st.st_mode) & 0o022:
        raise InsecurePath(
            f"refusing {what} {level}: it is writable by "
            f"{'group and others' if st.st_mode & 0o002 else 'its group'} "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); make it 0700 or remove it"
        )


def secure_dir(path: Path, base: Path | None = None, what: str = "scratch dir") -> Path:
    """Create or accept ``path`` and every level between ``base`` and it as private dirs.

    ``base`` (default: the deepest existing ancestor) is trusted as it is, e.g.
    ``/tmp``.  Raises :class:`InsecurePath` (one line) for a level that exists but is
    a symlink, not a directory, another user's, or writable by group/others; ``what``
    names the directory in that line.
    """
    path = Path(os.path.abspath(path))
    if base is None:
        base = next((p for p in path.parents if p.exists()), Path("/"))
    levels = [p for p in (*reversed(path.parents), path) if p != base and base in p.parents]
    for level in levels:
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            pass  # checked below, like one we made
        except OSError as exc:
            raise InsecurePath(f"cannot create {what} {level}: {exc.strerror}") from None
        _check(level, what)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write a new owner-only file; never through a symlink or into an existing file.

    The caller's directory is ours (see :func:`secure_dir`), so a stale file of an
    earlier run there is ours too and is replaced.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
