"""How a launcher turns "run ``syndeo node`` with these variables" into a process.

Bare: the current interpreter runs ``python -m syndeo node`` with the variables
added to the environment.  In an image: ``apptainer exec --containall --cleanenv``
with every variable passed explicitly and each bind mounted at the same path, so
paths (scratch, a file:// rendezvous) mean the same inside and outside.

The node's variables never enter the container's environment: with ``--containall``
Apptainer's init shim, PID 1 of the container, keeps that environment (as JSON, in its
``/proc/1/environ``) where every task of the same user can read it -- the launch key and
the store's credentials among it.  A small host-side ``bash`` step instead writes them to
a pipe on fd 3, which the container inherits, and unsets them before it execs
``apptainer``; the container's environment holds only ``SYNDEO_ENV_FD=3``, and the node
reads the pipe to its end before anything else runs in the container (so by the time a
task could open ``/proc/1/fd/3`` the pipe is empty).  ``--cleanenv`` drops the rest of
the host environment.  (``--env NAME=VALUE`` would split values at commas and show
them in ``ps``.)

Apptainer never runs as root here (and cannot on our VMs: CAP_SYS_RESOURCE is
missing): as root, a launcher must name an unprivileged ``user`` to run the node as.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from syndeo.core import gpus
from syndeo.core.errors import ImageError
from syndeo.core.nodeconfig import ENV_FD, ENV_FD_VAR
from syndeo.launcher.pyspawn import isolated_argv

# Host variables of these families would leak into the container or change how
# apptainer runs it: only ours may set them.
_APPTAINER_ENV_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_", "APPTAINER_BIND", "SINGULARITY_BIND")

# ``bash -c PIPE_ENV syndeo-env NAME... -- COMMAND...``: the named variables (set ones
# only) as NUL-ended NAME=value entries on fd ENV_FD (syndeo.core.nodeconfig.encode_env's
# format), then unset, then COMMAND.  A pipe: nothing on disk, and once the node has read
# it nothing is left in it.
PIPE_ENV = (
    'names=(); while [ "$1" != -- ]; do names+=("$1"); shift; done; shift; '
    f'exec {ENV_FD}< <(for n in "${{names[@]}}"; do '
    '[ -z "${!n+x}" ] || printf "%s=%s\\0" "$n" "${!n}"; done); '
    'unset "${names[@]}"; exec "$@"'
)


def node_command(
    image: Path | None,
    env: Mapping[str, str],
    binds: Sequence[Path],
    *,
    user: str | None = None,
    read_only: Sequence[Path] = (),
) -> tuple[list[str], dict[str, str]]:
    """argv and process environment that run ``syndeo node`` configured by ``env``.

    ``user``: run as this unprivileged user (via ``runuser``); required when the
    caller is root and ``image`` is set; ignored for bare runs and non-root callers
    (who already are unprivileged).  ``read_only``: binds the node only reads.
    """
    if image is None:
        proc_env = {**os.environ, **env}
        # Isolated: never a `syndeo` of the directory it starts in (the work dir).
        return isolated_argv("syndeo", "node", env=proc_env), proc_env
    return container_command(image, env, binds, ["syndeo", "node"], user=user, read_only=read_only)


def container_command(
    image: Path,
    env: Mapping[str, str],
    binds: Sequence[Path],
    command: Sequence[str],
    *,
    user: str | None = None,
    read_only: Sequence[Path] = (),
) -> tuple[list[str], dict[str, str]]:
    """``apptainer exec`` of ``command`` in ``image`` with exactly ``env`` and ``binds``
    (each at the same path inside; ``read_only`` ones not writable there)."""
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
    for bind in read_only:
        path = str(Path(bind).resolve())
        if path not in seen:
            seen.add(path)
            argv += ["--bind", f"{path}:{path}:ro"]
    workdir = env.get("SYNDEO_WORKDIR")
    if workdir and str(Path(workdir).resolve()) in seen:
        argv += ["--pwd", str(Path(workdir).resolve())]
    argv += [str(sif), *command]
    # The devices a node may use are no secret, and the container's own environment is
    # where a vendor's runtime looks for them (as every target passes them).
    devices = {n for v in gpus.VENDORS.values() for n in v.passed}
    piped = [name for name in env if name not in devices]
    argv = ["bash", "-c", PIPE_ENV, "syndeo-env", *piped, "--", *argv]
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith(_APPTAINER_ENV_PREFIXES)}
    proc_env.update(env)
    proc_env.update({f"APPTAINERENV_{n}": v for n, v in env.items() if n in devices})
    proc_env[f"APPTAINERENV_{ENV_FD_VAR}"] = str(ENV_FD)
    if user and os.geteuid() == 0:
        # runuser keeps the environment (incl. APPTAINERENV_*) but not root's HOME, where
        # apptainer would otherwise try to keep its cache.
        home = os.path.expanduser(f"~{user}")
        argv = ["runuser", "-u", user, "--", "env", f"HOME={home}", *argv]
    return argv, proc_env
