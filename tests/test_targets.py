"""The design rule, enforced: every target is the same few verbs and none brings up Ray.

Node bring-up, Ray start, readiness, auth and teardown live in the node runtime
(``syndeo.node``); a target whose code or templates mention them has grown its own copy.
That no target imports the node runtime is the layer contract's (``test_layout.py``).
What a target would run is checked by running it: every node of every target starts
the one node command with the node settings the launcher meant, and nothing else starts.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from syndeo.core.nodeconfig import NodeSettings
from syndeo.core.processes import wait_gone
from syndeo.launcher.command import node_command
from syndeo.launcher.config import DeployConfig, load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets import TARGETS, Target, get_target
from syndeo.launcher.targets.cloud import CloudTarget
from syndeo.launcher.targets.terraform import TerraformTarget, terraform_root
from tests.support import hcl

VERBS = ("default_rendezvous", "script", "launch", "poll", "stop")
# What only the per-node command may do.
FORBIDDEN = ("ray start", "syndeo.node", "RAY_AUTH", "ray.init", "--head")
TARGETS_DIR = Path(importlib.import_module("syndeo.launcher.targets").__file__ or "").parent


def _target_files(cls: type) -> list[Path]:
    """The code and templates a target runs from: its module, or its whole package when
    it has one (Slurm: target, render, jobs, settings and the sbatch template)."""
    path = Path(inspect.getfile(cls))
    if path.parent == TARGETS_DIR:
        return [path]
    return sorted([*path.parent.rglob("*.py"), *path.parent.rglob("*.j2")])


def _calls(path: Path) -> set[str]:
    """Names of every function or method ``path`` calls (code only, never docstrings)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_has_the_common_verbs_and_no_node_logic(name: str) -> None:
    module_name, class_name = TARGETS[name]
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name)
    assert issubclass(cls, Target) and cls.name == name
    assert not inspect.isabstract(cls), f"{class_name} leaves verbs unimplemented"
    public = {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    assert set(VERBS) <= public | {n for n in VERBS if hasattr(cls, n)}
    # grow/shrink: declared on Target (refusing); a target that can resize overrides them.
    optional = {
        "describe",
        "summary",
        "creates_rendezvous",
        "grow",
        "shrink",
        "added",
        "observe",
        "can_grow",
        "wait",
        "hurry",
        "check",
        "replace",
        "start_watcher",
        "stop_watcher",
    }
    if issubclass(cls, TerraformTarget):
        optional |= VM_HOOKS  # what a Terraform-backed target may add, and nothing else
    if issubclass(cls, CloudTarget):
        optional |= CLOUD_HOOKS
    extra = public - set(VERBS) - optional
    assert not extra, f"{class_name} adds verbs other targets lack: {sorted(extra)}"
    files = _target_files(cls)
    for path in files:
        text = path.read_text()
        for needle in FORBIDDEN:
            assert needle not in text, f"{path} contains {needle!r}: node logic is the node's"
    # Every target ends in the one per-node command, built in one place: in Python
    # (syndeo.launcher.command.node_command, called), or for VM targets in
    # terraform/modules/node.
    if issubclass(cls, TerraformTarget):
        _assert_renders_through_node_module(cls.module)
    else:
        called = set().union(*(_calls(p) for p in files if p.suffix == ".py"))
        assert "node_command" in called, f"{class_name} never calls command.node_command"


VM_HOOKS = {
    "machine_vars",
    "node_vars",
    "machine_summary",
    "prepare",
    "grown_nodes",
    "grow_overrides",
    "leaks",
    "rendezvous_env",
    "machine_gone",
    "machines_ended",
    "before_destroy",
}
CLOUD_HOOKS = {"check_credentials", "cloud_vars", "list_machines"}


def _assert_renders_through_node_module(module: str) -> None:
    root = terraform_root() / module
    tf = "\n".join(p.read_text() for p in sorted(root.glob("*.tf")))
    assert 'source = "../modules/node"' in " ".join(tf.split()), (
        f"terraform/{module} must call ../modules/node"
    )
    for path in [*root.glob("*.tf"), *root.glob("*.sh"), *root.glob("*.tftpl")]:
        text = path.read_text()
        for needle in ("ray start", "SYNDEO_RANK=", "node.env.tftpl"):
            assert needle not in text, f"{path} renders node settings itself ({needle!r})"


def test_vm_hooks_are_the_ones_vm_target_defines() -> None:
    defined = {n for n, v in vars(TerraformTarget).items() if callable(v) and not n.startswith("_")}
    assert (
        defined
        - set(VERBS)
        - {"describe", "summary", "tfvars", "check", "grow", "shrink", "added", "observe"}
        - {"replace"}
        == VM_HOOKS
    )
    cloud = {n for n, v in vars(CloudTarget).items() if callable(v) and not n.startswith("_")}
    assert cloud - set(VERBS) - VM_HOOKS - {"creates_rendezvous", "summary"} == CLOUD_HOOKS


def test_importing_syndeo_loads_no_cloud_sdk_and_no_ray() -> None:
    code = (
        "import sys, syndeo, syndeo.cli.main, syndeo.launcher.deploy, syndeo.rendezvous;"
        "import syndeo.launcher.targets;"
        "bad=[m for m in sys.modules if m.split('.')[0] in "
        "('boto3','botocore','google','azure','ray')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_a_target_loads_no_node_runtime() -> None:
    modules = sorted({module for module, _ in TARGETS.values()})
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}];"
        "print([m for m in sys.modules if m.startswith('syndeo.node') or m.split('.')[0] == 'ray'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- behaviour
