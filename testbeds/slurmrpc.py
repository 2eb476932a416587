"""Counting the Slurm commands a launcher runs: a directory of wrappers put first on the
CI user's PATH, each logging its call and then exec'ing the real command.

Shared by ``benchmarks/slurm_polling.py`` (requests per minute) and the real-cluster
test of the launcher's batched queries (tests/slurm/test_polling.py).  The wrappers are
plain shell: whatever runs the launcher (``deploy``, ``up``'s watcher, ``down``) finds
them through PATH, without a line of the launcher knowing.
"""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path

from testbeds.users import give_to_ci_user

COMMANDS = ("squeue", "scontrol", "sacct", "sbatch", "scancel", "sinfo")
# Job-state questions (the ones a following launcher repeats); the rest submit, cancel
# or check a partition once.
QUERIES = ("squeue", "sacct", "scontrol show job")


@dataclass(frozen=True)
class Call:
    at: float  # epoch seconds
    argv: list[str]
    job: str  # the job it ran in (a node's batch script), "" for the launcher's own

    @property
    def rpc(self) -> bool:
        """True if the command asks slurmctld (``scontrol show hostnames`` does not: it
        only expands a host list)."""
        return self.argv[:3] != ["scontrol", "show", "hostnames"]

    @property
    def query(self) -> bool:
        return any(" ".join(self.argv).startswith(q) for q in QUERIES)


def make_wrappers(root: Path) -> tuple[Path, Path]:
    """Wrappers under ``root`` (owned by the CI user); (their dir, the log they append to)."""
    bindir, log = root / "slurm-bin", root / "slurm-calls.log"
    bindir.mkdir(mode=0o755)
    log.touch(mode=0o644)
    give_to_ci_user(log)
    for name in COMMANDS:
        real = shutil.which(name)
        assert real is not None, f"{name} is not installed"
        wrapper = bindir / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f'printf \'%s %s {name} %s\\n\' "$(date +%s.%N)" "${{SLURM_JOB_ID:--}}" "$*" >> {log}\n'
            f'exec {real} "$@"\n'
        )
        wrapper.chmod(0o755)
    return bindir, log


def user_path(bindir: Path) -> str:
    """The CI user's PATH with the wrappers first (testbeds.users.as_user's default after)."""
    return f"{bindir}:/usr/local/bin:/usr/bin:/bin"


def read_calls(log: Path) -> list[Call]:
    calls = []
    for line in log.read_text().splitlines():
        stamp, job, *argv = line.split()
        calls.append(Call(float(stamp), argv, "" if job == "-" else job))
    return calls


def rate(calls: list[Call], start: float, end: float) -> dict[str, object]:
    """What the launcher's calls within [start, end] cost slurmctld: count, per minute,
    by command, and the shortest gap between two of them (a job's own calls -- its
    batch script reads its end time once per node -- are not the launcher's)."""
    inside = [c for c in calls if start <= c.at <= end and c.rpc and not c.job]
    by_cmd: dict[str, int] = {}
    for c in inside:
        key = " ".join(c.argv[:3]) if c.argv[0] == "scontrol" else c.argv[0]
        by_cmd[key] = by_cmd.get(key, 0) + 1
    gaps = [b.at - a.at for a, b in itertools.pairwise(inside)]
    minutes = max(end - start, 1e-9) / 60
    queries = [c for c in inside if c.query]
    return {
        "window_s": round(end - start, 1),
        "rpc_calls": len(inside),
        "rpc_per_min": round(len(inside) / minutes, 2),
        "query_calls": len(queries),
        "query_per_min": round(len(queries) / minutes, 2),
        "by_command": by_cmd,
        "min_gap_s": round(min(gaps), 3) if gaps else None,
    }
