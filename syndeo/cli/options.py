"""The one option table of both front ends.

``syndeo deploy|up|down|grow|shrink`` builds its argparse options from it, and
``invoke …`` (``tasks.py``) takes its help text from it; ``tests/launcher/test_front_ends.py``
checks that each invoke task has exactly these parameters.  An option has one name on
both command lines (``--instance-type``), whatever the keyword it becomes
(``vm_instance_type``, a :class:`~syndeo.launcher.config.DeployConfig` field).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Option:
    keyword: str  # what the verb takes: a DeployConfig field or the verb's own argument
    help: str
    type: Callable[[str], Any] | None = None  # None: text
    switch: bool = False  # --x turns it on
    negatable: bool = False  # --x / --no-x
    repeat: bool = False  # syndeo: repeat the option; invoke: comma-separated
    name: str | None = None  # on the command line, where it differs from the keyword
    required: bool = False
    default: Any = None

    @property
    def cli(self) -> str:
        """The option's name on both command lines, as a Python identifier."""
        return self.name or self.keyword

    @property
    def flag(self) -> str:
        return "--" + self.cli.replace("_", "-")


CONFIG = Option("config", "TOML file with settings; options override it")
NEW_CLUSTER_ID = Option("cluster_id", "the new cluster's id (default: generated)")
# down, grow, jobs, …: a cluster `up` started
CLUSTER_ID = Option("cluster_id", "the cluster's id (default: the only one up)")
CLUSTER = [
    Option("target", "local | slurm | ssh | aws | gcp | azure (default: local, or the config's)"),
    Option("nodes", "number of nodes (default 2)", int),
    Option("cpus_per_node", "CPUs each node offers to Ray (default 1)", int),
    Option("gpus_per_node", "GPUs each node offers to Ray (default 0)", int),
    Option("memory_mb_per_node", "memory each node offers to Ray, MiB (default: Ray's)", int),
    Option("object_store_mb_per_node", "object store per node, MiB (default: Ray's)", int),
    NEW_CLUSTER_ID,
    Option("rendezvous", "file:///dir, s3://bucket/prefix, gs://…, az://… (default per target)"),
    Option("join_timeout_s", "deadline for all nodes to join, seconds", float, name="join_timeout"),
    Option("container", "run every node in this Apptainer image (.sif)", Path),
    Option("workdir", "working directory of the workload (default: here)", Path),
    Option(
        "ssh_hosts",
        "ssh: comma-separated hosts, one node each (the first is the head)",
        name="hosts",
    ),
    Option("ssh_user", "ssh: login on every host (default: you)"),
    Option("ssh_key", "ssh: private key file (default: the ssh agent)"),
    Option("vm_instance_type", "aws/gcp/azure: VM type, e.g. c7i.2xlarge", name="instance_type"),
    Option("vm_region", "aws/gcp/azure: region (azure: location)", name="region"),
    Option(
        "vm_image",
        "aws/gcp/azure: the Packer-baked VM image (AMI id, GCP image, Azure id)",
        name="image",
    ),
    Option("vm_spot", "aws/gcp/azure: spot/preemptible VMs", switch=True, name="spot"),
    Option(
        "dashboard",
        "Ray's dashboard on the head's 127.0.0.1 (default: off for deploy, on for up)",
        negatable=True,
    ),
    Option(
        "tls",
        "Ray's TLS between all nodes and clients (a CA per launch; up prints the client's "
        "variables)",
        switch=True,
    ),
]
RUN = [
    Option(
        "run",
        'your own workload, e.g. "python train.py --epochs 3" (default: the '
        "benchmark); no secrets in it (it is recorded in scripts, state and deploy.json)",
    ),
    Option("results_dir", "where results are written (default ./results)", Path),
    Option(
        "bench_envs",
        "benchmark environment id(s) (syndeo: repeat; invoke: comma-separated)",
        repeat=True,
        name="env",
    ),
    Option("bench_mode", "benchmark mode: count | collect", name="mode"),
    Option("bench_repeats", "benchmark repeats", int, name="repeats"),
    Option("bench_samples_per_cpu", "benchmark samples per CPU", int, name="samples_per_cpu"),
]
GROUP = Option("group", "the node group ([[groups]] name)", required=True)

VERBS: dict[str, list[Option]] = {
    "deploy": [
        CONFIG,
        *CLUSTER,
        *RUN,
        Option(
            "keep",
            "leave the cluster up afterwards (`down` removes it)",
            switch=True,
            default=False,
        ),
        Option(
            "dry_run",
            "print what would be launched (scripts, tfvars, commands); start nothing",
            switch=True,
            default=False,
        ),
    ],
    "up": [CONFIG, *CLUSTER],
    # What deploy/up would get: checked before anything is created (syndeo.launcher.preflight).
    "check": [CONFIG, *CLUSTER],
    "down": [CLUSTER_ID],
    "grow": [
        CLUSTER_ID,
        GROUP,
        Option("nodes", "how many nodes to add (default 1)", int, default=1),
        Option("wait_s", "wait up to this many seconds until they joined", float),
        Option("hosts", "ssh: the new nodes' machines, comma-separated (one node each)"),
    ],
    "shrink": [
        CLUSTER_ID,
        GROUP,
        Option("nodes", "at least this many nodes (default: all added ones)", int),
    ],
}


# Jobs on an `up` cluster, through its rendezvous (the command follows `--`).
JOB = Option("job", "the job id `submit` printed (see `jobs`)", required=True)
FOLLOW = Option("follow", "keep showing the output until the job ends", switch=True, default=False)
VERBS.update(
    {
        "submit": [
            CLUSTER_ID,
            Option("workdir", "directory to upload and run in (default: here)", Path),
            Option("env", "NAME=VALUE for the job (repeatable)", repeat=True),
            Option("exclude", ".gitignore-style pattern not to upload (repeatable)", repeat=True),
            FOLLOW,
        ],
        "jobs": [CLUSTER_ID],
        "logs": [JOB, CLUSTER_ID, FOLLOW],
        "cancel": [JOB, CLUSTER_ID],
        "fetch": [
            JOB,
            CLUSTER_ID,
            Option("out", "where to put its outputs/ (default results/<cluster>/jobs/<job>)", Path),
        ],
    }
)


def invoke_help(verb: str) -> dict[str, str]:
    """``@task(help=…)`` of an invoke task: every option's help, by its invoke name."""
    return {o.cli: o.help for o in VERBS[verb]}


def add_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    for o in VERBS[verb]:
        kw: dict[str, Any] = {"dest": o.keyword, "help": o.help, "default": o.default}
        if o.switch:
            kw.update(action="store_const", const=True)
        elif o.negatable:
            kw.update(action=argparse.BooleanOptionalAction)
        elif o.repeat:
            kw.update(action="append")
        else:
            kw.update(type=o.type, required=o.required)
        parser.add_argument(o.flag, **kw)
