"""Node groups and the GPU rule, without starting anything: the config, each node's
environment and Ray arguments, the head's readiness rule, the container and local
launch lines, and bad input (one line, non-zero exit, before anything starts)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from syndeo.core.errors import ConfigError
from syndeo.core.gpus import split_devices
from syndeo.core.nodeconfig import NodeSettings
from syndeo.image.manifest import SIF_MAGIC
from syndeo.launcher.command import container_command
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.slurm.target import SlurmTarget
from syndeo.node.groupwatch import GroupWatch
from syndeo.node.raynode import RayProcess
from tests.support.helpers import no_gpu_path, syndeo
from tests.support.launched import make_launched

GROUPS = [
    {"name": "cpu", "nodes": 2, "cpus_per_node": 4},
    {"name": "gpu", "nodes": 1, "gpus_per_node": 2, "slurm": {"partition": "gpu"}},
]


def _spec(**cfg: Any) -> ClusterSpec:
    return ClusterSpec.from_config(load_config(**cfg), "file:///tmp/rdv", "grp-1")


def test_default_head_is_a_one_node_group_first_then_ranks_in_order() -> None:
    cfg = load_config(cpus_per_node=1, groups=GROUPS)
    assert cfg.layout is not None
    assert [(g.name, g.first_rank, g.nodes) for g in cfg.layout.groups] == [
        ("head", 0, 1),
        ("cpu", 1, 2),
        ("gpu", 3, 1),
    ]
    assert cfg.nodes == 4
    head, cpu, gpu = cfg.layout.groups
    assert (head.cpus, head.gpus) == (1, 0)  # the top-level shape
    assert (cpu.cpus, cpu.gpus, gpu.cpus, gpu.gpus) == (4, 0, 1, 2)
    assert cfg.layout.expected() == "head:1:1,cpu:2:2,gpu:1:1"


def test_head_in_the_first_group_or_a_head_group_written_by_the_user() -> None:
    first = load_config(head="first", groups=GROUPS).layout
    assert first is not None and [g.name for g in first.groups] == ["cpu", "gpu"]
    assert first.group_of(0).name == "cpu"
    own = load_config(groups=[{"name": "head", "cpus_per_node": 8}, *GROUPS]).layout
    assert own is not None and (own.groups[0].name, own.groups[0].cpus) == ("head", 8)


def test_no_groups_is_todays_cluster() -> None:
    cfg = load_config(nodes=3)
    assert cfg.layout is None
    env = _spec(nodes=3).node_env(1, Path("/tmp/x"))
    assert "SYNDEO_GROUP" not in env and "SYNDEO_GROUPS" not in env


def test_each_node_carries_its_group_shape_and_label() -> None:
    spec = _spec(groups=GROUPS)
    env = spec.node_env(3, Path("/tmp/x"))
    assert env["SYNDEO_GROUP"] == "gpu"
    assert (env["SYNDEO_CPUS"], env["SYNDEO_GPUS"]) == ("1", "2")
    assert env["SYNDEO_GROUPS"] == "head:1:1,cpu:2:2,gpu:1:1"
    s = NodeSettings.from_env(env)
    assert s.expected_groups() == {"head": (1, 1), "cpu": (2, 2), "gpu": (1, 1)}
    args = RayProcess(s, Path("/tmp/x/token"), head_address="10.0.0.1:6379")._args()
    assert "--num-gpus=2" in args and "--num-cpus=1" in args
    labels = next(a for a in args if a.startswith("--labels="))
    assert '"syndeo-group": "gpu"' in labels and '"syndeo-rank": "3"' in labels


def test_readiness_all_groups_by_default_min_nodes_at_the_deadline() -> None:
    said: list[str] = []
    w = GroupWatch({"head": (1, 1), "cpu": (2, 1), "gpu": (1, 1)})
    w.observe({0: "head", 1: "cpu", 3: "gpu"}, said.append)
    assert not w.complete() and w.at_least_min()
    assert w.text() == "head 1/1, cpu 1/2, gpu 1/1"
    w.observe({0: "head", 1: "cpu", 2: "cpu", 3: "gpu", 4: "gpu"}, said.append)  # 4: grown
    assert w.complete() and w.counts()["gpu"] == [2, 1]
    w.observe({0: "head", 1: "cpu", 2: "cpu"}, said.append)  # the gpu group's job ended
    assert not w.at_least_min() and w.short_of_min() == "gpu 0/1 (min 1)"
    assert said == ["lost node(s) of rank 3 (gpu), 4 (gpu); groups now head 1/1, cpu 2/2, gpu 0/1"]


def test_status_line_shows_each_group() -> None:
    from syndeo.launcher.ui import _fmt_status
    from syndeo.rendezvous import StatusRecord

    st = StatusRecord(
        phase="waiting",
        nodes_expected=4,
        nodes_joined=[0, 1],
        updated_at=0.0,
        groups={"head": [1, 1], "cpu": [1, 2], "gpu": [0, 1]},
    )
    assert "nodes 2/4 (head 1/1, cpu 1/2, gpu 0/1)" in _fmt_status("c", st, "").plain


def test_local_nodes_get_distinct_gpus(syndeo_home: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text(
        '[[groups]]\nname = "cpu"\n[[groups]]\nname = "gpu"\nnodes = 2\ngpus_per_node = 2\n'
    )
    proc = syndeo(
        "deploy",
        "--dry-run",
        "--config",
        str(cfg),
        "--cluster-id",
        "g1",
        cwd=tmp_path,
        env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"},
    )
    assert proc.returncode == 0, proc.stderr
    seen = {}
    for line in proc.stdout.splitlines():
        if line.startswith("env "):
            env = dict(w.split("=", 1) for w in shlex.split(line)[1:] if "=" in w[:40])
            seen[env["SYNDEO_RANK"]] = (
                env["SYNDEO_GROUP"],
                env["SYNDEO_GPUS"],
                env.get("CUDA_VISIBLE_DEVICES"),
            )
    assert seen == {
        "0": ("head", "0", ""),
        "1": ("cpu", "0", ""),
        "2": ("gpu", "2", "4,5"),
        "3": ("gpu", "2", "6,7"),
    }


def test_split_devices() -> None:
    assert split_devices([0, 1, 2], ["0", "1", "2"]) == ["", "0", "1,2"]
    with pytest.raises(ConfigError, match=r"ask for 3 GPU.*offers 2"):
        split_devices([1, 2], ["0", "1"])
    with pytest.raises(ConfigError, match="no GPU was found"):
        split_devices([1], None)


def test_container_gets_nv_and_keeps_its_devices_only_when_it_has_gpus(tmp_path: Path) -> None:
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"#!/usr/bin/env run-singularity\n" + SIF_MAGIC + b"\0" * 64)
    gpu_env = {"SYNDEO_GPUS": "1", "CUDA_VISIBLE_DEVICES": "3"}
    argv, env = container_command(sif, gpu_env, [], ["syndeo", "node"], user="syndeo-ci")
    assert argv[argv.index("exec") + 1] == "--nv" and "--cleanenv" in argv
    assert env["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == "3"
    argv, _ = container_command(sif, {"SYNDEO_GPUS": "0"}, [], ["syndeo", "node"], user="syndeo-ci")
    assert "--nv" not in argv


def test_grow_names_an_unknown_group() -> None:
    spec = _spec(target="slurm", groups=GROUPS)
    launched = make_launched(
        "slurm",
        "grp-1",
        spec.rendezvous,
        spec=spec,
        part={"slurm": {}, "group_slurm": {}, "groups": [], "next_rank": 4, "job_id": "1"},
    )
    with pytest.raises(ConfigError, match="unknown group 'tpu'; the cluster's groups are: head"):
        SlurmTarget(load_config(target="slurm")).grow(launched, "tpu", 1)


SSH = 'target = "ssh"\nrendezvous = "file:///tmp/sy-rdv"\n[ssh]\n'
BAD = [
    ('[[groups]]\nname = "cpu"\n[[groups]]\nname = "cpu"\n', "group 'cpu' is defined twice"),
    ('[[groups]]\nname = "cpu"\n[[groups]]\nname = "head"\n', "'head' holds the head and must"),
    ('[[groups]]\nname = "cpu"\nnodes = 1\nmin_nodes = 2\n', "min_nodes 2 is more than its 1"),
    ('nodes = 5\n[[groups]]\nname = "cpu"\nnodes = 2\n', "nodes = 5 but the groups add up to 3"),
    ('[[groups]]\nname = "CPU"\n', "groups.0.name: Value error, 'CPU': use 1-31 of a-z"),
    ('[[groups]]\nname = "cpu"\nflavour = 1\n', "groups.0.flavour: is not a known setting"),
    (
        'target = "slurm"\n[slurm]\nrequeue = true\n[[groups]]\nname = "cpu"\n',
        "slurm.requeue and slurm.max_requeues cannot be used with [[groups]]",
    ),
    (
        'target = "slurm"\n[[groups]]\nname = "cpu"\nslurm = { partition = "a b" }\n',
        "groups.cpu.slurm.partition: Value error, 'a b' is not a valid Slurm name",
    ),
    ('[[groups]]\nname = "g"\ngpus_per_node = 1\n', "no GPU was found on this machine"),
    # ssh: one host per rank, group by group (the head group takes the first of [ssh] hosts).
    (SSH + 'hosts = ["h1"]\n[[groups]]\nname = "cpu"\n', "not enough hosts for group 'cpu'"),
    (
        SSH + 'hosts = ["h1", "h2", "h3"]\n[[groups]]\nname = "cpu"\n',
        "host(s) h3 in [ssh] hosts belong to no group",
    ),
    (
        SSH + 'hosts = ["h1"]\n[[groups]]\nname = "cpu"\nnodes = 2\nssh = { hosts = ["h2"] }\n',
        "group 'cpu' has 2 node(s) but [groups.ssh] hosts names 1 host(s)",
    ),
    (
        SSH + 'hosts = ["h1"]\n[[groups]]\nname = "cpu"\nssh = { hosts = ["h2"], port = 2 }\n',
        "group 'cpu': [groups.ssh] takes only hosts and pool, not 'port'",
    ),
    (
        SSH + 'hosts = ["h1"]\n[[groups]]\nname = "cpu"\nssh = { hosts = ["h1"] }\n',
        "ssh: host h1 is listed twice",
    ),
    (
        SSH + 'hosts = ["h1", "h2"]\n[[groups]]\nname = "cpu"\ncontainer = "/x.sif"\n',
        "group 'cpu': a container of its own is not supported on the ssh target",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_bad_groups_are_one_line_before_anything_starts(
    syndeo_home: Path, tmp_path: Path, body: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = tmp_path / "bad.toml"
    cfg.write_text(body)
    # No GPU here (nvidia-smi shadowed, no CUDA_VISIBLE_DEVICES); terraform for ssh.
    tf = shutil.which("terraform")
    assert tf, "terraform missing: run scripts/setup"
    env = {"PATH": no_gpu_path(tmp_path / "nogpu", str(Path(tf).parent), "/usr/bin", "/bin")}
    proc = syndeo("deploy", "--config", str(cfg), cwd=tmp_path, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (syndeo_home / "clusters").exists() or not any((syndeo_home / "clusters").iterdir())


def test_grow_hosts_are_for_ssh_only(syndeo_home: Path, tmp_path: Path) -> None:
    from syndeo.launcher.state import save_launched

    spec = _spec(target="slurm", groups=GROUPS)
    save_launched(make_launched("slurm", "grp-2", spec.rendezvous, spec=spec))
    proc = syndeo("grow", "--cluster-id", "grp-2", "--group", "cpu", "--hosts", "h9", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "syndeo: error: --hosts names the machines of an ssh cluster's new nodes; the slurm "
        "target finds its own"
    ]


def test_a_node_alone_on_a_machine_keeps_only_its_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM/ssh node (nobody set CUDA_VISIBLE_DEVICES) on a 4-GPU machine that asks for 2
    sees devices 0,1 only; more than the machine has is one clear error."""
    from syndeo.core.errors import NodeError
    from syndeo.core.gpus import node_devices

    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n" + "".join(f"echo 'GPU {i}: Fake (UUID: GPU-{i})'\n" for i in range(4))
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    assert node_devices(2, env) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert node_devices(4, env) is None  # all of them: nothing to narrow
    assert node_devices(0, env) is None
    assert node_devices(2, {**env, "CUDA_VISIBLE_DEVICES": "3"}) is None  # a launcher's choice
    with pytest.raises(NodeError, match="asks for 5 GPU\\(s\\) but its machine shows 4"):
        node_devices(5, env)
    # And the node's own Ray gets it.
    s = NodeSettings(
        cluster_id="g",
        rank=1,
        nodes=2,
        rendezvous="file:///x",
        scratch=Path("/tmp/sy-gputest"),
        gpus=2,
    )
    assert RayProcess(s, tmp_path / "t", "10.0.0.1:6379").env["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setenv("PATH", no_gpu_path(tmp_path / "nogpu"))  # no GPU seen: left to Ray
    assert "CUDA_VISIBLE_DEVICES" not in RayProcess(s, tmp_path / "t", "10.0.0.1:6379").env


def test_amd_gpus_are_named_for_rocm_and_for_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpu_vendor = "amd": a node alone on a 4-GPU machine (rocm-smi lists them) keeps
    ROCR_VISIBLE_DEVICES=0,1 and tells Ray HIP_VISIBLE_DEVICES=0,1; under a scheduler that
    set ROCR only (Slurm: 2,3), Ray gets HIP's ids counted within ROCR's (0,1), which it
    needs (it refuses ROCR alone); nodes sharing a machine split it as for NVIDIA."""
    from syndeo.core.gpus import device_env, node_devices, split_devices, vendor

    smi = tmp_path / "rocm-smi"
    smi.write_text(
        "#!/bin/sh\necho 'device,Device ID'\n"
        + "".join(f"echo 'card{i},0x740f'\n" for i in range(4))
    )
    smi.chmod(0o755)
    amd = vendor("amd")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    monkeypatch.setenv("PATH", env["PATH"])
    want = {"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}
    assert node_devices(2, env, amd) == want
    assert node_devices(4, env, amd) is None
    assert node_devices(2, {**env, "ROCR_VISIBLE_DEVICES": "2,3"}, amd) == {
        "HIP_VISIBLE_DEVICES": "0,1"
    }
    assert node_devices(2, {**env, "HIP_VISIBLE_DEVICES": "1,2"}, amd) is None
    assert split_devices([1, 2], ["0", "1", "2"], amd) == ["0", "1,2"]
    assert device_env(amd, "1,2") == {"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "0,1"}
    assert (amd.apptainer_flag, vendor(None).apptainer_flag) == ("--rocm", "--nv")
    s = NodeSettings(
        cluster_id="g",
        rank=1,
        nodes=2,
        rendezvous="file:///x",
        scratch=Path("/tmp/sy-gputest"),
        gpus=2,
        gpu_vendor="amd",
    )
    ray_env = RayProcess(s, tmp_path / "t", "10.0.0.1:6379").env
    assert (ray_env["ROCR_VISIBLE_DEVICES"], ray_env["HIP_VISIBLE_DEVICES"]) == ("0,1", "0,1")
    assert "CUDA_VISIBLE_DEVICES" not in ray_env
