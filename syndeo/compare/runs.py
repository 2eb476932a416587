"""Measured runs: every ``deploy.json`` (and standalone benchmark result) below a directory.

Tolerant of what it may meet -- keys added later, summaries written before the
``machines``/``slurm`` keys existed, failed runs, results with nothing measured and
users' own workloads (noted and skipped) -- and strict about what it cannot price: an
unknown target, a file that is not JSON or not a valid result, a cloud run without its
machines, and every figure that would price wrongly without an error (a repeat that is
not a positive finite measurement, zero or negative durations, a node count or provider
that disagrees with the rest of the run).  Each of those is one line naming the file.

One CPU unit throughout: a CPU is what Ray counts -- a vCPU on a cloud instance, a
logical CPU (hardware thread) on an SMT machine.  ``Run.cpus_per_node`` is always that;
what a scheduler allocated and charges (Slurm) is ``charged_cpus_per_node``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from syndeo.bench.models import BenchResult
from syndeo.compare.errors import CompareError
from syndeo.core.clouds import CLOUDS, ONPREM, Cloud
from syndeo.core.clouds import TARGETS as ALL_TARGETS

CLOUD_TARGETS = CLOUDS
ONPREM_TARGETS = ONPREM
TARGETS = ALL_TARGETS


class MachineGroup(BaseModel):
    """One node group of a cloud run: its (resolved) instance type and how many ran."""

    model_config = ConfigDict(extra="ignore")

    name: str
    instance_type: str = Field(min_length=1)
    count: int = Field(ge=0)  # 0: declared for later, nothing ran


class Machines(BaseModel):
    """What a VM target started (deploy.json ``machines``)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    provider: Cloud | Literal["ssh"]
    region: str | None = None
    instance_type: str | None = None  # with groups: the top-level (default) type
    count: int = Field(ge=1)
    spot: bool = False
    # 0 would price the run at 0.00 $ all-in: never a silent zero.
    instance_seconds: float | None = Field(default=None, gt=0)
    groups: list[MachineGroup] | None = None  # [[groups]] runs: the types per group
    # Set when the cloud API was not the cloud's own (an emulator on the launcher's
    # machine): nothing ran on instances of this type.
    api_endpoint: str | None = None

    @model_validator(mode="after")
    def _groups_add_up(self) -> Machines:
        if self.groups is not None and sum(g.count for g in self.groups) != self.count:
            raise ValueError(
                f"the groups' counts add up to {sum(g.count for g in self.groups)}, "
                f"not to count {self.count}"
            )
        return self

    def billed(self) -> list[tuple[str, int]]:
        """(instance type, count) of what ran, group by group (groups without nodes ran
        nothing and are left out); without groups, ``count`` x ``instance_type``."""
        if self.groups:
            return [(g.instance_type, g.count) for g in self.groups if g.count > 0]
        return [(self.instance_type or "", self.count)]


class SlurmInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    partition: str | None = None
    cpus_per_node: int | None = None


