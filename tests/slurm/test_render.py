"""The rendered sbatch script: golden files for a few settings, and validation errors.

Golden files live in ``tests/slurm/golden``; after an intended change, regenerate
them with ``SYNDEO_UPDATE_GOLDEN=1 pytest tests/slurm/test_render.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from syndeo.core.errors import ConfigError, ImageError
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.slurm.settings import SlurmSettings
from syndeo.launcher.targets.slurm.target import SlurmTarget
from testbeds.users import CI_USER, python_with_fake_sif
from tests.support.specs import slurm_spec

GOLDEN = Path(__file__).resolve().parent / "golden"


def _spec(**over: Any) -> ClusterSpec:
    return slurm_spec(**over)


def _script(spec: ClusterSpec, **slurm: Any) -> str:
    slurm.setdefault("job_dir", "/shared/u/syndeo")
    slurm.setdefault("python", "/shared/u/venv/bin/python")
    cfg = load_config(target="slurm", slurm=slurm)
    return SlurmTarget(cfg).script(spec)


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "cpu-3node": ({}, {"partition": "debug", "time": "00:30:00"}),
    "gpu-gres-account": (
        {"gpus": 2, "memory_mb": 64000, "nodes": 4},
        {
            "partition": "gpu",
            "account": "proj42",
            "qos": "high",
            "requeue": True,
            "interface": "ib0",
            "time": "1-00:00:00",
        },
    ),
    "gpu-per-task-extra": (
        {"gpus": 1, "nodes": 2, "cpus": 8},
        {
            "gpu_request": "gpus-per-task",
            "tolerate_node_loss": False,
            "extra_sbatch": ["--constraint=a100", "--mail-type=END"],
            "scratch_dir": "/scratch",
        },
    ),
    # Sites that route by GPU type, and Slurm's --gpus-per-node.
    "gpu-typed-per-node-srun": (
        {"gpus": 4, "nodes": 2, "cpus": 16},
        {
            "partition": "gpu",
            "gpu_request": "gpus-per-node",
            "gpu_type": "a100",
            "extra_srun": ["--cpu-bind=cores", "--mpi=none"],
        },
    ),
    "gpu-typed-gres": ({"gpus": 2}, {"gpu_type": "h100", "time": "0"}),
    # AMD GPUs: the node is told its vendor, and names Ray's HIP ids within the
    # ROCR_VISIBLE_DEVICES Slurm sets (the container case: test_container_launch_line_amd).
    "gpu-amd-typed": ({"gpus": 2, "gpu_vendor": "amd"}, {"partition": "gpu", "gpu_type": "mi250"}),
    # Walltime survives: a warning 2 min before the limit, then the job requeues itself
    # (at most 3 times) to continue from its checkpoint.
    "walltime-requeue": ({}, {"time": "04:00:00", "signal_before": "2m", "max_requeues": 3}),
    # The site's JobRequeue overridden only when the user says so.
    "no-requeue-signal": ({}, {"requeue": False, "signal_before": 300}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    spec_over, slurm = CASES[name]
    text = _script(_spec(**spec_over), **slurm)
    path = GOLDEN / f"{name}.sbatch"
    if os.environ.get("SYNDEO_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"golden file {path} missing: run with SYNDEO_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"rendered script differs from {path}"
    # And it is valid bash.
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_gpu_settings_pass_through() -> None:
    gres = _script(_spec(gpus=2), partition="gpu")
    assert "#SBATCH --gres=gpu:2" in gres
    assert "--gres=gpu:2 --no-kill" in gres  # the srun step asks for them too
    assert "export SYNDEO_GPUS=2" in gres  # -> ray start --num-gpus=2
    per_task = _script(_spec(gpus=1), gpu_request="gpus-per-task")
    assert "#SBATCH --gpus-per-task=1" in per_task and "--gres" not in per_task
    typed = _script(_spec(gpus=2), gpu_type="a100")
    assert "#SBATCH --gres=gpu:a100:2" in typed and "--gres=gpu:a100:2 --no-kill" in typed
    per_node = _script(_spec(gpus=2), gpu_request="gpus-per-node", gpu_type="a100")
    assert "#SBATCH --gpus-per-node=a100:2" in per_node and "--gres" not in per_node
    srun = _script(_spec(), extra_srun=["--cpu-bind=cores", "--export=ALL,X=a b"])
    assert "--no-kill --cpu-bind=cores '--export=ALL,X=a b' \\\n  bash -c syndeo_task" in srun


def test_job_dir_on_the_sites_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sites want job files on $SCRATCH, not $HOME: the login shell's variables are
    expanded once, here; one that is not set is one line naming it."""
    monkeypatch.setenv("SCRATCH", "/scratch/u42")
    s = SlurmSettings(job_dir="$SCRATCH/syndeo")  # type: ignore[arg-type]
    assert s.job_dir == Path("/scratch/u42/syndeo")
    s = SlurmSettings(job_dir="${SCRATCH}/x")  # type: ignore[arg-type]
    assert s.job_dir == Path("/scratch/u42/x")
    monkeypatch.delenv("SCRATCH")
    with pytest.raises(ConfigError, match=r"slurm\.job_dir: .*names \$SCRATCH, not set here"):
        SlurmTarget(load_config(target="slurm", slurm={"job_dir": "$SCRATCH/syndeo"}))


