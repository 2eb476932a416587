"""How the launcher (and the watcher it leaves behind) starts a Python of its own.

``python -m module`` puts its working directory first on ``sys.path``, and the
launcher's working directory is often a work dir that a cluster's tasks can write (a
mounted work dir, a file rendezvous beside it): a ``syndeo/`` package or a
``sitecustomize.py`` planted there would run on the user's machine, with every
credential the launcher holds.  So each such Python runs isolated (``-I``: no working
directory on its path, no ``PYTHON*`` variable, no user site) and in a private
working directory (0700, this user's own).

What the launcher's own Python found through ``PYTHONPATH`` and the user's site
directory still reaches the child, passed explicitly: absolute ``PYTHONPATH`` entries
only (a relative or empty entry means the working directory, the very thing kept out).
"""

from __future__ import annotations

import os
import site
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from syndeo.core.errors import ConfigError

# Run when there are paths to add: the child's path as the launcher's, then the module
# as ``-m`` runs it (``-m MODULE ARGS`` stay the last words of its command line).
_BOOT = (
    "import runpy, site, sys; {sites}sys.path[:0] = {paths!r}; del sys.argv[:2]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def launcher_python(
    module: str, *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[list[str], Path]:
    """argv that runs ``python -m module args`` isolated, and ``cwd`` (checked private).

    ``env``: the environment the child will get (its ``PYTHONPATH`` is what is passed
    on); the launcher's own by default.
    """
    _check_private(cwd)
    return isolated_argv(module, *args, env=env), cwd


def isolated_argv(module: str, *args: str, env: Mapping[str, str] | None = None) -> list[str]:
    """``python -I -m module args``, with what the launcher's Python found through
    ``PYTHONPATH`` (of ``env``) and the user's site directory passed explicitly."""
    paths = extra_paths((os.environ if env is None else env).get("PYTHONPATH", ""))
    user_site = site.getusersitepackages()
    # In use by this Python (an isolated one has it only if it was passed on to it).
    sites = f"site.addsitedir({user_site!r}); " if user_site in sys.path else ""
    if not paths and not sites:
        return [sys.executable, "-I", "-m", module, *args]
    boot = _BOOT.format(sites=sites, paths=paths)
    return [sys.executable, "-I", "-c", boot, "-m", module, *args]


def extra_paths(pythonpath: str) -> list[str]:
    """The absolute entries of a ``PYTHONPATH`` value, in order."""
    return [p for p in pythonpath.split(os.pathsep) if p and os.path.isabs(p)]


def _check_private(path: Path) -> None:
    """Ours and 0700 (or stricter): nobody else can put a module there."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot use {path} as a working directory: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path} is not a private directory of this user (0700): fix its mode")
