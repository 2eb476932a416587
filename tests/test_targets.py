"""The design rule, enforced: every target is the same few verbs and none brings up Ray.

Node bring-up, Ray start, readiness, auth and teardown live in syndeo.node and
friends; a target module that mentions them has grown its own copy.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from syndeo.targets import TARGETS, Target
from syndeo.targets.cloud import CloudTarget
from syndeo.targets.vm import VmTarget, terraform_root

VERBS = ("default_rendezvous", "script", "launch", "poll", "stop")
# What only the per-node command may do.
FORBIDDEN = ("ray start", "syndeo.raynode", "syndeo.node ", "from syndeo.node", "RAY_AUTH",
             "ray.init", "--head")  # fmt: skip


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
    if issubclass(cls, VmTarget):
        optional |= VM_HOOKS  # what a Terraform-backed target may add, and nothing else
    if issubclass(cls, CloudTarget):
        optional |= CLOUD_HOOKS
    extra = public - set(VERBS) - optional
    assert not extra, f"{class_name} adds verbs other targets lack: {sorted(extra)}"
    # The module that defines the class (a target may re-export it from a package).
    source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
    for needle in FORBIDDEN:
        assert needle not in source, (
            f"{module_name} contains {needle!r}: node logic belongs in syndeo.node"
        )
    # Every target ends in the one per-node command, built in one place: in Python
    # (container.node_command), or for VM targets in terraform/modules/node.
    if issubclass(cls, VmTarget):
        _assert_renders_through_node_module(cls.module)
    else:
        assert "node_command" in source


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
    defined = {n for n, v in vars(VmTarget).items() if callable(v) and not n.startswith("_")}
    assert (
        defined - set(VERBS) - {"describe", "summary", "tfvars", "check", "grow", "shrink"}
        == VM_HOOKS
    )
    cloud = {n for n, v in vars(CloudTarget).items() if callable(v) and not n.startswith("_")}
    assert cloud - set(VERBS) - VM_HOOKS - {"creates_rendezvous", "summary"} == CLOUD_HOOKS


def test_importing_syndeo_loads_no_cloud_sdk_and_no_ray() -> None:
    code = (
        "import sys, syndeo, syndeo.cli, syndeo.deploy, syndeo.rendezvous, syndeo.targets;"
        "bad=[m for m in sys.modules if m.split('.')[0] in "
        "('boto3','botocore','google','azure','ray')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