class Timings(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    all_joined_s: float | None = Field(default=None, ge=0)
    workload_done_s: float | None = Field(default=None, ge=0)
    head_exit_s: float | None = Field(default=None, ge=0)
    # The on-prem all-in cost is cores x this: 0 would be a silent zero, < 0 a refund.
    teardown_done_s: float | None = Field(default=None, gt=0)


class DeploySummary(BaseModel):
    """The keys of ``deploy.json`` the comparison needs; others are ignored."""

    model_config = ConfigDict(extra="ignore")

    cluster_id: str
    target: str
    nodes: int = Field(ge=1)
    cpus_per_node: int = Field(ge=1)
    exit_code: int
    message: str = ""
    timings_s: Timings = Timings()
    result: str | None = None
    machines: Machines | None = None
    slurm: SlurmInfo | None = None


@dataclass
class Run:
    """One measured cluster (or standalone run) with what it cost to price it."""

    source: Path
    cluster_id: str
    target: str
    nodes: int
    cpus_per_node: int  # Ray CPUs: the unit of every throughput, per-CPU and fit figure
    wall_s: float | None
    result: BenchResult
    machines: Machines | None = None
    partition: str | None = None
    charged_cpus_per_node: int | None = None  # what Slurm allocated, if not the Ray CPUs

    @property
    def cpus(self) -> int:
        return self.nodes * self.cpus_per_node

    @property
    def charged_cpus(self) -> int:
        """CPUs an on-prem run is charged for: allocated ones (Slurm), else Ray's."""
        return self.nodes * (self.charged_cpus_per_node or self.cpus_per_node)

    @property
    def partial(self) -> bool:
        """Written by a benchmark that did not finish (result.json ``partial: true``)."""
        return self.result.partial

    @property
    def emulated(self) -> bool:
        """A cloud run against an emulated API: its throughput is that machine's."""
        return self.machines is not None and self.machines.api_endpoint is not None

    @property
    def hardware(self) -> str:
        """Instance type, partition or CPU model: what a row's throughput was measured on."""
        m = self.machines
        if m is not None and self.emulated:
            return f"EMULATED {self.result.manifest.cpu_model}"
        if m is not None and m.groups:
            return "+".join(t for t, _ in m.billed())
        if m is not None and m.instance_type:
            return m.instance_type
        if self.partition:
            return f"partition {self.partition}"
        return self.result.manifest.cpu_model


@dataclass
class Found:
    runs: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise CompareError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise CompareError(f"{path} is not valid JSON ({e})") from None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc']) or 'document'}: {err['msg']}"


def _is_bench(doc: Any) -> bool:
    return isinstance(doc, dict) and "manifest" in doc and "results" in doc


def _bench(path: Path, doc: Any) -> BenchResult:
    try:
        return BenchResult.model_validate(doc)
    except ValidationError as e:
        raise CompareError(f"{path} is not a valid benchmark result: {_first_error(e)}") from None


def _check_measured(path: Path, res: BenchResult) -> None:
    """Every repeat a positive, finite measurement: anything else would be averaged in
    (a negative rate), divide by zero or print a nonsense figure."""
    for r in res.results:
        where = f"{path}: {r.env_id} ({r.mode}, {r.workers} workers)"
        if r.workers < 1:
            raise CompareError(f"{where}: workers must be at least 1")
        if not r.syndeo.repeats:
            raise CompareError(f"{where}: no repeats measured")
        for i, x in enumerate(r.syndeo.repeats, start=1):
            bad = [
                f"{name} {value!r}"
                for name, value in (
                    ("samples", x.samples),
                    ("seconds", x.seconds),
                    ("steps_per_s", x.steps_per_s),
                )
                if not (math.isfinite(value) and value > 0)
            ]
            if bad:
                raise CompareError(
                    f"{where}: repeat {i} has {', '.join(bad)} (must be positive and finite)"
                )


def _measured(path: Path, res: BenchResult, name: str, found: Found) -> bool:
    """Checks ``res``; False (and noted) when it measured nothing to compare."""
    if not res.results:
        state = "an interrupted run's" if res.partial else "its"
        found.skipped.append(f"{name}: {state} result has no measurements ({path})")
        return False
    _check_measured(path, res)
    return True


def _result_path(summary: DeploySummary, deploy_json: Path) -> Path:
    # deploy.json records the path as written (relative to where deploy ran); the
    # result normally sits next to it, which also survives moving the directory.
    sibling = deploy_json.parent / "result.json"
    if sibling.is_file() or summary.result is None:
        return sibling
    return Path(summary.result)


def _from_deploy(path: Path, found: Found, claimed: set[Path]) -> None:
    s = _deploy_summary(path)
    if s.target in CLOUD_TARGETS:
        _check_priceable(path, s)
    result_path = _result_path(s, path)
    claimed.add(result_path.resolve())
    res = _deploy_result(s, result_path, found)
    if res is None:
        return
    if res.manifest.cluster_nodes != s.nodes:
        raise CompareError(
            f"{path}: {s.nodes} nodes but its result {result_path} measured a cluster of "
            f"{res.manifest.cluster_nodes}: is it the result of another run?"
        )
    found.runs.append(
        Run(
            source=path,
            cluster_id=s.cluster_id,
            target=s.target,
            nodes=s.nodes,
            cpus_per_node=s.cpus_per_node,
            wall_s=s.timings_s.teardown_done_s,
            result=res,
            machines=s.machines,
            partition=s.slurm.partition if s.slurm else None,
            charged_cpus_per_node=s.slurm.cpus_per_node if s.slurm else None,
        )
    )


def _deploy_summary(path: Path) -> DeploySummary:
    """``path`` as a deploy summary; an unknown target is named as such, not as a
    validation error."""
    doc = _load_json(path)
    if isinstance(doc, dict) and doc.get("target") not in TARGETS and "target" in doc:
        raise CompareError(
            f"{path}: unknown target {doc['target']!r} (known: {', '.join(TARGETS)})"
        )
    try:
        return DeploySummary.model_validate(doc)
    except ValidationError as e:
        raise CompareError(f"{path} is not a valid deploy summary: {_first_error(e)}") from None


def _check_priceable(path: Path, s: DeploySummary) -> None:
    """A cloud run names the machines it paid for, consistently with the run."""
    m = s.machines
    if m is None or not m.instance_type or not m.region:
        raise CompareError(
            f"{path}: a {s.target} run without machines.instance_type/region cannot be priced"
        )
    if m.instance_seconds is None:
        raise CompareError(f"{path}: a {s.target} run without machines.instance_seconds")
    # Either would price the run wrongly without a word: another cloud's catalog,
    # or fewer instances than the nodes it shows.
    if m.provider != s.target:
        raise CompareError(
            f"{path}: target {s.target} but machines.provider {m.provider}: "
            "which cloud's prices apply?"
        )
    if m.count != s.nodes:
        raise CompareError(
            f"{path}: {s.nodes} nodes but machines.count {m.count}: "
            "which is the number of instances paid for?"
        )


def _deploy_result(s: DeploySummary, result_path: Path, found: Found) -> BenchResult | None:
    """The run's checked benchmark result; None (and noted) when there is nothing to
    compare: a failed run, no result file, another workload's result, no measurements."""
    if s.exit_code != 0:
        found.skipped.append(f"{s.cluster_id}: failed (exit {s.exit_code}): {s.message}")
        return None
    if not result_path.is_file():
        found.skipped.append(f"{s.cluster_id}: no result file ({result_path})")
        return None
    doc = _load_json(result_path)
    if not _is_bench(doc):
        found.skipped.append(f"{s.cluster_id}: its workload's result is not a benchmark result")
        return None
    res = _bench(result_path, doc)
    if not _measured(result_path, res, s.cluster_id, found):
        return None
    return res


def _standalone(path: Path, found: Found) -> None:
    """A result of ``invoke bench`` without a cluster: one machine, priced on-prem."""
    doc = _load_json(path)
    if not _is_bench(doc):
        return  # some other JSON (a user's workload result, rendezvous timings)
    res = _bench(path, doc)
    m = res.manifest
    if m.target != "standalone":
        found.skipped.append(f"{path}: a {m.target} result without its deploy.json")
        return
    if not _measured(path, res, str(path), found):
        return
    wall = None
    if m.finished_at:
        try:
            wall = (
                datetime.fromisoformat(m.finished_at) - datetime.fromisoformat(m.started_at)
            ).total_seconds()
        except ValueError as e:  # not ISO 8601
            raise CompareError(f"{path}: manifest started_at/finished_at: {e}") from None
        except TypeError:  # one with a time zone, one without: no difference to take
            raise CompareError(
                f"{path}: manifest started_at and finished_at are not both with a time zone"
            ) from None
        if wall <= 0:
            raise CompareError(
                f"{path}: finished_at {m.finished_at} is not after started_at {m.started_at}"
            )
    # Each actor count it swept is a size of its own; the machine is "local".  The
    # run's wall time is shared out by each size's share of the measured seconds
    # (positive: checked above).
    total = sum(x.seconds for r in res.results for x in r.syndeo.repeats)
    for workers in sorted({r.workers for r in res.results}):
        rs = [r for r in res.results if r.workers == workers]
        share = sum(x.seconds for r in rs for x in r.syndeo.repeats) / total
        found.runs.append(
            Run(
                source=path,
                cluster_id=path.stem,
                target="local",
                nodes=1,
                cpus_per_node=workers,
                wall_s=None if wall is None else wall * share,
                result=res.model_copy(update={"results": rs}),
            )
        )


def find_runs(results_dir: Path) -> Found:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise CompareError(f"results directory not found: {results_dir}")
    found = Found()
    claimed: set[Path] = set()
    for path in sorted(results_dir.rglob("deploy.json")):
        _from_deploy(path, found, claimed)
    for path in sorted(results_dir.rglob("*.json")):
        if path.name != "deploy.json" and path.resolve() not in claimed:
            _standalone(path, found)
    if not found.runs:
        why = "; ".join(found.skipped) if found.skipped else "none found"
        raise CompareError(f"no benchmark results to compare in {results_dir} ({why})")
    return found
