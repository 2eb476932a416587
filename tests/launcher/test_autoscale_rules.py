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
from syndeo.core.errors import ConfigError, RendezvousError, TargetError
from syndeo.launcher.autoscale import TRANSIENT_S, Scaler, check
from syndeo.launcher.config import RecoverySettings, load_config
from syndeo.launcher.recovery import Recovery
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets import target_class
from syndeo.launcher.targets.base import NodeState, NodeView, StartRefused, Target
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import StatusRecord
from syndeo.rendezvous.base import SCALE_PURPOSE, DemandRecord, GroupUnavailable
from tests.support.launched import make_launched


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


class _Truthful(_Recorder):
    """Sees its nodes as a real target would: ``truth`` holds what a rank's machine does
    (default: runs); a rank that ended is reported once, then no longer listed."""

    def __init__(self) -> None:
        super().__init__()
        self.truth: dict[int, tuple[NodeState, str]] = {}

    def observe(self, launched: Launched, group: str, joined: set[int]) -> list[NodeView]:
        out = []
        for r in list(self.live):
            state, why = self.truth.get(r, (NodeState.STARTING, ""))
            if state in (NodeState.FAILED, NodeState.GONE):
                self.live.remove(r)
            elif state is NodeState.STARTING and r in joined:
                state = NodeState.JOINED
            out.append(NodeView(r, group, state, why))
        return out


def _setup(
    autostop_s: float | None = None, target: _Recorder | None = None, **cfg_fields: Any
) -> tuple[Scaler, _Recorder, ClusterSpec, Launched]:
    cfg = load_config(**({"max_nodes": 3, "idle_timeout_s": "30s"} | cfg_fields))
    spec = ClusterSpec.from_config(cfg, rendezvous="file:///nowhere", cluster_id="rules")
    target = target or _Recorder()
    launched = make_launched("local", "rules", "file:///x")
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


def _clocks(queue_s: float | None, start_s: float) -> dict[str, Any]:
    group = {"name": "worker", "max_nodes": 2, "queue_timeout_s": queue_s}
    return {"max_nodes": None, "groups": [group | {"start_timeout_s": start_s}]}  # head: its own


def test_a_node_that_ends_before_joining_is_said_backed_off_and_started_again() -> None:
    scaler, target, spec, launched = _setup(target=_Truthful())
    assert isinstance(target, _Truthful)
    ui = scaler.ui = _Lines()
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    assert target.calls == [("grow", 1)]
    target.truth[1] = (NodeState.FAILED, "Slurm job 7 was cancelled")
    scaler.observe(launched, want)
    assert "group worker: rank 1 ended before it joined: Slurm job 7 was cancelled" in ui.text
    assert target.calls == [("grow", 1)]  # not at once: the group backs off
    scaler.observe(launched, want)
    assert target.calls == [("grow", 1)]
    scaler.backoff["worker"].not_before = 0.0  # the backoff's time has come
    scaler.observe(launched, want)
    assert target.calls == [("grow", 1), ("grow", 1)] and target.live == [2]


class _Refusing(_Truthful):
    """Its starts are refused as a full queue refuses them (a quota)."""

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        self.calls.append(("grow", nodes))
        raise StartRefused("sbatch refused the job: QOSMaxSubmitJobPerUserLimit", "quota")


def test_the_head_is_told_which_groups_cannot_start_nodes_and_when_they_can_again() -> None:
    scaler, target, spec, launched = _setup(target=_Truthful())
    assert isinstance(target, _Truthful)
    told: list[tuple[dict[str, GroupUnavailable], int]] = []
    scaler.publish = lambda groups, seq: told.append((groups, seq))
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    # A new watcher tells the head first that every group can start nodes: what a former
    # one said (until it started again) no longer holds.
    assert [groups for groups, _ in told] == [{}]
    scaler.observe(launched, want)
    assert len(told) == 1  # nothing failed: nothing more said
    target.truth[1] = (NodeState.FAILED, "Slurm job 7 was cancelled")
    scaler.observe(launched, want)
    groups, seq = told[-1]
    assert list(groups) == ["worker"]
    assert groups["worker"].why == "rank 1 ended before it joined: Slurm job 7 was cancelled"
    assert groups["worker"].for_s is not None and 0 < groups["worker"].for_s <= TRANSIENT_S
    assert groups["worker"].on_way == 0
    scaler.observe(launched, want)
    assert len(told) == 2  # the same word is not said again
    scaler.backoff["worker"].not_before = 0.0  # the backoff's time has come
    scaler.observe(launched, want)
    assert told[-1][0] == {} and told[-1][1] > seq  # every group can start again


def test_the_nodes_still_on_their_way_are_told_with_a_group_that_cannot_start() -> None:
    scaler, target, spec, launched = _setup(target=_Truthful())
    assert isinstance(target, _Truthful)
    told: list[dict[str, GroupUnavailable]] = []
    scaler.publish = lambda groups, seq: told.append(groups)
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 2}), [0])
    scaler.observe(launched, want)
    assert target.live == [1, 2]
    target.truth[1] = (NodeState.FAILED, "Slurm job 7 was cancelled")
    scaler.observe(launched, want)
    assert told[-1]["worker"].on_way == 1  # rank 2 still comes


