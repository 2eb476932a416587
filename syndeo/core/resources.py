"""The files Syndeo ships beside its code, found through the installed package.

``terraform/`` (the modules and deploy roots) and ``packer/`` (the image definitions and
their lock) live at the repository's root, where the design names them; the build maps
them into the wheel as ``syndeo/data/terraform`` and ``syndeo/data/packer``
(pyproject.toml, ``force-include``).  In a checkout those two names are links to the
root's directories, so the same lookup works there and in an installed package.

These files are read, never written: a command that must run a tool inside one of them
(Terraform writes its lock file into its working directory) works on a copy in the
cluster's own state directory (:func:`copy_tree`).  What Syndeo writes for a user lives
in :func:`user_dir`.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Literal

from syndeo.core.errors import SyndeoError

Shipped = Literal["terraform", "packer"]
# Not needed to run anything: documentation, Terraform's own tests and examples, and what
# a Terraform run in a checkout may have left behind.
_NOT_RUN = ("*.md", "tests", "examples", ".terraform", "*.tfstate", "*.tfstate.*", "__pycache__")


def user_dir() -> Path:
    """Where Syndeo keeps a user's state (clusters, built images): ``$SYNDEO_HOME``,
    else ``~/.syndeo``."""
    return Path(os.environ.get("SYNDEO_HOME") or Path.home() / ".syndeo").expanduser()


class PackageDataError(SyndeoError):
    """A file the package should carry is missing: a broken or partial install."""


def data_dir(name: Shipped) -> Path:
    """The shipped directory ``name``, read only."""
    found = resources.files("syndeo") / "data" / name
    # A wheel installs as plain files; a zip import would need copying out first, which
    # no supported install does.
    path = Path(str(found))
    if not path.is_dir():
        raise PackageDataError(
            f"{name}/ is missing from the syndeo package at {path}: reinstall syndeo "
            "(pip install --force-reinstall syndeo-*.whl)"
        )
    return path


def copy_tree(src: Path, dest: Path, parts: tuple[str, ...]) -> Path:
    """Copy ``parts`` of a shipped directory ``src`` (each a directory under it, e.g.
    ``aws`` and ``modules`` of ``terraform/``) to ``dest``, keeping their relative layout
    (modules refer to each other by ``../``), and return ``dest``.  A copy already there
    is replaced: it holds the package's files, never the user's."""
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for part in parts:
        shutil.rmtree(dest / part, ignore_errors=True)
        shutil.copytree(src / part, dest / part, ignore=shutil.ignore_patterns(*_NOT_RUN))
    return dest
