"""Private directories at predictable paths on machines shared with other users.

Scratch paths are predictable (``/tmp/syndeo-<uid>/…``, ``<scratch>/sy-<job>-<rank>``),
so another user can create one first -- as their own directory, a writable one, or
a symlink -- and receive our auth token or Ray's sockets.  :func:`secure_dir` is the
one check every launcher and the node use: each level it is responsible for is
created 0700 by us, or, if it already exists, accepted only as a real directory of
ours that nobody else can write to.  Anything else is refused with one line.

:func:`trusted_base` checks what :func:`secure_dir` takes as given: the base and every
level above it up to ``/``.  Whoever can write a level can rename what is below it and
put their own in its place, so each level must be root's or ours and writable by
nobody else -- except a sticky one (``/tmp``), where others cannot touch our entries,
and which is therefore accepted only above a level that is ours and private (0700).
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


# Links followed within one path before giving up (as the kernel's ELOOP limit).
_MAX_LINKS = 40


def _who(st: os.stat_result) -> str:
    return "its group" if not st.st_mode & 0o002 else "others"


def trusted_base(path: Path, what: str, change: str) -> None:
    """Refuse ``path`` (one line) if another user could replace it or any level above it.

    Every existing level from ``/`` down to ``path`` must be a directory of root's or
    ours that neither its group nor others can write, or a sticky one (``/tmp``) whose
    next level is ours and private; ``path`` itself may not be such a shared sticky
    dir.  A symlink on the way is accepted when root or we own it, and its target is
    checked the same way.  Levels that do not exist yet are left to the caller to create
    (:func:`secure_dir`).  ``what`` names the path in the message, ``change`` the
    setting to change instead (``[slurm] job_dir``).
    """
    path = Path(os.path.abspath(path))
    where = f"refusing {what} {path}"
    if _walk(path, where, change, 0):
        raise InsecurePath(
            f"{where}: it is writable by others (sticky, mode "
            f"{stat.S_IMODE(os.stat(path).st_mode):04o}); set {change} to a directory of "
            "yours inside it, mode 0700"
        )


def _walk(path: Path, where: str, change: str, links: int) -> bool:
    """Check the levels of ``path``; True when its last level is a shared sticky dir."""
    shared_above: Path | None = None
    for level in (*reversed(path.parents), path):
        try:
            st = os.lstat(level)
        except FileNotFoundError:
            return False  # the rest is made by the caller, below a checked level
        except OSError as exc:
            raise InsecurePath(f"{where}: cannot read {level}: {exc.strerror}") from None
        if shared_above is not None and (
            st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077
        ):
            raise InsecurePath(
                f"{where}: {level} is in {shared_above}, which others can write, but is not "
                f"ours and private (owner {_owner(st.st_uid)}, mode "
                f"{stat.S_IMODE(st.st_mode):04o}); make it yours with mode 0700, or set "
                f"{change} elsewhere"
            )
        shared_above = _check_level(level, st, where, change, links)
    return shared_above is not None


def _check_level(
    level: Path, st: os.stat_result, where: str, change: str, links: int
) -> Path | None:
    """One level; returns it when it is a shared sticky dir (its next level must be ours)."""
    if st.st_uid not in (0, os.getuid()):
        raise InsecurePath(
            f"{where}: {level} belongs to {_owner(st.st_uid)}, who could replace what is "
            f"below it; set {change} to a directory of yours"
        )
    if stat.S_ISLNK(st.st_mode):
        if links >= _MAX_LINKS:
            raise InsecurePath(f"{where}: too many symlinks at {level}")
        target = level.parent / os.readlink(level)  # an absolute target replaces the parent
        return level if _walk(Path(os.path.abspath(target)), where, change, links + 1) else None
    if not stat.S_ISDIR(st.st_mode):
        raise InsecurePath(f"{where}: {level} is not a directory")
    if not stat.S_IMODE(st.st_mode) & 0o022:
        return None
    if st.st_mode & stat.S_ISVTX:
        return level
    raise InsecurePath(
        f"{where}: {level} is writable by {_who(st)} without the sticky bit (mode "
        f"{stat.S_IMODE(st.st_mode):04o}), who could replace what is below it; "
        f"`chmod go-w {level}`, or set {change} to a directory only you can write"
    )