def test_a_permanent_refusal_is_unavailable_until_the_watcher_starts_again() -> None:
    scaler, _, spec, launched = _setup(target=_Refusing())
    told: list[dict[str, GroupUnavailable]] = []
    scaler.publish = lambda groups, seq: told.append(groups)
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0]))
    assert told[-1]["worker"].for_s is not None and told[-1]["worker"].for_s > TRANSIENT_S
    assert "QOSMaxSubmitJobPerUserLimit" in told[-1]["worker"].why
    scaler.backoff["worker"].stopped = True
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=2, want={"worker": 1}), [0]))
    assert told[-1]["worker"].for_s is None


def test_a_word_the_store_did_not_take_is_said_again_at_the_next_poll() -> None:
    scaler, _, spec, launched = _setup(target=_Refusing())
    scaler.ui = ui = _Lines()
    told: list[dict[str, GroupUnavailable]] = []

    def publish(groups: dict[str, GroupUnavailable], seq: int) -> None:
        if not told:
            told.append({})
            raise RendezvousError("the store did not answer")
        told.append(groups)

    scaler.publish = publish
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    assert "could not tell the head which groups cannot start nodes" in ui.text
    scaler.observe(launched, want)
    assert list(told[-1]) == ["worker"]


def test_a_node_let_go_that_left_before_the_poll_is_said_let_go_not_lost() -> None:
    """A released node drains and leaves by itself; a watcher slower than that (a busy
    launcher) sees it ended: still the autoscaler's release, said once, not a failure."""
    scaler, target, spec, launched = _setup(target=_Truthful())
    assert isinstance(target, _Truthful)
    ui = scaler.ui = _Lines()
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0]))
    scaler.observe(launched, _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0, 1]))
    target.truth[1] = (NodeState.GONE, "its process ended")
    released = _status(_demand(spec.launch_key, seq=2, want={"worker": 0}, release=[1]), [0])
    scaler.observe(launched, released)
    scaler.observe(launched, released)
    assert ui.text.count("group worker: let go rank 1 (Ray's autoscaler; it had left)") == 1
    assert "ended" not in ui.text and scaler.backoff["worker"].failures == 0
    assert target.calls == [("grow", 1)] and target.live == []


@pytest.mark.parametrize(
    ("state", "clocks", "said"),
    [
        (
            NodeState.QUEUED,
            (5.0, 600.0),
            "rank 1 given up after in the queue for 5 s (PartitionDown)",
        ),
        (NodeState.STARTING, (None, 5.0), "rank 1 given up after running, not joined for 5 s"),
    ],
)
def test_a_node_past_its_clock_is_cancelled_and_started_again_later(
    state: NodeState, clocks: tuple[float | None, float], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scaler, target, spec, launched = _setup(target=_Truthful(), **_clocks(*clocks))
    assert isinstance(target, _Truthful)
    ui = scaler.ui = _Lines()
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    target.truth[1] = (state, "PartitionDown" if state is NodeState.QUEUED else "")
    scaler.observe(launched, want)
    now[0] += 4.0
    scaler.observe(launched, want)
    assert target.calls == [("grow", 1)]  # within its clock: it may still come
    now[0] += 1.0
    scaler.observe(launched, want)
    assert said in ui.text and target.calls == [("grow", 1), ("shrink", [1])]
    assert target.live == [] and "next start in" in ui.text
    now[0] = scaler.backoff["worker"].not_before
    scaler.observe(launched, want)
    assert target.calls[2:] == [("grow", 1)] and target.live == [2]


def test_a_queue_without_a_clock_waits_as_long_as_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    scaler, target, spec, launched = _setup(target=_Truthful(), **_clocks(None, 5.0))
    assert isinstance(target, _Truthful)
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    target.truth[1] = (NodeState.QUEUED, "Resources")
    for _ in range(3):
        now[0] += 86400.0
        scaler.observe(launched, want)
    assert target.calls == [("grow", 1)]


def test_a_lost_node_of_a_group_that_follows_demand_uses_no_replacement() -> None:
    scaler, target, spec, launched = _setup(target=_Truthful())
    want = _status(_demand(spec.launch_key, seq=1, want={"worker": 1}), [0])
    scaler.observe(launched, want)
    scaler.observe(launched, _status(want.demand, [0, 1]))
    settings = RecoverySettings(replace_lost=True, max_replacements=1)
    recovery = Recovery(target, spec, settings, Ui(quiet=True))
    lost = _status(want.demand, [0, 1]).model_copy(update={"nodes_lost": [1]})
    recovery.observe(launched, lost)
    assert recovery.left == 1 and "follows demand" in recovery.events[0]["replaced"]


class _Lines(Ui):
    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.text = ""

    def info(self, msg: Any) -> None:
        self.text += f"{msg}\n"


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
