"""How a launcher turns "run ``syndeo node`` with these variables" into a process.

Bare: the current interpreter runs ``python -m syndeo node`` with the variables
added to the environment.  In an image: ``apptainer exec --containall --cleanenv``
with every variable passed explicitly and each bind mounted at the same path, so
paths (scratch, a file:// rendezvous) mean the same inside and outside.

Variables go in as ``APPTAINERENV_<NAME>`` in apptainer's own environment rather than
``--env NAME=VALUE``: ``--env`` splits values at commas (a ``SYNDEO_RUN`` command
may contain them) and would show secrets in ``ps``.  ``--cleanenv`` still drops the
rest of the host environment, so only the variables given here reach the node.

Apptainer never runs as root here (and cannot on our VMs: CAP_SYS_RESOURCE is
missing): as root, a launcher must name an unprivileged ``user`` to run the node as.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from syndeo.core import gpus
from syndeo.core.errors import ImageError
from syndeo.launcher.pyspawn import isolated_argv

# Host variables of these families would leak into the container or change how
# apptainer runs it: only ours may set them.
_APPTAINER_ENV_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_", "APPTAINER_BIND", "SINGULARITY_BIND")


def node_command(
    image: Path | None,
    env: Mapping[str, str],
    binds: Sequence[Path],
    *,
    user: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """argv and process environment that run ``syndeo node`` configured by ``env``.

    ``user``: run as this unprivileged user (via ``runuser``); required when the
    caller is root and ``image`` is set; ignored for bare runs and non-root callers
    (who already are unprivileged).
    """
    if image is None:
        proc_env = {**os.environ, **env}
        # Isolated: never a `syndeo` of the directory it starts in (the work dir).
        return isolated_argv("syndeo", "node", env=proc_env), proc_env
    return container_command(image, env, binds, ["syndeo", "node"], user=user)


def container_command(
    image: Path,
    env: Mapping[str, str],
    binds: Sequence[Path],
    command: Sequence[str],
    *,
    user: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``apptainer exec`` of ``command`` in ``image`` with exactly ``env`` and ``binds``."""
    from syndeo.image.manifest import (
        check_sif,  # keeps `import syndeo.launcher.command` light for bare runs
    )

    sif = check_sif(image)
    if os.geteuid() == 0 and not user:
        raise ImageError(
            "refusing to run the container as root: run syndeo as an unprivileged user, "
            "or as root name one to run nodes as (e.g. syndeo-ci)"
        )
    if user == "root":
        raise ImageError("the container user must be unprivileged, not root")
    argv = ["apptainer", "exec"]
    if int(env.get("SYNDEO_GPUS") or 0) > 0:
        # The driver libraries and devices (--nv, --rocm); which devices the node may use
        # is its vendor's variable, passed in below like every variable (syndeo/core/gpus.py).
        argv.append(gpus.vendor(env.get("SYNDEO_GPU_VENDOR") or None).apptainer_flag)
    argv += ["--containall", "--cleanenv"]
    seen: set[str] = set()
    for bind in binds:
        path = str(Path(bind).resolve())
        if path not in seen:
            seen.add(path)
            # Same path inside and out: scratch dirs and file:// URIs need no translation.
            argv += ["--bind", f"{path}:{path}"]
    workdir = env.get("SYNDEO_WORKDIR")
    if workdir and str(Path(workdir).resolve()) in seen:
        argv += ["--pwd", str(Path(workdir).resolve())]
    argv += [str(sif), *command]
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith(_APPTAINER_ENV_PREFIXES)}
    proc_env.update({f"APPTAINERENV_{name}": value for name, value in env.items()})
    if user and os.geteuid() == 0:
        # runuser keeps the environment (incl. APPTAINERENV_*) but not root's HOME, where
        # apptainer would otherwise try to keep its cache.
        home = os.path.expanduser(f"~{user}")
        argv = ["runuser", "-u", user, "--", "env", f"HOME={home}", *argv]
    return argv, proc_env
