"""The watcher's rules for what the head's autoscaler asks (syndeo/launcher/autoscale.py):
signed or ignored, never beyond the user's bounds, only nodes `grow` added let go.

The target here is a small stand-in that records what it is asked to start and stop:
the rules are the launcher's own arithmetic, and the real clusters (local, Slurm, the
emulated AWS) run the whole path in test_autoscale_local.py and beside them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from syndeo.core import launchkey
from syndeo.core.errors import ConfigError, TargetError
from syndeo.launcher.autoscale import Scaler, check
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets import target_class
from syndeo.launcher.targets.base import Target
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import StatusRecord
from syndeo.rendezvous.base import SCALE_PURPOSE, DemandRecord


class _Recorder(Target):
    """Starts and stops nothing; keeps the ranks a real target would have added."""

    name = "recorder"

    def __init__(self) -> None:
        self.live: list[int] = []
        self.next_rank = 1
        self.calls: list[tuple[str, Any]] = []

    def default_rendezvous(self) -> str:
        return "file:///nowhere"

    def script(self, spec: ClusterSpec) -> str:
        return ""

    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        raise TargetError("not here")

    def poll(self, launched: Launched) -> int | None:
        return None

    def stop(self, launched: Launched) -> None:
        return None

    def added(self, launched: Launched, group: str) -> list[int]:
        return list(self.live)

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        new = list(range(self.next_rank, self.next_rank + nodes))
        self.next_rank += nodes
        self.live += new
        self.calls.append(("grow", nodes))
        return f"ranks {new}"

    def shrink(
        self,
        launched: Launched,
        group: str,
        nodes: int | None = None,
        ranks: set[int] | None = None,
    ) -> list[str]:
        gone = sorted(ranks or ())
        self.live = [r for r in self.live if r not in gone]
        self.calls.append(("shrink", gone))
        return [f"rank {r}" for r in gone]


def _setup(autostop_s: float | None = None) -> tuple[Scaler, _Recorder, ClusterSpec, Launched]:
    cfg = load_config(max_nodes=3, idle_timeout_s="30s")
    spec = ClusterSpec.from_config(cfg, rendezvous="file:///nowhere", cluster_id="rules")
    target = _Recorder()
    launched = Launched(target="local", cluster_id="rules", rendezvous="file:///x", started_at=0)
    return Scaler(target, spec, autostop_s, Ui()), target, spec, launched


def _status(record: DemandRecord | None, joined: list[int]) -> StatusRecord:
    return StatusRecord(
        phase="serving",
        nodes_expected=1,
        nodes_joined=joined,
        updated_at=time.time(),
        demand=record,
    )


def _demand(key: str | None, **fields: Any) -> DemandRecord:
    record = DemandRecord(cluster_id="rules", attempt=0, at=time.time(), **fields)
    if key is None:
        return record
    signature = launchkey.sign_record(key, SCALE_PURPOSE, record.model_dump(mode="json"))
    return record.model_copy(update={"signature": signature})


def test_signed_requests_are_followed_within_the_bounds() -> None:
    scaler, target, spec, launched = _setup()
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=1, want={"worker": 2}), [0]))
    assert target.calls == [("grow", 2)] and target.live == [1, 2]
    # Ray names the idle node to let go: exactly that one goes.
    demand = _demand(spec.launch_key, seq=2, want={"worker": 1}, release=[1])
    scaler.observe(launched, _status(demand, [0, 1, 2]))
    assert target.calls[-1] == ("shrink", [1]) and target.live == [2]
    # The same request read again does nothing more.
    scaler.observe(launched, _status(demand, [0, 2]))
    assert len(target.calls) == 2


def test_a_request_beyond_max_nodes_is_held_to_it() -> None:
    scaler, target, spec, launched = _setup()
    # max_nodes 3 with the head: at most 2 workers, whatever the signed record says.
    demand = _demand(spec.launch_key, seq=1, want={"worker": 1000})
    for _ in range(3):
        scaler.observe(launched, _status(demand, [0]))
    assert target.calls == [("grow", 2)] and target.live == [1, 2]


@pytest.mark.parametrize(
    "planted",
    [
        _demand(None, seq=1, want={"worker": 2}),  # unsigned
        _demand("ab" * 32, seq=1, want={"worker": 2}),  # signed with another key
    ],
)
def test_an_unsigned_or_forged_request_changes_nothing(planted: DemandRecord) -> None:
    scaler, target, _spec, launched = _setup(autostop_s=1)
    planted = planted.model_copy(update={"idle_since": time.time() - 3600})
    assert scaler.observe(launched, _status(planted, [0])) is False  # no autostop either
    assert target.calls == []


def test_a_signed_record_for_another_attempt_changes_nothing() -> None:
    scaler, target, spec, launched = _setup()
    record = _demand(spec.launch_key, seq=1, want={"worker": 2})
    other = record.model_copy(update={"attempt": 1})
    scaler.observe(launched, _status(other, [0]))
    assert target.calls == []


def test_nodes_asked_for_and_no_longer_wanted_go_unless_joined() -> None:
    scaler, target, spec, launched = _setup()
    scaler.observe(launched, _status(_demand(spec.launch_key, want={"worker": 2}), [0]))
    # Demand went before the nodes joined: the one not joined goes, the joined stays.
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=2, want={"worker": 0}), [0, 1]))
    assert target.calls[-1] == ("shrink", [2]) and target.live == [1]


def test_autostop_after_the_idle_time_of_a_signed_record() -> None:
    scaler, _, spec, launched = _setup(autostop_s=60)
    busy = _demand(spec.launch_key, idle_since=None)
    assert scaler.observe(launched, _status(busy, [0])) is False
    recent = _demand(spec.launch_key, idle_since=time.time() - 10)
    assert scaler.observe(launched, _status(recent, [0])) is False
    long_ago = _demand(spec.launch_key, idle_since=time.time() - 61)
    assert scaler.observe(launched, _status(long_ago, [0])) is True


@pytest.mark.parametrize(
    ("overrides", "verb", "said"),
    [
        ({"max_nodes": 3}, "deploy", "max_nodes and autostop are for clusters started with `up`"),
        ({"autostop_s": "30m"}, "deploy", "max_nodes and autostop are for clusters"),
        ({"autostop_grace_s": "5m"}, "up", "autostop_grace is a time after autostop: add"),
        (
            {"autostop_s": "30m", "autostop_grace_s": "5m"},
            "up",
            "autostop_grace is for VMs that can power themselves off",
        ),
        (
            {"target": "slurm", "autostop_s": "30m", "autostop_grace_s": 0},
            "up",
            "on slurm only the watcher stops an idle cluster",
        ),
        (
            {"target": "ssh", "ssh_hosts": "a,b", "max_nodes": 3},
            "up",
            r"on ssh a group that follows demand adds nodes only on hosts you list: give "
            r"it \[groups.ssh\] pool",
        ),
    ],
)
def test_autoscaling_where_it_cannot_be_is_one_line(
    overrides: dict[str, Any], verb: str, said: str
) -> None:
    cfg = load_config(**overrides)
    with pytest.raises(ConfigError, match=said):
        check(cfg, verb, target_class(cfg.target))


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"min_nodes": 4, "max_nodes": 3}, "min_nodes 4 is more than max_nodes 3"),
        ({"min_nodes": 2}, "min_nodes on its own means nothing: add max_nodes"),
        ({"nodes": 2, "max_nodes": 3}, "starts at min_nodes: leave nodes out"),
        ({"idle_timeout_s": "-5m"}, "is not a duration"),
        ({"autostop_s": 0}, "autostop_s: Input should be greater than 0"),
        ({"autostop_grace_s": "-5m"}, "is not a duration"),
        ({"autostop_grace_s": -1}, "autostop_grace_s: Input should be greater than or equal to 0"),
        (
            {"groups": [{"name": "cpu", "min_nodes": 3, "max_nodes": 2}]},
            "group 'cpu': min_nodes 3 is more than max_nodes 2",
        ),
        (
            {"head": "first", "groups": [{"name": "cpu", "max_nodes": 2}]},
            "holds the head and cannot follow demand",
        ),
    ],
)
def test_bad_bounds_are_one_line(overrides: dict[str, Any], said: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config(**overrides)


def test_check_refuses_what_up_would_refuse() -> None:
    """`check` runs the same rule as `up` for the settings only `up` takes."""
    from syndeo.launcher.preflight import check_deployment

    cfg = load_config(target="ssh", ssh_hosts="a,b", max_nodes=3, rendezvous="file:///tmp/x")
    with pytest.raises(ConfigError, match="on ssh a group that follows demand adds nodes only"):
        check_deployment(cfg)


@pytest.mark.parametrize(
    ("groups", "said"),
    [
        (
            [{"name": "cpu", "nodes": 1, "ssh": {"hosts": ["b"], "pool": ["c"]}}],
            r"group 'cpu': \[groups.ssh\] pool is for a group that follows demand",
        ),
        (
            [{"name": "cpu", "max_nodes": 2, "ssh": {"pool": ["c"]}}],
            "group 'cpu': max_nodes is 2 but its pool has 1 host",
        ),
        ([{"name": "cpu", "max_nodes": 1, "ssh": {"pool": ["a"]}}], "host a is listed twice"),
    ],
)
def test_a_bad_ssh_pool_is_one_line_before_anything_starts(
    groups: list[dict[str, Any]], said: str
) -> None:
    from syndeo.launcher.preflight import check_deployment

    layout = [{"name": "head"}, *groups]
    cfg = load_config(target="ssh", ssh_hosts="a", rendezvous="file:///tmp/x", groups=layout)
    with pytest.raises(ConfigError, match=said):
        check_deployment(cfg)
