"""Checks of a deployment's workload that the launcher makes before anything starts.

A typo in an environment id must not cost a cluster's start-up (or a Slurm queue
wait) to find: everything that can be known on the launcher is checked here, in
well under a second -- never importing Ray or MuJoCo.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from syndeo.core.errors import ConfigError, SyndeoError, WorkloadError
from syndeo.launcher.config import DeployConfig

BENCH_PREFIX = ["-m", "syndeo.bench", "run"]


def check_workload(cfg: DeployConfig) -> None:
    """ConfigError/WorkloadError (one line) if the workload cannot start as configured."""
    argv = shlex.split(cfg.workload_command())
    if argv[1:4] == BENCH_PREFIX:
        _check_bench(argv[4:])
        return
    if cfg.target == "local" and cfg.container is None:
        _check_local_executable(argv[0], (cfg.workdir or Path.cwd()).resolve())


def _check_bench(args: list[str]) -> None:
    from syndeo.bench.cli import check_run_args

    try:
        check_run_args(args)
    except SyndeoError as exc:
        raise ConfigError(f"benchmark settings: {exc}") from None


def _check_local_executable(name: str, workdir: Path) -> None:
    """What the node will exec, resolved the way the node resolves it.

    A bare local node runs this interpreter, and its workload's PATH starts with
    this interpreter's bin directory (so ``python`` is the one that has Ray).
    """
    if "/" in name:
        path = workdir / name
        if not path.is_file():
            raise WorkloadError(f"workload command not found: {name!r}", exit_code=127)
        if not os.access(path, os.X_OK):
            raise WorkloadError(f"workload command {name!r} is not executable", exit_code=126)
        return
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if shutil.which(name, path=search) is None:
        raise WorkloadError(f"workload command not found: {name!r}", exit_code=127)


def check_deployment(cfg: DeployConfig) -> list[str]:
    """``check``: whether a deploy/up of ``cfg`` can start, without creating anything.

    Runs the same hooks a launch runs first -- the target's local checks
    (:meth:`Target.check`), a cloud's credential, image and instance-type checks
    (:meth:`CloudTarget.check_credentials`) -- and reaches a rendezvous the user named.
    Returns one line per passed check; the first failure raises its one-line error.
    """
    from syndeo.launcher import autoscale
    from syndeo.launcher.spec import ClusterSpec
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.base import new_cluster_id
    from syndeo.launcher.targets.cloud import CloudTarget
    from syndeo.rendezvous import open_rendezvous

    target = get_target(cfg)
    if autoscale.follows_demand(cfg) or cfg.autostop_s is not None or cfg.autostop_grace_s:
        autoscale.check(cfg, "up", type(target))  # settings only `up` takes
    cluster_id = cfg.cluster_id or new_cluster_id(cfg.target)
    uri = cfg.rendezvous or target.default_rendezvous()
    spec = ClusterSpec.from_config(cfg, uri, cluster_id)
    target.check(spec)
    found = [f"{cfg.target}: settings ok ({spec.nodes} node(s), {spec.cpus} CPU(s) each)"]
    if isinstance(target, CloudTarget):
        found.append(f"{cfg.target}: {target.check_credentials()}")
    if target.creates_rendezvous(uri):
        found.append(f"rendezvous: a new private bucket is made with the cluster ({uri})")
    elif uri.startswith("file://") and not Path(uri.removeprefix("file://")).exists():
        found.append(f"rendezvous: {uri} does not exist yet (deploy creates it, 0700)")
    else:
        open_rendezvous(uri, cluster_id).check()
        found.append(f"rendezvous: {uri} reachable")
    return found
