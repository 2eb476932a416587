"""Parallel workers (pytest-xdist, ``scripts/test``: ``-n 3 --dist loadgroup``).

Which tests may run beside which is said in one place, here, from the test directories
and the markers (never per test).  A group's tests all run on one worker, one after the
other:

* Each test bed is one group, run by one worker, in order: the local Slurm cluster
  (machine-wide: ``/etc/slurm``, its daemons, a lock), the SSH hosts, the emulated AWS
  and the Apptainer tests.  A bed's tests are those in its directory and those marked
  with its marker elsewhere.
* Every other module is a group of its own, so that a module-scoped fixture (a cluster
  several tests share) is set up once, by one worker.

The groups go to the workers in the order :func:`order` sorts them: the beds first (the
longest chains; those that need the test image after a few heavy modules, while it
builds), the modules that start Ray clusters or take long next, the quick ones last,
which fill in wherever a worker is free.  Inside a group the order is the serial
run's (tests/conftest.py: the modules that need the test image last, so that its build
in the background has time).

xdist's own ``xdist_group`` marks do not reach its scheduler under pytest 9 (it renames
``item._nodeid``, which pytest 9 no longer reads), so the groups travel another way:
each worker writes the group of every test it collected to a file the controller named
(:data:`GROUPS_VAR`), and the controller's scheduler (:func:`make_scheduler`, xdist's
load-scope scheduler) reads its work units from that file.

Each worker is a pytest session of its own: what the controller prints at the end
(the GPU tests not run, the tests the quick tier left out) is sent to it by the workers
(:func:`report_left`, :class:`Controller`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Bed groups, in the order they are handed out (:func:`order`).  A test in one of these
# directories, or marked with one of these markers, runs in that bed's group.
BEDS = ("slurm", "aws", "ssh", "apptainer")

# Heavy modules that need no test image handed out, per worker but the first, before
# the beds that need it (:func:`order`).
EARLY_PER_WORKER = 3

# Every test's time and worker in the last parallel run (the controller writes it).
TIMES = ROOT / ".testbed" / "test-times.json"

# The file the workers write the groups to (named by the controller).
GROUPS_VAR = "SYNDEO_TEST_GROUPS"

# Markers of modules that start Ray clusters or take long: handed out before the rest.
_HEAVY = ("cluster", "slow", "objectstore")


def in_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def grouped(config: pytest.Config) -> bool:
    """Whether this is a worker of a ``--dist loadgroup`` run."""
    return in_worker() and GROUPS_VAR in os.environ


def bed_of(item: pytest.Item) -> str | None:
    parts = item.nodeid.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in BEDS:
        return parts[1]
    for bed in BEDS:
        if item.get_closest_marker(bed) is not None:
            return bed
    return None


def group_of(item: pytest.Item) -> str:
    return bed_of(item) or item.nodeid.split("::")[0]


def write_groups(items: list[pytest.Item]) -> None:
    """On a worker: each collected test's group, for the controller's scheduler."""
    path = Path(os.environ[GROUPS_VAR])
    tmp = path.with_name(f"{path.name}.{os.environ['PYTEST_XDIST_WORKER']}")
    tmp.write_text(json.dumps({i.nodeid: group_of(i) for i in items}))
    tmp.replace(path)  # every worker collects the same tests: the last one written wins


def order(items: list[pytest.Item]) -> None:
    """Sort the groups in the order they are handed out (stable inside each).

    The test image builds in the background while the first groups run
    (scripts/test), and every bed but Slurm needs it from its first test: handed out
    first, two workers waited 80-90 s for the build.  So the Slurm bed goes first (its
    first tests need no image), then :data:`EARLY_PER_WORKER` heavy modules that need no
    image for each other worker, then the other beds, longest chain first."""
    module = {i: i.nodeid.split("::")[0] for i in items}
    image = {module[i] for i in items if {"built_image", "sif"} & set(i.fixturenames)}
    heavy = [
        module[i]
        for i in items
        if bed_of(i) is None and any(i.get_closest_marker(m) for m in _HEAVY)
    ]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    early = [m for m in dict.fromkeys(heavy) if m not in image][: EARLY_PER_WORKER * (workers - 1)]

    def rank(item: pytest.Item) -> int:
        bed = bed_of(item)
        if bed is not None:
            return 0 if bed == "slurm" else 1 + BEDS.index(bed)
        if module[item] in early:
            return 1
        return 1 + len(BEDS) + (0 if module[item] in heavy else 1)

    items.sort(key=rank)


def report_left(config: pytest.Config, **left: int) -> None:
    """On a worker: the counts the controller's summary prints."""
    out: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if out is not None:
        out["syndeo_left"] = left