# What a target renders is run (Slurm's job script, a VM's start command) or read
# word by word (the local dry run), with stand-ins that record how they were started.
# Every node must start the one node command, once, and nothing else may start: a
# template that ran `ray start` or a Python of its own would be recorded too.
RECORDER = f"""#!{sys.executable}
import json, os, sys
piped = {{}}
if os.environ.get("APPTAINERENV_SYNDEO_ENV_FD"):
    # What a container's node reads on its pipe (syndeo.core.nodeconfig.load_env_fd).
    with os.fdopen(int(os.environ["APPTAINERENV_SYNDEO_ENV_FD"]), "rb") as fh:
        piped = dict(e.decode().split("=", 1) for e in fh.read().split(b"\\0") if e)
record = os.environ.get("SYNDEO_TEST_RECORD") or piped["SYNDEO_TEST_RECORD"]
path = os.path.join(record, f"{{os.getpid()}}.json")
with open(path + ".tmp", "w") as fh:
    json.dump({{"argv": sys.argv, "env": dict(os.environ), "piped": piped}}, fh)
os.replace(path + ".tmp", path)
"""
STANDINS = ("node-python", "python", "python3", "ray", "apptainer", "singularity")
SRUN = """#!/bin/bash
# srun as the job script calls it: --ntasks=N ... COMMAND; each task in turn.
n=1
while [ $# -gt 0 ]; do
  case "$1" in --ntasks=*) n=${1#--ntasks=}; shift ;; --*) shift ;; *) break ;; esac
done
i=0
while [ "$i" -lt "$n" ]; do SLURM_PROCID=$i "$@" || exit $?; i=$((i + 1)); done
"""
NODES = 3
RUN = "python work.py --x=1,2"
SIF_IN_IMAGE = "/opt/syndeo/syndeo.sif"  # the VM images' SIF (terraform/<cloud> image_path)
CLOUD_MACHINE = {
    "aws": {"instance_type": "c7i.2xlarge", "region": "us-east-1", "image": "ami-0abc"},
    "gcp": {
        "instance_type": "c3-standard-8",
        "region": "us-central1",
        "project": "p",
        "image": "projects/p/global/images/syndeo",
    },
    "azure": {
        "instance_type": "Standard_D8s_v5",
        "region": "westeurope",
        "image": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/x",
    },
    "alibaba": {
        "instance_type": "ecs.g7.2xlarge",
        "region": "cn-hangzhou",
        "image": "m-bp1g7004ksh0oeuc1234",
    },
}


def _standins(tmp_path: Path) -> tuple[Path, Path]:
    bindir, record = tmp_path / "bin", tmp_path / "record"
    bindir.mkdir()
    record.mkdir()
    for name in (*STANDINS, "srun"):
        (bindir / name).write_text(SRUN if name == "srun" else RECORDER)
        (bindir / name).chmod(0o755)
    return bindir, record


