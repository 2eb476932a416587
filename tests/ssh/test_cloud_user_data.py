"""The user-data each cloud module sends, run on three SSH-bed hosts against that
cloud's object-store emulator: the cluster forms, the result lands in the bucket,
and deploy's collect step picks it up.  The same test for aws, gcp and azure; only
the environment differs.

Nothing of the user-data is rendered in Python: the tfvars come from the cloud
target itself (``TerraformTarget.tfvars``, what ``deploy --target <cloud>`` writes), the
``module "nodes"`` block and the locals it needs are taken from
``terraform/<cloud>/main.tf`` (python-hcl2) and evaluated by the real terraform
with the cloud module's own ``variables.tf``; only values a provider computes at
apply time (the Azure identity's client id) are given here.  Every document passes
``cloud-init schema`` and is executed by :mod:`testbeds.cloudinit`, as
cloud-init + systemd would on a packer/cloud VM, with the real SIF and the start
script baked onto each host's own disk.

What differs from a real cloud is only the environment: the emulator's endpoint is
forwarded by the target as on a cloud; the emulator's credentials stand in for the
instance identity (``STANDINS``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syndeo.bench.models import BenchResult
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.deploy import _collect, _prepare
from syndeo.launcher.targets.terraform import TerraformTarget
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import Rendezvous
from testbeds import sshhosts
from testbeds.cloudinit import SshMachine, Unit, VmHost
from testbeds.objectstores import Server, list_keys, make_bucket, running
from tests.support import hcl

pytestmark = [pytest.mark.ssh, pytest.mark.slow, pytest.mark.objectstore]

REPO = hcl.TERRAFORM.parent
UNIT_FILE = REPO / "packer" / "cloud" / "files" / "syndeo-node.service"
START_SCRIPT = hcl.TERRAFORM / "modules" / "node" / "files" / "syndeo-node"
SCHEME = {"aws": "s3", "gcp": "gs", "azure": "az"}
# [<cloud>] settings of the test's config: the region moto answers for, the project
# and storage account the emulators serve; instance type and image pass the modules'
# validation but start nothing (the bed's hosts are the machines).
SETTINGS: dict[str, dict[str, str]] = {
    "aws": {"region": "us-east-1", "instance_type": "c7i.large", "image": "ami-0123456789abcdef0"},
    "gcp": {
        "region": "europe-west4",
        "project": "syndeo-test",
        "instance_type": "c3-standard-4",
        "image": "projects/syndeo-test/global/images/syndeo-node",
    },
    "azure": {
        "region": "westeurope",
        "storage_account": "devstoreaccount1",
        "instance_type": "Standard_D4s_v5",
        "image": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/images"
        "/providers/Microsoft.Compute/images/syndeo-node",
    },
}
# What the node environment holds besides SYNDEO_*, by who puts it there:
#  module:    the cloud module itself (its `module "nodes"` extra_env)
#  forwarded: the target, from the launcher's environment (endpoints only)
#  standin:   this test, for what a real VM gets from its instance identity
ORIGIN: dict[str, dict[str, set[str]]] = {
    "aws": {
        "module": {
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_METADATA_SERVICE_TIMEOUT",
            "AWS_METADATA_SERVICE_NUM_ATTEMPTS",
        },
        "forwarded": {"AWS_ENDPOINT_URL_S3"},
        "standin": {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
    },
    "gcp": {
        "module": {"GOOGLE_CLOUD_PROJECT"},
        "forwarded": {"STORAGE_EMULATOR_HOST"},
        # The emulator client is anonymous; this keeps google-auth off the metadata server.
        "standin": {"NO_GCE_CHECK"},
    },
    "azure": {
        "module": {"AZURE_STORAGE_ACCOUNT", "AZURE_CLIENT_ID"},
        "forwarded": set(),
        # Account key + endpoint in one: a VM signs in with its managed identity instead.
        "standin": {"AZURE_STORAGE_CONNECTION_STRING"},
    },
}
# Values a provider supplies (data sources, attributes known after apply) that
# `module "nodes"` or the locals it reads refer to; any other such reference fails
# the test until it is given here.
PROVIDER_VALUES = {
    "azurerm_user_assigned_identity.nodes.client_id": "00000000-0000-4000-8000-0000000000c1",
    "data.azurerm_client_config.current.subscription_id": "00000000-0000-4000-8000-0000000000a1",
}
FOLLOW_TIMEOUT_S = 300.0
LEAVE_TIMEOUT_S = 90.0


# ---------------------------------------------------------------------- rendering
_REF = re.compile(r"(?<![\w.])((?:data\.)?[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*|\[\d+\])+)")
_OURS = ("var.", "local.", "path.", "module.")
_FOR_VARS = re.compile(r"\bfor\s+(\w+)(?:\s*,\s*(\w+))?\s+in\b")


def _module_block(cloud: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``module "nodes"`` arguments, the locals they need) from terraform/<cloud>/main.tf,
    as expression strings, with provider-supplied values swapped for locals of their own."""
    main = hcl.load(hcl.TERRAFORM / cloud / "main.tf")
    [args] = [hcl.unquote(m)["nodes"] for m in main["module"] if "nodes" in hcl.unquote(m)]
    defined = {k: v for block in main.get("locals", []) for k, v in hcl.unquote(block).items()}
    needed: dict[str, Any] = {}
    todo = [json.dumps(args)]
    while todo:
        for name in re.findall(r"\blocal\.(\w+)", todo.pop()):
            if name not in needed:
                assert name in defined, f"terraform/{cloud}: local.{name} not found"
                needed[name] = defined[name]
                todo.append(json.dumps(defined[name]))
    stubs: dict[str, str] = {}

    def swap(text: str) -> str:
        # A for expression's own variables (`[for g in var.groups : {name = g.name}]`).
        loop_vars = {v for pair in _FOR_VARS.findall(text) for v in pair if v}

        def one(m: re.Match[str]) -> str:
            ref = m.group(1)
            if ref.startswith(_OURS) or re.split(r"[.\[]", ref, maxsplit=1)[0] in loop_vars:
                return ref
            assert ref in PROVIDER_VALUES, f"terraform/{cloud}: module nodes needs {ref}: add it"
            stubs[ref] = PROVIDER_VALUES[ref]
            return f"local.provider_value_{len(stubs)}"

        return _REF.sub(one, text)

    args = json.loads(swap(json.dumps(args)))
    needed = json.loads(swap(json.dumps(needed)))
    for i, ref in enumerate(stubs, 1):
        needed[f"provider_value_{i}"] = PROVIDER_VALUES[ref]
    return args, needed


