"""Every user verb, declared once: its help, its options and the function that does it.

``syndeo`` builds its sub-commands from this table (:mod:`syndeo.cli.main`) and the
repository's ``tasks.py`` builds its invoke tasks from it (:mod:`syndeo.cli.verb_tasks`),
so both command lines take the same verbs with the same options and help.  A verb's
function is named by its module and name and imported only when the verb runs: building
the command line imports no cloud SDK and not Ray.

Help text here is what a user reads in a terminal: plain words, no markup.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syndeo.cli.options import (
    CLUSTER,
    CLUSTER_ID,
    CONFIG,
    FOLLOW,
    GROUP,
    JOB,
    RUN,
    UP,
    Option,
    from_settings,
)
from syndeo.launcher.config import BenchSettings, DeployConfig


@dataclass(frozen=True)
class Verb:
    name: str
    help: str  # one line: the verb in `syndeo --help` and its own help's first line
    run: str  # "module:function", called with each option's keyword
    options: list[Option]
    # Takes a command after `--` (syndeo: the rest of the line; invoke: its remainder).
    command: bool = False
    # invoke only: what its help shows as the default where the verb decides it.
    shown_defaults: dict[str, Any] = field(default_factory=dict)

    def function(self) -> Callable[..., Any]:
        module, _, name = self.run.partition(":")
        fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return fn


def _switch(keyword: str, help: str, name: str | None = None) -> Option:
    return Option(keyword, help, switch=True, name=name, default=False)


_VERBS = "syndeo.cli.verbs:"
_JOBS = "syndeo.cli.jobverbs:"
_TOOLS = "syndeo.cli.tools:"

CLUSTER_VERBS = [
    Verb(
        "deploy",
        "bring a cluster up, run the workload, collect its results, tear the cluster down",
        _VERBS + "run_deploy",
        [
            CONFIG,
            *CLUSTER,
            *RUN,
            _switch("keep", "leave the cluster up afterwards (syndeo down removes it)"),
            _switch("dry_run", "print what would be launched (scripts, settings); start nothing"),
        ],
    ),
    Verb(
        "up",
        "bring a cluster up and leave it serving; prints how to connect and submit jobs",
        _VERBS + "run_up",
        [CONFIG, *CLUSTER, *UP],
        shown_defaults={"dashboard": True},
    ),
    Verb(
        "check",
        "check that deploy or up can start (settings, credentials, image); creates nothing",
        _VERBS + "run_check",
        [CONFIG, *CLUSTER, *UP],
    ),
    Verb("down", "tear down a cluster started with up", _VERBS + "run_down", [CLUSTER_ID]),
    # The watcher of an up cluster, started again after it died (syndeo/launcher/watch.py).
    Verb(
        "watch",
        "start the watcher of a cluster started with up again after it died (autoscaling, "
        "autostop, replacements)",
        _VERBS + "run_watch",
        [CLUSTER_ID],
    ),
    Verb(
        "grow",
        "add nodes of a node group to a cluster started with up",
        _VERBS + "run_grow",
        [
            CLUSTER_ID,
            GROUP,
            Option("nodes", "how many nodes to add (default 1)", int, default=1),
            Option("wait_s", "wait up to this many seconds until they joined", float),
            Option("hosts", "ssh: the new nodes' machines, comma-separated (one node each)"),
        ],
    ),
    Verb(
        "shrink",
        "remove a node group's added nodes (never the head) from a cluster started with up",
        _VERBS + "run_shrink",
        [CLUSTER_ID, GROUP, Option("nodes", "at least this many nodes (default: all added)", int)],
    ),
    Verb(
        "status",
        "your clusters on this machine: nodes, state, jobs, idle time, autostop, cost",
        "syndeo.cli.status:run_status",
        [
            Option("cluster_id", "only this cluster (default: all of them)"),
            _switch("as_json", "a JSON list (stable keys) instead of the table", name="json"),
        ],
    ),
]

JOB_VERBS = [
    Verb(
        "submit",
        "run a program on a cluster started with up: syndeo submit [options] -- CMD ...",
        _JOBS + "run_submit",
        [
            CLUSTER_ID,
            Option("workdir", "directory to upload and run in (default: here)", Path),
            Option("env", "NAME=VALUE for the job (repeatable)", repeat=True, split=False),
            Option(
                "exclude",
                "a .gitignore-style pattern not to upload (repeatable)",
                repeat=True,
                split=False,
            ),
            *from_settings(DeployConfig, "requirements"),
            FOLLOW,
        ],
        command=True,
    ),
    Verb("jobs", "the jobs of a cluster started with up", _JOBS + "run_jobs", [CLUSTER_ID]),
    Verb(
        "logs",
        "a job's output (--follow: until it ends)",
        _JOBS + "run_logs",
        [JOB, CLUSTER_ID, FOLLOW],
    ),
    Verb("cancel", "cancel a job", _JOBS + "run_cancel", [JOB, CLUSTER_ID]),
    Verb(
        "fetch",
        "download the files a job left in its outputs/ directory",
        _JOBS + "run_fetch",
        [
            JOB,
            CLUSTER_ID,
            Option("out", "where to put them (default results/CLUSTER/jobs/JOB)", Path),
        ],
    ),
]

_PLAN = "plan:"  # compare's options that only --plan reads
COMPARE = Verb(
    "compare",
    "throughput and cost of every measured run, cheapest first; --plan predicts a run",
    "syndeo.cli.compare:run_compare",
    [
        Option("results", "directory of results (deploy.json and result.json per run)"),
        Option("catalog", "a price CSV that overrides or extends the shipped catalog"),
        Option("out", "where report.md, report.html and the plots (or plan.md) go"),
        Option("config", "a TOML file with [cost.onprem] settings"),
        _switch("plan", "predict cost and wall time for --steps of --env instead"),
        Option("steps", f"{_PLAN} environment steps to collect (default 1e9)"),
        Option("env", f"{_PLAN} the env id, e.g. Humanoid-v5"),
        Option("mode", f"{_PLAN} count or collect (default: count if measured)"),
        Option("target", f"{_PLAN} targets, comma-separated (default: measured ones and clouds)"),
        Option("basis", f"{_PLAN} the measured target unmeasured instance types scale from"),
        Option("sizes", f"{_PLAN} node or instance counts, comma-separated (default 1,2,4,8,16)"),
    ],
    shown_defaults={"results": "results", "out": "compare-report"},
)

BENCH = Verb(
    "bench",
    "measure rollout throughput (the paper's benchmark) here, or on a cluster with --target",
    _TOOLS + "run_bench",
    [
        Option("target", "run on a cluster of this target (default: here, a private Ray)"),
        *from_settings(DeployConfig, "nodes", "cpus_per_node", "container", "results_dir"),
        *from_settings(
            BenchSettings, "envs", "mode", "repeats", "samples_per_cpu", prefix="bench_"
        ),
        Option("protocol", "paper (a fixed sample count) or steady (a fixed time per repeat)"),
        Option("envs_per_actor", "vectorised environments per actor", int),
        Option("workers", "actor counts to sweep, e.g. 1,2 (default: one per CPU)"),
        _switch("rllib", "also measure the RLlib PPO sampling baseline (needs syndeo[rllib])"),
        Option(
            "local_limit",
            "also measure one process's own limit, for the ratio (default: on)",
            negatable=True,
        ),
        Option("out", "result JSON here (default results/bench-TIME.json)", Path),
    ],
    shown_defaults={"local_limit": True},
)

REPORT = Verb(
    "report",
    "tables, plots and report.md from a directory of benchmark results",
    _TOOLS + "run_report",
    [
        Option("results_dir", "directory of result JSONs (default results)", Path),
        Option("out", "directory for the report (default bench-report)", Path),
    ],
)

BUILD = Verb(
    "build",
    "build the Syndeo Apptainer image (a no-op when nothing changed)",
    _TOOLS + "run_build",
    [
        Option("base", "debootstrap (a Debian mirror; default) or docker (python slim)"),
        Option(
            "output",
            "SIF path (default syndeo-BASE.sif in .syndeo/image of the checkout, or in "
            "~/.syndeo/image with --syndeo-wheel)",
            Path,
        ),
        _switch("force", "rebuild even if nothing changed"),
        Option(
            "extra_ca", "a PEM bundle to trust inside the image (a TLS-intercepting proxy)", Path
        ),
        _switch("no_packer", "call apptainer directly instead of through Packer"),
        Option("compression", "gzip (default; mounts everywhere) or lz4 (faster, larger)"),
        Option("base_image", "docker: the base by digest, e.g. python:3.11-slim@sha256:..."),
        Option(
            "syndeo_wheel",
            "the syndeo wheel the image gets (the one you installed syndeo from); needed "
            "outside a checkout, where there is no source to build it from",
            Path,
        ),
    ],
)

VERBS: dict[str, Verb] = {
    v.name: v for v in [*CLUSTER_VERBS, *JOB_VERBS, COMPARE, BENCH, REPORT, BUILD]
}


def invoke_help(verb: str) -> dict[str, str]:
    """``@task(help=…)`` of an invoke task: every option's help, by its invoke name."""
    return {o.cli: o.help for o in VERBS[verb].options}


def add_arguments(parser: argparse.ArgumentParser, verb: Verb) -> None:
    for o in verb.options:
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
    if verb.command:
        parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
