"""Node groups on Slurm, rendered (nothing submitted): one job per group, golden files.

Regenerate after an intended change with
``SYNDEO_UPDATE_GOLDEN=1 pytest tests/slurm/test_groups_render.py`` and review the diff.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.slurm.render import render
from syndeo.launcher.targets.slurm.target import SlurmTarget
from testbeds.users import python_with_fake_sif

GOLDEN = Path(__file__).resolve().parent / "golden"
GROUPS = [
    {"name": "cpu", "nodes": 2, "cpus_per_node": 4, "min_nodes": 1},
    {
        "name": "gpu",
        "nodes": 1,
        "cpus_per_node": 2,
        "gpus_per_node": 1,
        "slurm": {"partition": "gpu", "time": "02:00:00", "extra_sbatch": ["--begin=now+60"]},
    },
]
SLURM = {"job_dir": "/shared/u/syndeo", "python": "/shared/u/venv/bin/python", "partition": "cpu"}


def _target_and_spec(**over: object) -> tuple[SlurmTarget, ClusterSpec]:
    over.setdefault("slurm", SLURM)
    cfg = load_config(
        target="slurm",
        groups=GROUPS,
        workdir="/shared/u/work",
        run="python train.py --epochs 3",
        **over,
    )
    spec = ClusterSpec.from_config(cfg, "file:///shared/u/rdv", "slurm-0123abcd")
    return SlurmTarget(cfg), spec.model_copy(update={"not_before": 1795000000.0})


def _golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.sbatch"
    if os.environ.get("SYNDEO_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (SYNDEO_UPDATE_GOLDEN=1 to regenerate)"


def test_one_job_per_group_golden() -> None:
    target, spec = _target_and_spec()
    jobs = target._jobs(spec)
    assert [(j.group, j.rank_base, j.head_job, j.shape.nodes) for j in jobs] == [
        ("head", 0, True, 1),
        ("cpu", 1, False, 2),
        ("gpu", 3, False, 1),
    ]
    text = target.script(spec)
    _golden("groups-head-cpu-gpu", text)
    for job in jobs:
        subprocess.run(["bash", "-n"], input=render(job), text=True, check=True)
    head, cpu, gpu = (render(j) for j in jobs)
    # Only the head's job owns rank 0's exit status; the others offset their ranks.
    assert 'rm -f "$SYNDEO_RANK0_RC"' in head and 'rm -f "$SYNDEO_RANK0_RC"' not in cpu
    assert 'export SYNDEO_RANK="$(( 1 + SLURM_PROCID ))"' in cpu
    assert 'export SYNDEO_RANK="$(( 3 + SLURM_PROCID ))"' in gpu
    assert "#SBATCH --partition=gpu" in gpu and "#SBATCH --gres=gpu:1" in gpu
    assert "#SBATCH --begin=now+60" in gpu and "--begin" not in cpu
    assert "#SBATCH --partition=cpu" in cpu and "#SBATCH --cpus-per-task=4" in cpu
    for part in (head, cpu, gpu):
        assert "export SYNDEO_GROUPS=head:1:1,cpu:2:1,gpu:1:1" in part
        assert part.count("#SBATCH --job-name=slurm-0123abcd") == 1  # slurm.cancel finds all


def test_grown_nodes_golden() -> None:
    target, spec = _target_and_spec()
    assert spec.layout is not None
    job = target._job(spec, spec.layout.group("gpu"), rank_base=4, nodes=2)
    text = render(job)
    _golden("groups-grow-gpu", text)
    assert 'export SYNDEO_RANK="$(( 4 + SLURM_PROCID ))"' in text
    assert "#SBATCH --nodes=2" in text and "export SYNDEO_GROUP=gpu" in text


@pytest.mark.root  # the container command names a user to run as, which needs root
def test_container_gpu_group_keeps_slurms_devices() -> None:
    """--nv only for the GPU group, and Slurm's CUDA_VISIBLE_DEVICES survives --cleanenv.

    Rendered as the unprivileged CI user: syndeo refuses to launch containers as root.
    """
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from tests.slurm.test_groups_render import _target_and_spec; "
        "t, s = _target_and_spec(container=sys.argv[2]); "
        "print(t.script(s))"
    )
    out = python_with_fake_sif(code, "groups-render-test.sif")
    _, head, cpu, gpu = out.split("# ==== job ")
    assert "apptainer exec --nv --containall --cleanenv" in gpu
    assert 'export APPTAINERENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"' in gpu
    for part in (head, cpu):
        assert "apptainer exec --containall --cleanenv" in part
        assert "--nv" not in part and "APPTAINERENV_CUDA" not in part


def test_the_other_groups_wait_for_the_heads_job_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker group started before the head's job would wait join_timeout for a head
    still in the queue and give up: each other group depends on the head's job having
    started (--dependency=after), the head's on nothing."""
    from syndeo.launcher.targets.slurm import commands

    calls: list[list[str]] = []

    def submit(
        script: str, env: object = None, unset: object = (), options: object = (), **_: object
    ) -> str:
        calls.append(list(options))  # type: ignore[call-overload]
        return str(100 + len(calls))

    monkeypatch.setattr(commands, "submit", submit)
    monkeypatch.setenv("SYNDEO_HOME", str(tmp_path / "home"))
    target, spec = _target_and_spec(slurm={**SLURM, "job_dir": str(tmp_path / "jobs")})
    launched = target.launch(spec)
    assert calls == [[], ["--dependency=after:101"], ["--dependency=after:101"]]
    assert [g.job_id for g in launched.slurm.groups] == ["101", "102", "103"]


def test_gres_of_a_type_are_counted_by_type() -> None:
    from syndeo.launcher.targets.slurm.commands import _gres_count

    field = "gpu:a100:4(S:0-1),gpu:v100:2,shard:8"
    assert _gres_count(field, "gpu") == 6
    assert _gres_count(field, "gpu", "a100") == 4
    assert _gres_count(field, "gpu", "h100") == 0
    assert _gres_count("gpu:2", "gpu", "a100") == 0  # untyped GPUs are not of the type
