"""The design rule, enforced: every target is the same few verbs and none brings up Ray.

Node bring-up, Ray start, readiness, auth and teardown live in the node runtime
(``syndeo.node``); a target whose code or templates mention them has grown its own copy.
That no target imports the node runtime is the layer contract's (``test_layout.py``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from syndeo.launcher.targets import TARGETS, Target
from syndeo.launcher.targets.cloud import CloudTarget
from syndeo.launcher.targets.terraform import TerraformTarget, terraform_root

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
    optional = {"describe", "summary", "creates_rendezvous", "grow", "shrink", "wait", "check"}
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


VM_HOOKS = {"machine_vars", "machine_summary", "prepare", "grown_nodes", "leaks", "rendezvous_env"}
CLOUD_HOOKS = {"check_credentials", "cloud_vars"}


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
        defined - set(VERBS) - {"describe", "summary", "tfvars", "check", "grow", "shrink"}
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