@pytest.mark.parametrize(
    ("time", "seconds"),
    [
        ("0", None),
        ("0:00", None),
        ("0-0", None),
        ("UNLIMITED", None),
        ("30", 1800.0),
        ("1-0", 86400.0),
        ("00:00:30", 30.0),
    ],
)
def test_time_limits_as_sbatch_reads_them(time: str, seconds: float | None) -> None:
    """--time=0 is no limit for sbatch (not zero seconds: node credentials made for
    the job's life would last 15 minutes)."""
    assert SlurmSettings(time=time).time_limit_s() == seconds


@pytest.mark.root  # the container command names a user to run as, which needs root
def test_container_launch_line(tmp_path: Path) -> None:
    """In a container, the node runs what ``syndeo.launcher.command.node_command`` says, plus --nv.

    Rendered as the unprivileged CI user: syndeo refuses to launch containers as root.
    """
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from tests.slurm.test_render import _script, _spec; "
        "print(_script(_spec(image=Path(sys.argv[2]), gpus=1), scratch_dir='/tmp'))"
    )
    text = python_with_fake_sif(code, "render-test.sif")
    assert "apptainer exec --nv --containall --cleanenv" in text
    assert f"/home/{CI_USER}/render-test.sif" in text
    # The node's variables (per-node ones from Slurm too) reach it on a pipe, named on
    # the launch line; the container's environment (which Apptainer's init shim keeps
    # readable to every task) holds only the descriptor's number.
    launch = next(line for line in text.splitlines() if "apptainer exec" in line)
    names = launch.split(" syndeo-env ", 1)[1].split(" -- ", 1)[0].split()
    assert {"SYNDEO_RANK", "SYNDEO_NODE_IP", "SYNDEO_NODES"} <= set(names)
    assert "export APPTAINERENV_SYNDEO_ENV_FD=3" in text
    exported = re.findall(r"export (APPTAINERENV_SYNDEO_\w+)", text)
    assert sorted(exported) == ["APPTAINERENV_SYNDEO_CHECKPOINT_DIR", "APPTAINERENV_SYNDEO_ENV_FD"]
    # Its own task's scratch, never the base; the checkpoint dir, never the job dir.
    assert '--bind "/tmp/sy-${SLURM_JOB_ID}-${SLURM_PROCID}:' in launch
    assert "--bind /tmp:/tmp" not in launch and "/checkpoint:" in launch
    # --cleanenv drops what the program and the node need from Slurm: passed by name
    # (the checkpoint dir, the deadline, the allocation Ray's memory is sized from).
    names = ("SYNDEO_CHECKPOINT_DIR", "SLURM_JOB_END_TIME", "SLURM_MEM_PER_NODE")
    for name in (*names, "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        assert f'export APPTAINERENV_{name}="${name}"' in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@pytest.mark.root  # rendered as the CI user (runuser), as test_container_launch_line is
def test_container_launch_line_amd() -> None:
    """gpu_vendor = "amd" in a container: ``--rocm``, and the ROCm variables Slurm set (not
    CUDA's) passed through --cleanenv.  Golden: the whole script, rendered as the CI user
    with a SIF at a fixed path."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from tests.slurm.test_render import _script, _spec; "
        "print(_script(_spec(image=Path(sys.argv[2]), gpus=2, gpu_vendor='amd'), "
        "scratch_dir='/tmp', partition='gpu'), end='')"
    )
    text = python_with_fake_sif(code, "render-amd.sif")
    assert "apptainer exec --rocm --containall --cleanenv" in text and "--nv" not in text
    for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        assert f'export APPTAINERENV_{name}="${name}"' in text
    assert "CUDA_VISIBLE_DEVICES" not in text
    assert "export SYNDEO_GPU_VENDOR=amd" in text
    path = GOLDEN / "gpu-amd-container.sbatch"
    if os.environ.get("SYNDEO_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"rendered script differs from {path}"
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_runtime_values_come_from_slurm() -> None:
    text = _script(_spec())
    assert 'export SYNDEO_RANK="$SLURM_PROCID"' in text
    assert 'SYNDEO_ATTEMPT="${SLURM_RESTART_COUNT:-0}"' in text
    assert "srun --overlap" in text
    assert "sleep" not in text  # readiness is awaited, never slept for


@pytest.mark.parametrize(
    ("slurm", "needle"),
    [
        ({"time": "soon"}, "slurm.time"),
        ({"partition": "a b"}, "slurm.partition"),
        ({"scratch_dir": "/a/very/long/scratch/directory/path"}, "slurm.scratch_dir"),
        ({"no_such_key": 1}, "slurm.no_such_key: is not a known setting"),
        ({"extra_sbatch": ["-N 4"]}, "slurm.extra_sbatch"),
        ({"extra_srun": ["-c 2"]}, "slurm.extra_srun"),
        ({"gpu_type": "a100:2"}, "slurm.gpu_type"),
        ({"gpu_request": "gpus"}, "slurm.gpu_request"),
        ({"signal_before": "soon"}, "slurm.signal_before"),
        ({"signal_before": 70000}, "slurm.signal_before"),
        ({"time": "10", "signal_before": "10m"}, "shorter than the time limit"),
        ({"max_requeues": 2}, "max_requeues needs signal_before"),
        ({"max_requeues": 2, "signal_before": 60, "requeue": False}, "requeueable"),
        ({"max_requeues": -1}, "slurm.max_requeues"),
    ],
)
def test_invalid_slurm_settings(slurm: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")) as exc:
        SlurmTarget(load_config(target="slurm", slurm=slurm))
    assert "\n" not in str(exc.value)


def test_requeue_and_walltime_warning_lines() -> None:
    """``--requeue``/``--no-requeue`` only when the user says so; the warning signal
    reaches the batch shell (B:), whose trap passes it on; a shell that traps USR1
    everywhere, so a user's own ``--signal=USR1`` never ends a task."""
    plain = _script(_spec())
    assert "--requeue" not in plain and "--no-requeue" not in plain
    assert "#SBATCH --signal" not in plain and "scontrol requeue" not in plain
    assert "trap 'kill -USR1 \"$child\" 2>/dev/null' USR1" in plain
    assert "#SBATCH --requeue\n" in _script(_spec(), requeue=True)
    assert "#SBATCH --no-requeue\n" in _script(_spec(), requeue=False)
    warned = _script(_spec(), time="30", signal_before="90s", max_requeues=2)
    assert "#SBATCH --signal=B:USR1@90\n" in warned and "#SBATCH --requeue\n" in warned
    assert "-lt 2 ]; then" in warned and 'scontrol requeue "$SLURM_JOB_ID"' in warned
    # No limit, no warning.
    assert "#SBATCH --signal" not in _script(_spec(), time="UNLIMITED", signal_before=60)


def test_zero_nodes_rejected() -> None:
    with pytest.raises(ConfigError, match="nodes"):
        load_config(target="slurm", nodes=0)


def test_missing_container_rejected_before_submission(tmp_path: Path) -> None:
    target = SlurmTarget(load_config(target="slurm", slurm={"job_dir": str(tmp_path)}))
    with pytest.raises(ImageError, match="container image not found"):
        target.check(_spec(image=tmp_path / "missing.sif"))


def test_settings_defaults_are_safe() -> None:
    s = SlurmSettings()
    # Requeue is the site's (JobRequeue); no warning signal a workload may not handle.
    assert s.requeue is None and s.signal_before is None and s.max_requeues == 0
    assert s.tolerate_node_loss is True
    assert len(str(s.scratch_dir)) <= 20


# Issue 22, item 9: values that reach the script are data, never code.
@pytest.mark.parametrize(
    "value", ["/s/$(touch q)", "/s/`touch q`", '/s/"; touch q; "', "/s\ntouch q", "/s/a b"]
)
def test_hostile_scratch_dir_is_refused_in_one_line(value: str) -> None:
    """``scratch_dir`` sat inside double quotes: ``$(…)`` and backquotes ran on every
    node, a '"' or a line break ended the word.  Now only letters, digits and . _ - /."""
    with pytest.raises(ConfigError, match=r"slurm\.scratch_dir: .*letters, digits") as exc:
        _script(_spec(), scratch_dir=value)
    assert "\n" not in str(exc.value)


def test_scratch_line_is_one_word_with_slurms_ids(tmp_path: Path) -> None:
    """What each task's bash makes of the rendered SYNDEO_SCRATCH line."""
    text = _script(_spec(), scratch_dir="/scratch/u-1.x_y")
    (line,) = [ln.strip() for ln in text.splitlines() if "export SYNDEO_SCRATCH=" in ln]
    out = subprocess.run(
        ["bash", "-c", f'{line}; printf %s "$SYNDEO_SCRATCH"'],
        cwd=tmp_path,
        env={"SLURM_JOB_ID": "77", "SLURM_PROCID": "2"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "/scratch/u-1.x_y/sy-77-2"


@pytest.mark.parametrize(
    "value",
    [
        "/shared/u dir",
        "/shared/u\ntouch /tmp/x",
        "/shared/u\r",
        "/shared/#x",
        "/shared/'x'",
        '/shared/"x"',
        "/shared/a\\b",
        "/shared/100%j",
    ],
)
def test_job_dir_sbatch_cannot_read_is_refused_in_one_line(value: str) -> None:
    """The job dir is in ``#SBATCH --output=…``, read by sbatch, not bash: sbatch splits
    at whitespace, strips quotes and backslashes, ends at '#', expands '%'; after a line
    break the rest is a line of the script -- code."""
    with pytest.raises(ConfigError, match=r"slurm\.job_dir: .* holds ") as exc:
        _script(_spec(), job_dir=value)
    assert "\n" not in str(exc.value)


def test_job_dir_from_syndeo_home_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """No job_dir configured: it is $SYNDEO_HOME/slurm/jobs/<id>, checked at render time."""
    monkeypatch.setenv("SYNDEO_HOME", "/shared/u\ntouch /tmp/pwned #")
    target = SlurmTarget(load_config(target="slurm", slurm={"python": "/x/bin/python"}))
    with pytest.raises(ConfigError, match=r"slurm\.job_dir: '/shared/u\\ntouch") as exc:
        target.script(_spec())
    assert "\n" not in str(exc.value)


def test_the_secrets_file_exports_only_the_names_it_was_given(tmp_path: Path) -> None:
    """The script reads its secrets file by name: a line planted there (``BASH_ENV``,
    ``LD_PRELOAD``, ``PATH``, which bash or every later command would act on) is ignored
    with one line, and the launch key still arrives.  Run with bash, as the job runs it."""
    key = "ab" * 32
    text = _script(_spec(launch_key=key), time="00:30:00")
    start = text.index("while IFS='='")
    block = text[start : text.index("\n", text.index("done < ", start))]
    secrets = tmp_path / "job.sbatch.secrets"
    secrets.write_text(
        f"SYNDEO_LAUNCH_KEY={key}\nBASH_ENV=/tmp/evil\nLD_PRELOAD=/tmp/evil.so\nPATH=/tmp/evil\n"
    )
    planted = block[block.rindex("done < ") + len("done < ") :]
    script = block.replace(planted, shlex.quote(str(secrets))) + (
        '\nprintf "%s|%s|%s|%s" "$SYNDEO_LAUNCH_KEY" "${BASH_ENV-unset}" '
        '"${LD_PRELOAD-unset}" "$PATH"'
    )
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{key}|unset|unset|/usr/bin:/bin"
    assert done.stderr.count("not a secret this job was given") == 3, done.stderr
