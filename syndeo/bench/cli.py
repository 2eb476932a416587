"""``python -m syndeo.bench run|report``: argv -> BenchConfig -> result JSON.

Every user mistake ends as one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from syndeo.bench.errors import BenchError
from syndeo.bench.models import BenchConfig, BenchResult
from syndeo.core.errors import SyndeoError

# Top-level module -> the extra that installs it (pyproject.toml).
_EXTRA_OF = {
    "gymnasium": "bench",
    "mujoco": "bench",
    "matplotlib": "bench",
    "torch": "rllib",
    "tree": "rllib",
    "scipy": "rllib",
    "pandas": "rllib",
    "lz4": "rllib",
    "pyarrow": "rllib",
    "ormsgpack": "rllib",
    "tensorboardX": "rllib",
}


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m syndeo.bench")
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="measure rollout throughput on the Ray cluster")
    # "extend": both `--env A B` and `--env A --env B` (how the deploy config writes it) work.
    run.add_argument("--env", nargs="+", action="extend", help="'all' (default), names or ids")
    run.add_argument("--mode", nargs="+", action="extend", help="count (default) and/or collect")
    # Numbers left out are BenchConfig's defaults: declared there, once.
    run.add_argument("--protocol", default="paper", help="paper | steady")
    run.add_argument("--samples-per-cpu", type=int, default=None)
    run.add_argument("--repeats", type=int, default=None)
    run.add_argument("--envs-per-actor", type=int, default=None)
    run.add_argument("--hidden", type=_ints, default=[64, 64], help="e.g. 64,64")
    run.add_argument("--env-version", default="v5", help="v5 | v4 (MuJoCo ids)")
    run.add_argument("--steady-seconds", type=float, default=5.0)
    run.add_argument(
        "--workers", type=_ints, nargs="+", action="extend", help="actor counts: 1,2 or 1 2"
    )
    run.add_argument("--num-cpus", type=int, default=None, help="standalone Ray only")
    run.add_argument("--no-local-limit", action="store_true")
    run.add_argument("--rllib", action="store_true", help="also measure RLlib PPO sampling")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", type=Path, default=None, help="default: $SYNDEO_RESULT_PATH")
    rep = sub.add_parser("report", help="tables, plots and a Markdown page from results")
    rep.add_argument("results_dir", type=Path)
    rep.add_argument("--out", type=Path, default=Path("bench-report"))
    return p


def config_from_args(a: argparse.Namespace) -> BenchConfig:
    for mode in a.mode or []:
        if mode not in ("count", "collect"):
            raise BenchError(f"unknown mode {mode!r}: use count and/or collect")
    if a.protocol not in ("paper", "steady"):
        raise BenchError(f"unknown protocol {a.protocol!r}: use paper or steady")
    given = {
        k: v
        for k, v in (
            ("samples_per_cpu", a.samples_per_cpu),
            ("repeats", a.repeats),
            ("envs_per_actor", a.envs_per_actor),
        )
        if v is not None
    }
    try:
        return BenchConfig(
            envs=a.env or ["all"],
            modes=a.mode or ["count"],
            protocol=a.protocol,
            **given,
            hidden=tuple(a.hidden),
            env_version=a.env_version,
            steady_seconds=a.steady_seconds,
            workers=[w for group in a.workers for w in group] if a.workers else None,
            local_limit=not a.no_local_limit,
            rllib=a.rllib,
            seed=a.seed,
        )
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise BenchError(f"invalid {field}: {err['msg']} (got {err.get('input')!r})") from None


def check_run_args(args: list[str]) -> BenchConfig:
    """``run``'s arguments parsed and validated, starting nothing (BenchError, one line).

    What the launcher calls before a cluster starts, and the node again before Ray.
    """
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            a = _parser().parse_args(["run", *args])
    except SystemExit:
        lines = errors.getvalue().strip().splitlines() or ["invalid arguments"]
        raise BenchError(lines[-1].split("error: ", 1)[-1]) from None
    cfg = config_from_args(a)
    from syndeo.bench import envs as envmod

    envmod.check_registered(envmod.resolve(cfg.envs, cfg.env_version))
    return cfg


def _run(a: argparse.Namespace) -> None:
    from syndeo.bench import envs as envmod
    from syndeo.bench import resume
    from syndeo.bench.progress import BenchProgress, write_atomic
    from syndeo.bench.runner import run_benchmark

    cfg = config_from_args(a)
    # Refuse bad ids before Ray starts.
    envmod.check_registered(envmod.resolve(cfg.envs, cfg.env_version), required=True)
    if a.num_cpus is not None and a.num_cpus <= 0:
        raise BenchError("zero CPUs requested: the benchmark needs at least one CPU")
    out = a.out or (Path(p) if (p := os.environ.get("SYNDEO_RESULT_PATH")) else None)
    if out is None:
        raise BenchError("no output path: pass --out or set SYNDEO_RESULT_PATH")
    kept: list[BenchResult] = []
    saved = resume.path()  # kept across a requeue, where the scheduler gives one

    def checkpoint(partial: BenchResult) -> None:
        # Atomic (temp file + rename): the file is always a whole, valid result.
        write_atomic(out, partial.model_dump_json(indent=2))
        if saved is not None:
            write_atomic(saved, partial.model_dump_json(indent=2))
        kept[:] = [partial]

    prior = resume.load(cfg)
    if prior is not None:
        print(f"continuing from the checkpoint {saved}", file=sys.stderr)
    resume.install()
    try:
        with BenchProgress() as progress:
            result = run_benchmark(
                cfg, progress, num_cpus=a.num_cpus, checkpoint=checkpoint, prior=prior
            )
    except BaseException:
        if kept:
            n = len(kept[0].results)
            print(f"partial result ({n} measurement(s), marked partial): {out}", file=sys.stderr)
        raise
    write_atomic(out, result.model_dump_json(indent=2))
    resume.remove()  # finished: nothing to continue
    _print_summary(result)
    if a.out is not None:
        # Under a node (SYNDEO_RESULT_PATH) the file is in the node's scratch: the launcher
        # says where the user's copy is (results/<cluster-id>/result.json).
        print(f"result: {out}")


def _print_summary(result: BenchResult) -> None:
    for r in result.results:
        line = (
            f"{r.env_id:28s} {r.mode:7s} x{r.workers:<3d} "
            f"{r.syndeo.mean:12,.0f} ± {r.syndeo.std:9,.0f} steps/s"
        )
        if r.ratio_local_limit is not None:
            line += f"  local-limit ratio {r.ratio_local_limit:.3f}"
        if r.ratio_rllib is not None:
            line += f"  vs RLlib {r.ratio_rllib:.1f}x"
        print(line)


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.cmd == "run":
            _run(a)
        else:
            from syndeo.bench.report import render_report

            page = render_report(a.results_dir, a.out)
            print(f"report: {page}")
    except SyndeoError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except ModuleNotFoundError as e:
        # An optional dependency this Python lacks: name the extra, not a traceback.
        extra = _EXTRA_OF.get((e.name or "").split(".")[0], "bench")
        print(
            f"error: the benchmark needs {e.name!r}, which {sys.executable} does not have: "
            f"pip install 'syndeo[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0
