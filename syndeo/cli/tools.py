"""``bench``, ``report`` and ``build``: the benchmark, its report and the image.

Thin: the work is in :mod:`syndeo.bench` and :mod:`syndeo.image`.  A user's mistake is a
:class:`~syndeo.core.errors.SyndeoError` (one line, a non-zero exit).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from syndeo.core.errors import ConfigError


def run_bench(
    target: str | None = None,
    nodes: int | None = None,
    cpus_per_node: int | None = None,
    container: str | None = None,
    results_dir: Path | None = None,
    bench_envs: list[str] | None = None,
    bench_mode: str = "count",
    bench_repeats: int | None = None,
    bench_samples_per_cpu: int | None = None,
    protocol: str = "paper",
    envs_per_actor: int | None = None,
    workers: str | None = None,
    rllib: bool = False,
    local_limit: bool = True,
    out: Path | None = None,
) -> int:
    """The benchmark here (a private Ray; its JSON in ``out``) or, with ``target``, as
    the workload of a cluster deploy brings up and tears down."""
    from syndeo.bench.argv import bench_argv

    env = ",".join(bench_envs) if bench_envs else "all"
    how = (env, bench_mode, protocol, bench_samples_per_cpu, bench_repeats, envs_per_actor)
    if target is None:
        from syndeo.bench.cli import main
        from syndeo.bench.manifest import now_iso

        out = out or Path(results_dir or "results") / f"bench-{now_iso()}.json"
        return main(bench_argv(*how, workers, rllib, local_limit, str(out))[3:])
    from syndeo.cli.verbs import run_deploy

    argv = bench_argv(*how, workers, rllib, local_limit)
    run_deploy(
        target=target,
        nodes=nodes,
        cpus_per_node=cpus_per_node,
        container=container,
        results_dir=results_dir,
        run=shlex.join(argv),
    )
    return 0


def run_report(results_dir: Path = Path("results"), out: Path = Path("bench-report")) -> int:
    from syndeo.bench.report import render_report

    page = render_report(Path(results_dir), Path(out))
    print(f"report: {page}")
    return 0


def run_build(
    base: str = "debootstrap",
    output: Path | None = None,
    force: bool = False,
    extra_ca: Path | None = None,
    no_packer: bool = False,
    compression: str = "gzip",
    base_image: str | None = None,
    syndeo_wheel: Path | None = None,
) -> int:
    from syndeo.image import build as image_build

    if base not in ("debootstrap", "docker"):
        raise ConfigError(f"--base must be debootstrap or docker, not {base!r}")
    if compression not in ("gzip", "lz4"):
        raise ConfigError(f"--compression must be gzip or lz4, not {compression!r}")
    manifest = image_build.build(
        "docker" if base == "docker" else "debootstrap",
        Path(output) if output else None,
        force=force,
        extra_ca=Path(extra_ca) if extra_ca else None,
        compression="lz4" if compression == "lz4" else "gzip",
        use_packer=not no_packer,
        build_args={"BASE": base_image} if base_image else None,
        syndeo_wheel=Path(syndeo_wheel) if syndeo_wheel else None,
    )
    print(manifest.sif)
    return 0
