"""The rollout benchmark on a real local Ray instance (shared by this module), small runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import ray

from syndeo.bench import BenchConfig, BenchError, BenchResult, render_report, run_benchmark
from syndeo.bench.envs import ENV_NAMES, env_id, resolve
from syndeo.bench.local_limit import measure_local_limit
from syndeo.bench.report import result_table
from syndeo.bench.rollout import Sampler, Trajectories

CPUS = 2


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """One Ray for the module: starting Ray costs ~5 s, the runs themselves far less."""
    ctx = ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False)
    yield str(ctx.address_info["gcs_address"])
    ray.shutdown()


@pytest.fixture(scope="module")
def sweep_results(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fixture results for the report: a 1- and 2-actor sweep, both modes, both baselines."""
    out = tmp_path_factory.mktemp("results")
    cfg = BenchConfig(
        envs=["CartPole", "Pendulum"],
        modes=["count", "collect"],
        samples_per_cpu=500,
        repeats=2,
        envs_per_actor=4,
        workers=[1, 2],
    )
    res = run_benchmark(cfg)
    (out / "sweep.json").write_text(res.model_dump_json(indent=2))
    return out


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syndeo.bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_env_constructs_and_steps(name: str) -> None:
    sampler = Sampler(env_id(name), 3, (64, 64), seed=1)
    try:
        traj = sampler.run(40, collect=True)
        assert isinstance(traj, Trajectories)
        assert len(traj) == 40 and traj.obs.shape[0] == 40
        assert np.isfinite(traj.obs).all() and np.isfinite(traj.rewards).all()
        assert sampler.run(7, collect=False) == 7
    finally:
        sampler.close()


def test_v4_ids_are_supported_and_recorded() -> None:
    assert resolve(["Ant", "CartPole"], "v4") == ["Ant-v4", "CartPole-v1"]
    assert len(resolve(["all"], "v5")) == 14
    sampler = Sampler("Hopper-v4", 2, (64, 64), seed=0)
    assert sampler.run(10, collect=False) == 10
    sampler.close()


@pytest.mark.cluster
def test_all_fourteen_envs_through_ray(ray_address: str) -> None:
    # One actor per env keeps this to 14 actor start-ups; sizes are covered elsewhere.
    cfg = BenchConfig(
        envs=["all"],
        samples_per_cpu=100,
        repeats=1,
        envs_per_actor=4,
        local_limit=False,
        workers=[1],
    )
    res = run_benchmark(cfg)
    assert [r.env_name for r in res.results] == list(ENV_NAMES)
    for r in res.results:
        assert r.workers == 1
        assert r.samples_counted == r.samples_requested == 100
        assert r.syndeo.mean > 0


@pytest.mark.cluster
@pytest.mark.parametrize("protocol", ["paper", "steady"])
def test_counts_add_up_exactly_in_both_modes(ray_address: str, protocol: str) -> None:
    # 1237 per CPU with 7 envs per actor: no chunk or step boundary divides it evenly.
    cfg = BenchConfig(
        envs=["CartPole", "Reacher"],
        modes=["count", "collect"],
        protocol=protocol,
        samples_per_cpu=1237,
        repeats=2,
        envs_per_actor=7,
        steady_seconds=0.3,
    )
    res = run_benchmark(cfg)
    assert len(res.results) == 4
    for r in res.results:
        if protocol == "paper":
            assert r.samples_requested == 1237 * CPUS
        assert r.samples_counted == r.samples_requested
        assert all(x.samples == r.samples_requested for x in r.syndeo.repeats)
        assert r.local_limit is not None and len(r.local_limit.repeats) == 2
        assert r.ratio_local_limit is not None and r.ratio_local_limit > 0
        assert len(r.peak_rss_per_actor_bytes) == CPUS
        assert all((x.actor_cpu_seconds or 0) > 0 for x in r.syndeo.repeats)
        assert r.steps_per_cpu_second is not None and r.steps_per_cpu_second > 0
        assert r.actor_niceness is not None
        assert all(m > 10 * 2**20 for m in r.peak_rss_per_actor_bytes)


def test_local_limit_alone_without_ray() -> None:
    s = measure_local_limit("Pendulum-v1", 2, 1001, repeats=2, collect=True, envs_per_actor=3)
    assert [r.samples for r in s.repeats] == [1001, 1001]
    assert s.mean > 0 and s.startup_s is not None


