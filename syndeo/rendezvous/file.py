"""Shared-filesystem rendezvous (``file:///abs/path``): Slurm's home or scratch, or local disk.

Atomic create is ``link(2)`` of a fully written temp file: it fails if the name
exists, readers never see a half-written record, and unlike ``O_EXCL`` it is
safe on NFS.  Directories are 0700 and files 0600 so the token stays the owner's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

from syndeo.core.errors import RendezvousError
from syndeo.rendezvous.base import Rendezvous


def parse_file_uri(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise RendezvousError(f"not a file URI: {uri!r} (expected file:///absolute/path)")
    path = Path(unquote(parsed.path))
    if not path.is_absolute() or not parsed.path:
        raise RendezvousError(f"file rendezvous needs an absolute path: {uri!r}")
    return path


class FileRendezvous(Rendezvous):
    scheme = "file"

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        super().__init__(uri, cluster_id, attempt)
        self.root = parse_file_uri(uri) / cluster_id

    # ------------------------------------------------------------------ helpers
    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise RendezvousError(f"invalid rendezvous key {key!r}")
        return self.root / key

    def _ensure_dir(self, path: Path) -> None:
        try:
            # mkdir(parents=True) gives intermediate dirs the default mode: create each
            # missing level ourselves so every directory we make is 0700.
            missing = [p for p in (path, *path.parents) if not p.exists()]
            for level in reversed(missing):
                level.mkdir(mode=0o700, exist_ok=True)
        except PermissionError as exc:
            raise RendezvousError(
                f"cannot create rendezvous directory {path}: permission denied"
            ) from exc
        except OSError as exc:
            raise RendezvousError(
                f"cannot create rendezvous directory {path}: {exc.strerror}"
            ) from exc

    def _tmp_with(self, directory: Path, data: bytes | Iterable[bytes]) -> str:
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")  # mkstemp is 0600
        except OSError as exc:
            raise RendezvousError(f"cannot write in {directory}: {exc.strerror}") from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                for piece in [data] if isinstance(data, bytes) else data:
                    fh.write(piece)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                # ENOSPC, EIO, ESTALE on NFS...: a RendezvousError callers can wait out.
                raise RendezvousError(f"cannot write in {directory}: {exc.strerror}") from exc
            raise
        return tmp

    # ------------------------------------------------------------------ primitives
    def check(self) -> None:
        self._ensure_dir(self.root)
        st = self.root.stat()
        if st.st_uid != os.getuid():
            raise RendezvousError(f"rendezvous directory {self.root} is owned by another user")
        if stat.S_IMODE(st.st_mode) & 0o077:
            # Tighten rather than refuse: we created it, or the user did for us.
            os.chmod(self.root, 0o700)
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise RendezvousError(f"rendezvous directory {self.root} is not writable")

    def _create_stream(self, key: str, pieces: Iterable[bytes]) -> bool:
        return self._create(key, pieces)

    def _read_stream(self, key: str) -> Iterator[bytes] | None:
        try:
            fh = self._path(key).open("rb")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise RendezvousError(f"cannot read {self._path(key)}: {exc.strerror}") from exc

        def pieces() -> Iterator[bytes]:
            with fh:
                while piece := fh.read(1 << 20):
                    yield piece

        return pieces()

    def _create(self, key: str, data: bytes | Iterable[bytes]) -> bool:
        dest = self._path(key)
        self._ensure_dir(dest.parent)
        tmp = self._tmp_with(dest.parent, data)
        try:
            os.link(tmp, dest)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                return False
            raise RendezvousError(f"cannot write {dest}: {exc.strerror}") from exc
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _write(self, key: str, data: bytes) -> None:
        dest = self._path(key)
        self._ensure_dir(dest.parent)
        tmp = self._tmp_with(dest.parent, data)
        try:
            os.replace(tmp, dest)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise RendezvousError(f"cannot write {dest}: {exc.strerror}") from exc

    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        try:
            with self._path(key).open("rb") as fh:
                data = fh.read() if limit is None else fh.read(limit + 1)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PermissionError as exc:
            raise RendezvousError(f"cannot read {self._path(key)}: permission denied") from exc
        except OSError as exc:
            # ESTALE/EIO from a shared filesystem having a bad moment, EISDIR, ELOOP, ...
            raise RendezvousError(f"cannot read {self._path(key)}: {exc.strerror}") from exc
        if limit is not None and len(data) > limit:
            raise self._too_large(key, limit)
        return data

    def _list(self, prefix: str) -> list[str]:
        try:
            if not self.root.is_dir():
                return []
        except OSError as exc:
            raise RendezvousError(f"cannot list {self.root}: {exc.strerror}") from exc

        def fail(exc: OSError) -> None:
            raise RendezvousError(f"cannot list {self.root}: {exc.strerror}") from exc

        keys = []
        # Walk only below the prefix's directory: the head lists ctl/ every few seconds
        # while job logs pile up elsewhere in the cluster's dir.
        start = self.root / prefix.rpartition("/")[0] if "/" in prefix else self.root
        if not start.is_dir():
            return []
        for dirpath, _dirs, files in os.walk(start, onerror=fail):
            rel_dir = os.path.relpath(dirpath, self.root)
            for name in files:
                if name.startswith(".tmp-"):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def _delete_prefix(self, prefix: str) -> None:
        if prefix == "":
            shutil.rmtree(self.root, ignore_errors=True)
            return
        if prefix.endswith("/"):
            shutil.rmtree(self._path(prefix.rstrip("/")), ignore_errors=True)
            return
        for key in self._list(prefix):
            try:
                self._path(key).unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise RendezvousError(f"cannot delete {self._path(key)}: {exc.strerror}") from exc
