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
    samples_per_cpu: int | None = None,
    repeats: int | None = None,
    envs_per_actor: int | None = None,
    workers: str | None = None,
    rllib: bool = False,
    local_limit: bool = True,
    out: str | None = None,
) -> list[str]:
    """The workload argv; comma-separated lists become repeated values.  A number left
    None is left out: the benchmark's own default (BenchConfig) applies."""
    argv = ["python", "-m", "syndeo.bench", "run", "--env", *env.split(",")]
    argv += ["--mode", *mode.split(","), "--protocol", protocol]
    numbers = {
        "--samples-per-cpu": samples_per_cpu,
        "--repeats": repeats,
        "--envs-per-actor": envs_per_actor,
    }
    for flag, value in numbers.items():
        if value is not None:
            argv += [flag, str(value)]
    if workers:
        argv += ["--workers", workers]
    if rllib:
        argv.append("--rllib")
    if not local_limit:
        argv.append("--no-local-limit")
    if out:
        argv += ["--out", out]
    return argv