def _records(record: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(record.glob("*.json"))]


def _wait_gone(pid_file: Path) -> None:
    """A detached node (its own process group, pid file by its start command) has ended.

    Ended means exited, as :func:`wait_gone` counts it: a zombie counts.  Its parent, the
    start command, has exited, so PID 1 reaps it, when it pleases: this machine's took
    about 1.8 s a node, which ``killpg(pgid, 0)`` waited out (22 s of the quick tier)."""
    pgid = int(pid_file.read_text())
    group = []
    for proc in psutil.process_iter():
        with contextlib.suppress(OSError):
            if os.getpgid(proc.pid) == pgid:
                group.append(proc)
    left = wait_gone(group, 30)
    assert not left, f"process group {pgid} still runs: {left}"


def _config(name: str, tmp_path: Path, bindir: Path) -> DeployConfig:
    common: dict[str, Any] = {"target": name, "nodes": NODES, "run": RUN}
    if name == "slurm":
        common["slurm"] = {"python": str(bindir / "node-python")}
    elif name == "ssh":
        hosts = [f"10.77.0.{i}" for i in range(1, NODES + 1)]
        key = tmp_path / "hostkey"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        pub = " ".join(key.with_suffix(".pub").read_text().split()[:2])
        known = tmp_path / "known_hosts"
        known.write_text("".join(f"{h} {pub}\n" for h in hosts))
        common["ssh"] = {"hosts": hosts, "known_hosts": str(known), "python": "python3"}
    elif name in CLOUD_MACHINE:
        common[name] = CLOUD_MACHINE[name]
    return load_config(**common)


def _node_env(record: dict[str, Any]) -> dict[str, str]:
    """The node's own variables: as set, or as a containerised node gets them (on its
    pipe, and the few apptainer passes into the container)."""
    env: dict[str, str] = record["env"]
    if Path(record["argv"][0]).name == "apptainer":
        # Nothing of the node's own in the container's environment but the pipe's number.
        passed = {
            k.removeprefix("APPTAINERENV_"): v
            for k, v in env.items()
            if k.startswith("APPTAINERENV_")
        }
        assert not {k for k in passed if k.startswith("SYNDEO_")} - {"SYNDEO_ENV_FD"}, passed
        passed.pop("SYNDEO_ENV_FD")
        return {**passed, **record["piped"]}
    return env