@pytest.mark.cluster
def test_cli_run_writes_valid_json_and_progress(ray_address: str, tmp_path: Path) -> None:
    result, progress = tmp_path / "r" / "result.json", tmp_path / "progress.json"
    env = {
        "RAY_ADDRESS": ray_address,
        "RAY_AUTH_MODE": "token",
        "SYNDEO_RESULT_PATH": str(result),
        "SYNDEO_PROGRESS_FILE": str(progress),
        "SYNDEO_TARGET": "test",
        "SYNDEO_IMAGE_DIGEST": "sha256:abc",
    }
    args = [
        "--env",
        "CartPole",
        "--env",
        "Acrobot",
        "--mode",
        "count",
        "collect",
        "--samples-per-cpu",
        "300",
        "--repeats",
        "2",
        "--envs-per-actor",
        "4",
    ]
    proc = run_cli("run", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(result.read_text())
    jsonschema.validate(doc, BenchResult.model_json_schema())
    res = BenchResult.model_validate(doc)
    m = res.manifest
    assert (m.target, m.cluster_cpus, m.image_digest) == ("test", CPUS, "sha256:abc")
    assert {"python", "ray", "gymnasium", "mujoco", "syndeo"} <= set(m.versions)
    assert m.started_at and m.finished_at and m.cpu_model
    assert [(r.env_id, r.mode) for r in res.results] == [
        ("CartPole-v1", "count"),
        ("CartPole-v1", "collect"),
        ("Acrobot-v1", "count"),
        ("Acrobot-v1", "collect"),
    ]
    assert all(len(r.syndeo.repeats) == 2 for r in res.results)
    assert not list(result.parent.glob(".*tmp"))  # atomic write left no temp file
    prog = json.loads(progress.read_text())
    assert set(prog) == {"samples", "samples_target", "steps_per_s", "env"}
    assert prog["samples"] == prog["samples_target"] == 300 * CPUS * 2
    assert prog["env"] == "Acrobot-v1"
    assert result_table(doc).row_count == 4


@pytest.mark.cluster
def test_schema_rejects_a_broken_result(ray_address: str, sweep_results: Path) -> None:
    doc = json.loads((sweep_results / "sweep.json").read_text())
    del doc["manifest"]["cluster_cpus"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, BenchResult.model_json_schema())


@pytest.mark.cluster
def test_report_renders_tables_plots_and_page(sweep_results: Path, tmp_path: Path) -> None:
    # A deploy leaves other JSON next to results; the report must skip it.
    (sweep_results / "local-abc").mkdir(exist_ok=True)
    (sweep_results / "local-abc" / "deploy.json").write_text('{"cluster_id": "local-abc"}')
    page = render_report(sweep_results, tmp_path / "report")
    text = page.read_text()
    pngs = sorted(p.name for p in (tmp_path / "report").glob("*.png"))
    assert pngs == [
        "bars-paper-collect.png",
        "bars-paper-count.png",
        "scaling-paper-collect.png",
        "scaling-paper-count.png",
    ]
    for png in pngs:
        data = (tmp_path / "report" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
        assert f"]({png})" in text
    # Tables I-IV rows: each env, mode and size; the smallest size is the ideal's base.
    for env in ("CartPole-v1", "Pendulum-v1"):
        for mode in ("count", "collect"):
            assert f"| {env} | paper | {mode} | 1 |" in text
            assert f"| {env} | paper | {mode} | 2 |" in text
    assert "| 245.6 |" in text  # the paper's CartPole per-CPU figure, side by side
    assert "Against the baselines" in text and "syndeo / local" in text


def test_report_of_an_empty_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no benchmark result JSON"):
        render_report(tmp_path, tmp_path / "out")
    proc = run_cli("report", str(tmp_path))
    assert proc.returncode != 0 and "no benchmark result JSON" in proc.stderr


@pytest.mark.cluster
def test_report_refuses_a_corrupt_result(sweep_results: Path, tmp_path: Path) -> None:
    doc = json.loads((sweep_results / "sweep.json").read_text())
    doc["results"][0]["syndeo"]["mean"] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(BenchError, match=r"bad.json is not a valid benchmark result: results.0"):
        render_report(tmp_path, tmp_path / "out")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "NoSuchEnv-v0"], "unknown environment 'NoSuchEnv-v0'"),
        (["--env", "CartPole", "--mode", "train"], "unknown mode 'train'"),
        (["--env", "CartPole", "--num-cpus", "0"], "zero CPUs"),
        (["--env", "CartPole", "--hidden", "64,0"], "hidden layers must be positive"),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_cli("run", *args, "--out", str(tmp_path / "r.json"))
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


@pytest.mark.cluster
def test_bad_input_through_the_library(ray_address: str) -> None:
    with pytest.raises(BenchError, match="unknown environment"):
        run_benchmark(BenchConfig(envs=["Nope"]))
    with pytest.raises(BenchError, match="do not fit"):
        run_benchmark(BenchConfig(envs=["CartPole"], workers=[CPUS + 1]))


def test_invoke_tasks_exit_with_the_error(tmp_path: Path) -> None:
    from invoke.context import Context
    from invoke.exceptions import Exit

    from syndeo.bench.argv import bench_argv
    from syndeo.cli.verb_tasks import verb_tasks

    tasks = verb_tasks()
    bench, report = tasks["bench"], tasks["report"]

    assert bench_argv("CartPole,Ant", "count,collect", workers="1,2")[4:10] == [
        "--env",
        "CartPole",
        "Ant",
        "--mode",
        "count",
        "collect",
    ]
    with pytest.raises(Exit) as exc:
        bench(Context(), env="Nope", out=str(tmp_path / "r.json"))
    assert exc.value.code == 2
    with pytest.raises(Exit) as exc:
        report(Context(), results_dir=str(tmp_path), out=str(tmp_path / "out"))
    assert exc.value.code == 2 and "no benchmark result JSON" in str(exc.value.message)


def test_the_benchmarks_numbers_have_one_default() -> None:
    """The paper's protocol (samples per CPU, repeats, envs per actor) is BenchConfig's:
    the command line, the deploy's [bench] settings and ``syndeo bench`` take it from
    there, so changing it there changes it everywhere."""
    from syndeo.bench.argv import bench_argv
    from syndeo.bench.cli import _parser, config_from_args
    from syndeo.launcher.config import BenchSettings

    argv = bench_argv()
    assert "--samples-per-cpu" not in argv and "--repeats" not in argv
    made = config_from_args(_parser().parse_args(argv[3:]))
    fields = BenchConfig.model_fields
    for name in ("samples_per_cpu", "repeats", "envs_per_actor"):
        assert getattr(made, name) == fields[name].default
    settings = BenchSettings()
    assert settings.samples_per_cpu == fields["samples_per_cpu"].default
    assert settings.repeats == fields["repeats"].default