def _render(cloud: str, tfvars: dict[str, Any], root: Path) -> dict[str, Any]:
    """The node module's user_data and env as terraform/<cloud> would pass them."""
    args, locals_ = _module_block(cloud)
    # The same layout as terraform/: the block's source "../modules/node" resolves.
    shutil.copytree(hcl.TERRAFORM / "modules" / "node", root / "modules" / "node")
    work = root / cloud
    work.mkdir()
    shutil.copy2(hcl.TERRAFORM / cloud / "variables.tf", work / "variables.tf")
    (work / "main.tf.json").write_text(
        json.dumps(
            {
                "locals": locals_,
                "module": {"nodes": args},
                # Sensitive in the node module (they hold the launch key); -json shows them.
                "output": {
                    k: {"value": f"${{module.nodes.{k}}}", "sensitive": True}
                    for k in ("user_data", "env")
                },
            },
            indent=2,
        )
    )
    (work / "terraform.tfvars.json").write_text(json.dumps(tfvars, indent=2))
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(work / ".terraform")}
    for cmd in (("init", "-backend=false"), ("apply", "-auto-approve", "-no-color")):
        out = hcl.run_tf(*cmd, cwd=work, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
    out = hcl.run_tf("output", "-json", cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    return {k: v["value"] for k, v in json.loads(out.stdout).items()}


def _schema_ok(doc: str, path: Path) -> None:
    path.write_text(doc)
    res = subprocess.run(
        ["cloud-init", "schema", "--config-file", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0 and "Valid cloud-config" in res.stdout, res.stdout + res.stderr


# ---------------------------------------------------------------------- the hosts
@pytest.fixture(scope="module")
def vms(ssh_hosts: sshhosts.Bed, sif: Path) -> Iterator[list[VmHost]]:
    """The bed's hosts as VMs of the packer/cloud image: unit, start script and SIF
    where provision.sh installs them (tests/iac/test_image_contract.py)."""
    unit = Unit.load(UNIT_FILE)
    hosts = [VmHost(SshMachine(ssh_hosts, h), {unit.name: unit}) for h in ssh_hosts.hosts]
    # The same default in every cloud module (tests/iac/test_image_contract.py).
    image_path = hcl.unquote(hcl.variables(hcl.TERRAFORM / "aws")["image_path"]["default"])
    try:
        for vm in hosts:
            vm.bake(unit.exec_start, START_SCRIPT, 0o755)
            vm.bake(image_path, sif, 0o644)
        yield hosts
    finally:
        for vm in hosts:
            vm.wipe()


def _stop_all(vms: list[VmHost]) -> None:
    for vm in vms:
        for name in list(vm.started):
            vm.stop(name)


def _logs(vms: list[VmHost]) -> str:
    return "\n".join(
        f"--- {vm.machine.name} {name}:\n{vm.log(name)[-3000:]}"
        for vm in vms
        for name in vm.started
    )


def _follow(rdv: Rendezvous, vms: list[VmHost]) -> None:
    """Until the head records done; fails early, with the nodes' logs, if a node
    reports a failure or every node has ended without a done record."""
    deadline = time.monotonic() + FOLLOW_TIMEOUT_S
    while time.monotonic() < deadline:
        if rdv.read_done() is not None:
            return
        failed = rdv.read_logs()
        assert not failed, f"nodes failed: {failed}\n{_logs(vms)}"
        if not any(vm.is_active(n) for vm in vms for n in vm.started):
            assert rdv.read_done() is not None, f"every node ended, no done record\n{_logs(vms)}"
            return
        time.sleep(1.0)
    raise AssertionError(f"no done record within {FOLLOW_TIMEOUT_S:.0f} s\n{_logs(vms)}")


def _no_processes_left(bed: sshhosts.Bed) -> dict[str, list[str]]:
    deadline = time.monotonic() + 20
    while True:
        left = {h.name: sshhosts.host_processes(bed, h, bed.user) for h in bed.hosts}
        if not any(left.values()) or time.monotonic() > deadline:
            return {k: v for k, v in left.items() if v}
        time.sleep(0.5)


# ---------------------------------------------------------------------- the test
# AWS's user-data runs whole on the emulated AWS (tests/aws): here the two clouds that
# have no emulator.
@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_cloud_user_data_forms_the_cluster(
    cloud: str,
    ssh_hosts: sshhosts.Bed,
    vms: list[VmHost],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kind = SCHEME[cloud]
    origin = ORIGIN[cloud]
    with running(kind, tmp_path / "logs", host=ssh_hosts.host_ip) as server:
        bucket = f"syndeo-ud-{cloud}"
        make_bucket(server, bucket)
        emulator = {**server.env, **({"NO_GCE_CHECK": "true"} if kind == "gs" else {})}
        for k, v in emulator.items():
            monkeypatch.setenv(k, v)  # the launcher's environment
        cfg = DeployConfig.model_validate(
            {
                "target": cloud,
                "nodes": 3,
                "cpus_per_node": 1,
                "join_timeout_s": 120,
                "cluster_id": f"ud-{cloud}-{uuid.uuid4().hex[:6]}",
                "rendezvous": f"{kind}://{bucket}/syndeo",
                "results_dir": str(tmp_path / "results"),
                "bench": {"samples_per_cpu": 200, "repeats": 1},
                cloud: SETTINGS[cloud],
            }
        )
        # deploy's own first step: target, spec, and the claimed rendezvous.
        target, spec, rdv, _ = _prepare(cfg, Ui(quiet=True))  # the benchmark: no payload
        assert isinstance(target, TerraformTarget)
        try:
            _run_cluster(cloud, server, cfg, target, spec, rdv, vms, emulator, origin, tmp_path)
        finally:
            _stop_all(vms)
            rdv.cleanup(all_attempts=True)
        left = _no_processes_left(ssh_hosts)
        assert not left, f"processes left on the hosts: {left}"
        assert list_keys(server, bucket) == [], "the cluster's records were not cleaned"


def _run_cluster(
    cloud: str,
    server: Server,
    cfg: DeployConfig,
    target: TerraformTarget,
    spec: Any,
    rdv: Rendezvous,
    vms: list[VmHost],
    emulator: dict[str, str],
    origin: dict[str, set[str]],
    tmp_path: Path,
) -> None:
    tfvars = target.tfvars(spec)  # what `deploy --target <cloud>` writes
    forwarded = tfvars["node"]["extra_env"]
    assert set(forwarded) == origin["forwarded"], forwarded
    standins = {
        k: v for k, v in emulator.items() if k not in forwarded and k not in origin["module"]
    }
    assert set(standins) == origin["standin"], standins
    tfvars["node"]["extra_env"] = {**forwarded, **standins}
    # The SIF where the image bakes it, on each host's own disk.
    baked = hcl.unquote(hcl.variables(hcl.TERRAFORM / cloud)["image_path"]["default"])
    assert "image_path" not in tfvars  # clouds run the SIF the image bakes
    tfvars["image_path"] = vms[0].inside(baked)

    out = _render(cloud, tfvars, tmp_path / "tf")
    user_data, envs = out["user_data"], out["env"]
    assert len(user_data) == len(vms) == 3
    for rank, env in enumerate(envs):
        _schema_ok(user_data[rank], tmp_path / f"user-data-{rank}.yaml")
        others = {k for k in env if not k.startswith("SYNDEO_")}
        assert others == origin["module"] | origin["forwarded"] | origin["standin"], others
        # The container starts with --cleanenv: every one of them must be forwarded.
        assert set(env["SYNDEO_FORWARD_ENV"].split()) == others
        for k in origin["module"] & set(emulator):  # the module's value is the emulator's
            assert env[k] == emulator[k], (k, env[k])
        assert env["SYNDEO_TARGET"] == cloud and env["SYNDEO_RANK"] == str(rank)
        assert env["SYNDEO_RENDEZVOUS"] == cfg.rendezvous
        assert env["SYNDEO_RUN"] == (cfg.workload_command() if rank == 0 else "")
    scratch_base = Path(envs[0]["SYNDEO_SCRATCH"]).parent
    try:
        for rank, vm in enumerate(vms):  # rank r boots on host r+1, fresh from the image
            vm.forget_boot()
            vm.run_user_data(user_data[rank])
        _follow(rdv, vms)
        done = rdv.read_done()
        assert done is not None and done.exit_code == 0, f"{done}\n{_logs(vms)}"
        # Nodes end by themselves once the head is done (Restart=no: units go inactive).
        deadline = time.monotonic() + LEAVE_TIMEOUT_S
        while any(vm.is_active(n) for vm in vms for n in vm.started):
            assert time.monotonic() < deadline, f"nodes did not leave\n{_logs(vms)}"
            time.sleep(1.0)
        path = _collect(cfg, rdv, spec.cluster_id)
        assert path is not None, "no result in the bucket"
        assert path == cfg.results_dir / spec.cluster_id / "result.json"
        result = BenchResult.model_validate_json(path.read_text())
        assert not result.partial
        assert result.manifest.cluster_nodes == 3
        assert result.manifest.target == cloud
        assert [r.env_id for r in result.results] == ["CartPole-v1"]
        assert result.results[0].syndeo.mean > 0
    finally:
        _stop_all(vms)
        shutil.rmtree(scratch_base, ignore_errors=True)
