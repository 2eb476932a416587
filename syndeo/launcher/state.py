"""Where the launcher keeps what outlives one command: logs and ``up`` clusters.

``$SYNDEO_HOME`` (default ``~/.syndeo``), owner-only, so node logs and the local
rendezvous (which holds auth tokens) are never readable by other users.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from syndeo.core.errors import ConfigError, TargetError
from syndeo.core.resources import user_dir
from syndeo.launcher.spec import Launched


def home() -> Path:
    return user_dir()


# Touched by `submit`: the cluster's watcher (which stats it between its polls, on this
# filesystem and not in the store) reads the head's status at once and quicker for a
# while, so that a node the new job makes Ray ask for is started without delay.
WATCH_POKE = "watch.poke"


def cluster_dir(cluster_id: str) -> Path:
    """``home()/clusters/<id>`` (or ``home()`` itself for an empty id), created 0700."""
    path = home() / "clusters" / cluster_id if cluster_id else home()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(home(), 0o700)
    except OSError as exc:
        raise ConfigError(f"cannot create {path} (set SYNDEO_HOME?): {exc.strerror}") from None
    return path


def private_dirs(path: Path) -> Path:
    """``mkdir -p path``, each directory it creates 0700; ``path``.

    Existing directories keep their mode: one the user opened to others on purpose (a
    shared ``results/``) stays open, while what is written in it stays 0600.
    """
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another writer was first
            directory.mkdir(mode=0o700)
    return path if not missing else missing[0]


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Readers see the old file or the whole new one, never a prefix; new directories
    on the way are 0700 (:func:`private_dirs`)."""
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_launched(launched: Launched) -> Path:
    path = cluster_dir(launched.cluster_id) / "launched.json"
    write_atomic(path, launched.model_dump_json(indent=2).encode())
    return path


def load_launched(cluster_id: str | None) -> Launched:
    """The saved state of ``cluster_id`` (the only one up if None).  It changes nothing:
    what it asks of the environment is :func:`store_env`'s, for the caller to apply."""
    root = home() / "clusters"
    if cluster_id is None:
        running = sorted(p.parent.name for p in root.glob("*/launched.json"))
        if not running:
            raise TargetError("no cluster is up (start one with `syndeo up`)")
        if len(running) > 1:
            raise TargetError(f"several clusters are up ({', '.join(running)}): name one")
        cluster_id = running[0]
    path = root / cluster_id / "launched.json"
    try:
        return Launched.from_saved(json.loads(path.read_text()), path)
    except FileNotFoundError:
        raise TargetError(f"no cluster {cluster_id!r} is up") from None
    except ValueError as exc:
        raise TargetError(f"state file {path} is corrupt: {_first_line(exc)}") from None


def _first_line(exc: ValueError) -> str:
    """A validation error in one line (pydantic's spans several)."""
    if isinstance(exc, ValidationError):
        err, more = exc.errors()[0], exc.error_count() - 1
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" + (f" (and {more} more)" if more else "")
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@contextlib.contextmanager
def cluster_lock(cluster_id: str) -> Iterator[None]:
    """Serialize read-modify-writes of one cluster's state (flock, across processes)."""
    fd = os.open(cluster_dir(cluster_id) / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


T = TypeVar("T")


def update_launched(cluster_id: str, change: Callable[[Launched], T]) -> T:
    """The one writer of a saved cluster: under :func:`cluster_lock`, the state read
    afresh from its file, ``change`` applied to it, and saved if it changed.  ``change``'s
    result is returned; what it raises leaves the file as it was."""
    with cluster_lock(cluster_id):
        launched = load_launched(cluster_id)
        before = launched.model_dump_json()
        result = change(launched)
        if launched.model_dump_json() != before:
            save_launched(launched)
        return result


# What a launch may save for a new shell to find its store again (see store_env):
# the store's account or region, nothing else.  A state file is data, never a way to set
# PATH, LD_PRELOAD, PYTHONPATH or a credential in the launcher's environment.
RESTORED_ENV = frozenset({"AZURE_STORAGE_ACCOUNT", "ALIBABA_CLOUD_REGION"})


def saved_store_env(launched: Launched) -> dict[str, str]:
    """The saved store settings of ``launched`` whose names :data:`RESTORED_ENV` allows."""
    return {k: v for k, v in launched.rendezvous_env.items() if k in RESTORED_ENV}


def store_env(launched: Launched) -> dict[str, str]:
    """What a command that reaches the cluster's store sets in its environment: where
    the launch found its store (e.g. the Azure storage account it chose), so that a new
    shell reaches the same one.  The shell's own settings win (they are left out)."""
    return {k: v for k, v in saved_store_env(launched).items() if k not in os.environ}


# A `--tls` cluster's client credentials (syndeo/launcher/tls.py): the CA certificate and
# a key and certificate it signed, 0600 like the token, gone with the cluster.
CLIENT_TLS_FILES = ("ca.pem", "client.pem", "client.key")


def forget(cluster_id: str) -> None:
    """Nothing of the cluster is up any more: its state and client credentials go."""
    path = home() / "clusters" / cluster_id
    (path / "launched.json").unlink(missing_ok=True)
    for name in CLIENT_TLS_FILES:
        (path / name).unlink(missing_ok=True)