def left(config: pytest.Config, what: str) -> int:
    """On the controller: that count, as the workers reported it."""
    return int(config.stash.get(_LEFT, {}).get(what, 0))


_LEFT = pytest.StashKey[dict[str, int]]()


class Controller:
    """A plugin on the xdist controller: the groups' scheduler, and what the workers
    report."""

    def __init__(self, config: pytest.Config) -> None:
        self._seen: dict[str, int] = {}
        self._times: list[dict[str, Any]] = []
        self._dir: Path | None = None
        if config.getoption("dist", "no") == "loadgroup":
            # Before the workers start: they inherit the variable.
            self._dir = Path(tempfile.mkdtemp(prefix="syndeo-test-groups-"))
            os.environ[GROUPS_VAR] = str(self._dir / "groups.json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if self._dir is None:
            return None
        return make_scheduler(config, log, self._dir / "groups.json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        out = getattr(node, "workeroutput", None) or {}
        for key, n in out.get("syndeo_left", {}).items():
            # Every worker collects the same tests: the counts are the same.
            self._seen[key] = max(self._seen.get(key, 0), int(n))
        node.config.stash[_LEFT] = self._seen

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker xdist says sent it
        worker = str(getattr(getattr(node, "gateway", None), "id", "main"))
        self._times.append(
            {
                "test": report.nodeid,
                "when": report.when,
                "s": round(report.duration, 2),
                "worker": worker,
                "at": round(time.time(), 1),
            }
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Each worker's busy seconds and each bed's, so that whoever trims the suite
        sees its longest chain; every test's time goes to :data:`TIMES`."""
        if not self._times:
            return
        busy: dict[str, float] = {}
        done: dict[str, float] = {}  # when each worker finished its last test
        start = min(t["at"] - t["s"] for t in self._times)
        for t in self._times:
            busy[t["worker"]] = busy.get(t["worker"], 0.0) + t["s"]
            done[t["worker"]] = max(done.get(t["worker"], 0.0), t["at"] - start)
        beds: dict[str, float] = {}
        for t in self._times:
            parts = t["test"].split("/")
            if len(parts) > 2 and parts[1] in BEDS:
                beds[parts[1]] = beds.get(parts[1], 0.0) + t["s"]
        TIMES.parent.mkdir(exist_ok=True)
        TIMES.write_text(
            json.dumps({"busy_s": busy, "done_s": done, "bed_dirs_s": beds, "tests": self._times})
        )
        if set(busy) == {"main"}:
            return  # a serial run: its one worker's time is pytest's own total
        terminalreporter.write_line(
            "busy per worker (done at): "
            + ", ".join(
                f"{w} {s / 60:.1f} min ({done[w] / 60:.1f})" for w, s in sorted(busy.items())
            )
            + "; per bed directory: "
            + ", ".join(f"{b} {s / 60:.1f} min" for b, s in sorted(beds.items()))
            + f" ({TIMES.relative_to(ROOT)})"
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            os.environ.pop(GROUPS_VAR, None)


def make_scheduler(config: pytest.Config, log: Any, groups: Path) -> Any:
    """xdist's load-scope scheduler with the groups as its scopes, handed out in the
    order the tests were collected (:func:`order`), not largest first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False
            self._groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # all workers have collected by now
                self._groups = json.loads(groups.read_text())
            return self._groups.get(nodeid) or nodeid.split("::")[0]

    return GroupScheduling(config, log)