def _started(
    name: str, tmp_path: Path, bindir: Path, record: Path, atexit_dirs: list[Path]
) -> tuple[ClusterSpec, list[dict[str, Any]]]:
    """Render what ``name`` would run for a 3-node cluster and run it with the stand-ins;
    returns the cluster's spec and what was started (argv and environment of each)."""
    cfg = _config(name, tmp_path, bindir)
    target = get_target(cfg)
    # A cloud meets in the bucket it creates; the others in a directory.
    uri = target.default_rendezvous() if name in CLOUD_MACHINE else (tmp_path / "rdv").as_uri()
    spec = ClusterSpec.from_config(cfg, uri, "onecmd")
    path = f"{bindir}:/usr/bin:/bin"
    if name == "local":
        # Its dry run is the script it runs (argv and environment, word by word).
        started = []
        for line in target.script(spec).splitlines():
            if line.startswith("#") or line == "wait":
                continue
            words = shlex.split(line)
            assert words[0] == "env" and words[-2:] == ["2>&1", "&"], line
            words = words[1 : words.index(">")]
            env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_][A-Z0-9_]*=", w))
            # The launch key is never in a script shown; a launch passes it in the
            # node's process environment (checked in tests/launcher/test_launch_key.py).
            assert "SYNDEO_LAUNCH_KEY" not in env
            assert spec.launch_key is not None
            started.append(
                {"argv": words[len(env) :], "env": {**env, "SYNDEO_LAUNCH_KEY": spec.launch_key}}
            )
        return spec, started
    if name == "slurm":
        (Path(os.environ["SYNDEO_HOME"]) / "slurm" / "jobs" / "onecmd").mkdir(parents=True)
        job = tmp_path / "job.sbatch"
        job.write_text(target.script(spec))
        env = {
            "PATH": path,
            "SYNDEO_TEST_RECORD": str(record),
            "SLURM_JOB_ID": "77",
            "SLURM_JOB_NODELIST": "n[1-3]",
            "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1",
            # What the target hands sbatch in its environment (the script names it only).
            "SYNDEO_LAUNCH_KEY": str(spec.launch_key),
        }
        out = subprocess.run(
            ["bash", str(job)], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return spec, _records(record)  # srun ran every task to its end
    assert isinstance(target, TerraformTarget)
    tfvars = target.tfvars(spec)
    inputs = hcl.node_module_inputs(target.module, tfvars)
    if name == "ssh":  # on this machine: the host's interpreter and dir are stand-ins
        assert tfvars["image"] is None  # terraform/ssh: image_path null, a bare node
        inputs.update(
            python=str(bindir / "node-python"), host_dir=str(tmp_path / "host"), image_path=None
        )
    else:
        assert inputs["image_path"] == SIF_IN_IMAGE
        inputs["host_dir"] = str(tmp_path / "host")
    names = ("env", "env_files", "user_data", "start_commands", "scratch_dirs")
    out = hcl.render_node_module(tmp_path / "tf", inputs, names)
    assert len(out["start_commands"]) == NODES
    # The start script makes each node's scratch dir below the cluster's own
    # /var/tmp/sy-<hash> (no stop runs here): removed with the test's other files.
    made = Path(out["scratch_dirs"][0]).parent
    assert made.parent == Path("/var/tmp") and made.name.startswith("sy-"), made
    atexit_dirs.append(made)
    for rank, command in enumerate(out["start_commands"]):
        if name != "ssh":
            # A cloud machine: cloud-init writes the same environment file and starts the
            # image's unit, which runs the same start script (terraform/modules/node/files).
            doc = yaml.safe_load(out["user_data"][rank])
            assert [f["content"] for f in doc["write_files"]] == [out["env_files"][rank]]
            assert doc["runcmd"] == [["systemctl", "start", "--no-block", "syndeo-node"]]
            assert set(doc) == {"write_files", "runcmd"}
        env = {"PATH": path, "SYNDEO_TEST_RECORD": str(record), "HOME": str(tmp_path)}
        res = subprocess.run(
            ["dash", "-c", command], env=env, capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 0, res.stdout + res.stderr
        _wait_gone(tmp_path / "host" / "clusters" / "onecmd" / str(rank) / "node.pid")
    return spec, _records(record)


@pytest.fixture
def made_dirs() -> Iterator[list[Path]]:
    """Directories a test made outside its tmp_path, removed after it, pass or fail."""
    made: list[Path] = []
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_node_runs_the_one_node_command_and_nothing_else(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made_dirs: list[Path]
) -> None:
    monkeypatch.setenv("SYNDEO_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    bindir, record = _standins(tmp_path)
    spec, started = _started(name, tmp_path, bindir, record, made_dirs)
    assert len(started) == NODES, [s["argv"] for s in started]
    one, _ = node_command(None, {}, [])  # [python, -m, syndeo, node]
    by_rank: dict[int, list[str]] = {}
    for node in started:
        argv = node["argv"]
        if name == "local":
            assert argv == one
        elif name in CLOUD_MACHINE:  # nodes run the SIF baked into the VM image
            assert Path(argv[0]).name == "apptainer" and argv[1] == "exec"
            assert {"--containall", "--cleanenv"} <= set(argv)
            assert argv[-3:] == [SIF_IN_IMAGE, "syndeo", "node"]
        else:  # bare, with the configured interpreter
            assert argv == [str(bindir / "node-python"), *one[1:]], argv
        got = NodeSettings.from_env(_node_env(node))
        # Set per machine by the target (its own address, scratch under its base).
        want = spec.node_settings(got.rank, got.scratch, got.node_ip)
        update: dict[str, Any] = {"scratch_base": got.scratch_base, "target": got.target}
        if name not in ("local", "slurm"):
            update["workdir"] = None  # a machine elsewhere: not the launcher's directory
        if name == "slurm" and got.rank != 0:
            # One job environment for all its tasks: workers carry the command; only
            # the head runs a workload (syndeo/node/main.py).
            update["run"] = spec.run
        want = want.model_copy(update=update)
        assert got.model_dump() == want.model_dump()
        by_rank[got.rank] = argv
    assert sorted(by_rank) == list(range(NODES))
