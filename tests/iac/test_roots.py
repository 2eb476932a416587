"""Provider configuration lives in the caller (issue 20, as terraform-aws-modules do).

terraform/aws|gcp|azure are modules without a provider block, so a caller may use them
with count, for_each or depends_on (terraform/aws/examples/fleet does, and
tests/iac/test_aws.py validates it with the real provider); each deploy/ is the thin
root the launcher applies: it configures the provider and passes every variable of the
module on.  Read from the parsed HCL, so it runs for all three clouds offline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syndeo.launcher.targets.terraform import TerraformTarget, terraform_root
from tests.support import hcl

# What each deploy/ root declares besides the module's variables: the provider's own.
PROVIDER_ONLY = {"aws": {"api_max_retries"}, "gcp": set(), "azure": set()}


def _providers(folder: Path) -> list[str]:
    return [
        hcl.unquote(name)
        for f in sorted(folder.glob("*.tf"))
        for block in hcl.load(f).get("provider", [])
        for name in block
    ]


@pytest.mark.parametrize("module", [*hcl.CLOUDS, "ssh", "modules/node"])
def test_reusable_modules_configure_no_provider(module: str) -> None:
    assert _providers(hcl.TERRAFORM / module) == [], (
        f"terraform/{module} configures a provider: callers could not use it with "
        "count/for_each/depends_on; configure it in deploy/ and the examples"
    )


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_deploy_root_and_examples_configure_the_provider(cloud: str) -> None:
    assert len(_providers(hcl.TERRAFORM / cloud / "deploy")) == 1
    for example in sorted((hcl.TERRAFORM / cloud / "examples").iterdir()):
        assert len(_providers(example)) == 1, f"{example} must configure its provider"


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_deploy_root_passes_every_variable_on(cloud: str) -> None:
    module = hcl.variables(hcl.TERRAFORM / cloud)
    root = hcl.variables(hcl.TERRAFORM / cloud / "deploy")
    assert set(root) == set(module) | PROVIDER_ONLY[cloud]
    call = hcl.load(hcl.TERRAFORM / cloud / "deploy" / "main.tf")["module"][0]['"cluster"']
    assert hcl.unquote(call["source"]) == "../"
    passed = {k: v for k, v in call.items() if k not in ("source", "__is_block__")}
    assert passed == {name: f"${{var.{name}}}" for name in module}
    for name, body in root.items():
        if name in PROVIDER_ONLY[cloud]:
            continue
        # Unset in the tfvars: null, which the module turns into its own default.
        assert body.get("default") is None and "default" in body, name
        assert "validation" not in body, f"{name}: validate in the module, not the root"
    assert root["launch_key"].get("sensitive") is True


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_null_means_the_default_in_the_module(cloud: str) -> None:
    for name, body in hcl.variables(hcl.TERRAFORM / cloud).items():
        if hcl.unquote(body.get("default")) is not None:
            assert body.get("nullable") is False, (
                f"terraform/{cloud} var.{name}: a null from deploy/ would replace its "
                "default; declare it nullable = false"
            )


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_deploy_root_passes_every_output_on(cloud: str) -> None:
    module = hcl.outputs(hcl.TERRAFORM / cloud)
    root = hcl.outputs(hcl.TERRAFORM / cloud / "deploy")
    assert {k: v["value"] for k, v in root.items()} == {
        name: f"${{module.cluster.{name}}}" for name in module
    }


def test_the_cloud_targets_apply_the_deploy_roots() -> None:
    from syndeo.launcher.config import DeployConfig
    from syndeo.launcher.targets import get_target

    for cloud in hcl.CLOUDS:
        target = get_target(DeployConfig(target=cloud))
        assert isinstance(target, TerraformTarget)
        assert target.module_dir == terraform_root() / cloud / "deploy"
    ssh = get_target(DeployConfig(target="ssh"))
    assert isinstance(ssh, TerraformTarget)
    assert ssh.module_dir == terraform_root() / "ssh"  # no provider: its own root


@pytest.mark.parametrize("name", [*hcl.CLOUDS, "ssh"])
def test_recovery_replaces_a_resource_the_root_has(name: str) -> None:
    """``replace`` runs ``terraform apply -replace=ADDRESS`` in the target's root: behind a
    deploy/ root the node resource is the module's (an address the root lacks replaced
    nothing, and a spot-noticed node was never re-created on the emulated AWS)."""
    from syndeo.launcher.config import DeployConfig
    from syndeo.launcher.targets import get_target

    target = get_target(DeployConfig(target=name))
    assert isinstance(target, TerraformTarget) and target.node_resource is not None
    address = target.resource_prefix + target.node_resource
    root = target.module_dir
    module_dir = root
    if address.startswith("module."):
        _, call, address = address.split(".", 2)
        [block] = [b for b in hcl.load(root / "main.tf")["module"] if f'"{call}"' in b]
        module_dir = (root / hcl.unquote(block[f'"{call}"']["source"])).resolve()
    rtype, rname = address.split(".")
    found = {(t, n) for f in sorted(module_dir.glob("*.tf")) for t, n, _ in hcl.resources(f)}
    assert (rtype, rname) in found, f"{target.resource_prefix}{target.node_resource}"
