"""What the launcher runs or trusts, which no task may ever write.

Where machines share the launcher's files (local, Slurm) a program's work dir is bound
read-write into every node's container: the program writes its outputs there, as it
would run by hand.  So whatever a task writes there must never be imported or run on
the launcher's side, outside the container, with the user's cloud credentials and every
cluster's launch key.  Two rules keep it so:

* a work dir that holds, or lies inside, the launcher's own code or state is refused
  (:func:`check_workdir`): its interpreter or virtualenv, its site-packages, the
  ``syndeo`` package itself (an editable install runs straight from a checkout) and
  ``$SYNDEO_HOME`` (launch keys, cluster state);
* every Python the launcher or its watcher starts runs isolated (``-I``: neither the
  working directory nor ``PYTHON*`` variables on its path) in a private working
  directory.
"""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

import syndeo
from syndeo.core.errors import ConfigError
from syndeo.launcher.state import home


def protected_paths() -> dict[str, Path]:
    """What a task must never write, by what it is (resolved)."""
    paths: dict[str, Path] = {
        "the syndeo package the launcher runs": Path(syndeo.__file__).parent,
        "SYNDEO_HOME (launch keys, cluster state)": home(),
        "the launcher's Python": Path(sysconfig.get_paths()["stdlib"]),
    }
    if sys.prefix != sys.base_prefix:
        paths["the launcher's virtualenv"] = Path(sys.prefix)
    for i, packages in enumerate([*site.getsitepackages(), site.getusersitepackages()]):
        paths[f"the launcher's site-packages ({i})"] = Path(packages)
    return {what: p.expanduser().resolve() for what, p in paths.items()}


def _overlaps(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def check_workdir(workdir: Path) -> None:
    """Refuse (one line) a work dir that holds or lies inside what the launcher trusts,
    or holds the user's home (~/.ssh, cloud credentials: a project dir inside it is fine)."""
    workdir = workdir.resolve()
    home = Path.home().resolve()
    if workdir == home or workdir in home.parents:
        raise ConfigError(
            f"work dir {workdir} holds your home directory ({home}: ssh keys, cloud "
            "credentials), which every node's tasks could then read and write; run from "
            "your project's own directory or pass --workdir DIR"
        )
    for what, path in protected_paths().items():
        if _overlaps(workdir, path):
            where = "holds" if workdir in path.parents or workdir == path else "lies inside"
            raise ConfigError(
                f"work dir {workdir} {where} {what} ({path}): tasks may write their work "
                "dir, and nothing they write may run on this machine; run from your "
                "project's own directory or pass --workdir DIR"
            )
