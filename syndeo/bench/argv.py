"""The benchmark's command line, built in one place.

Shared by the launcher (``syndeo.launcher.config.BenchSettings``, the default workload) and
``invoke bench``; it lives outside the invoke tasks so that core modules never
import the CLI layer.
"""

from __future__ import annotations


def bench_argv(
    env: str = "all",
    mode: str = "count",
    protocol: str = "paper",
    samples_per_cpu: int = 1000,
    repeats: int = 4,
    envs_per_actor: int = 16,
    workers: str | None = None,
    rllib: bool = False,
    local_limit: bool = True,
    out: str | None = None,
) -> list[str]:
    """The workload argv; comma-separated lists become repeated values."""
    argv = ["python", "-m", "syndeo.bench", "run", "--env", *env.split(",")]
    argv += ["--mode", *mode.split(","), "--protocol", protocol]
    argv += ["--samples-per-cpu", str(samples_per_cpu), "--repeats", str(repeats)]
    argv += ["--envs-per-actor", str(envs_per_actor)]
    if workers:
        argv += ["--workers", workers]
    if rllib:
        argv.append("--rllib")
    if not local_limit:
        argv.append("--no-local-limit")
    if out:
        argv += ["--out", out]
    return argv
