"""``status``: this user's clusters on this machine, as a table for people or ``--json``
(the work is in :mod:`syndeo.launcher.status`)."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from syndeo.launcher.status import SILENT_S, ClusterStatus, GroupNodes, clusters
from syndeo.launcher.ui import Ui

COLUMNS = (
    *("cluster", "target", "state", "nodes now", "age", "jobs running", "idle for"),
    *("autostop in", "cost so far", "per hour"),
)
# Wide enough for a row when nobody's terminal says how wide (a pipe, a file, a test).
PLAIN_WIDTH = 200


def duration(seconds: float | None) -> str:
    """40 s, 5m 03s, 2h 05m, 3d 04h ("" for None)."""
    if seconds is None:
        return ""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def _nodes(g: GroupNodes) -> str:
    """worker 2 of 0..3 (a group that follows demand), head 1 of 1 (a fixed one)."""
    now = "?" if g.now is None else str(g.now)
    bounds = f"{g.min}..{g.max}" if g.autoscaled else "?" if g.max is None else str(g.max)
    return f"{g.name} {now} of {bounds}"


def _state(r: ClusterStatus) -> str:
    silent = (
        r.status_age_s is not None
        and r.status_age_s > SILENT_S
        and r.state not in ("done", "failed")
    )
    return f"{r.state} (silent {duration(r.status_age_s)})" if silent else r.state


def _idle(r: ClusterStatus) -> str:
    if r.idle_signed is False:
        return "unknown (unsigned)"
    if r.idle_s is None:
        return ""
    return "busy" if r.idle_s == 0 else duration(r.idle_s)


def _autostop(r: ClusterStatus) -> str:
    if r.autostop_s is None:
        return "off"
    when = "?" if r.autostop_in_s is None else duration(r.autostop_in_s)
    return when if r.watcher else f"{when} (no watcher)"


def _money(r: ClusterStatus) -> tuple[str, str]:
    if r.unpriced is not None:
        return "unpriced", "unpriced"
    if r.usd_per_h is None or r.usd_so_far is None:
        return "", ""
    return f"${r.usd_so_far:,.2f}", f"${r.usd_per_h:,.3f}"


def _notes(rows: list[ClusterStatus]) -> str:
    """Why a cluster is unreachable or unpriced, or that its watcher died: one line
    each, below the table."""
    lines = [f"{r.cluster_id}: {r.error}" for r in rows if r.error is not None]
    lines += [f"{r.cluster_id}: unpriced: {r.unpriced}" for r in rows if r.unpriced is not None]
    lines += [
        # Short enough for the narrowest table: a caption wraps at the table's width.
        f"{r.cluster_id}: watcher not running; restart: `syndeo watch --cluster-id {r.cluster_id}`"
        for r in rows
        if r.watcher_dead
    ]
    return "\n".join(lines)


def table(rows: list[ClusterStatus]) -> Table:
    out = Table(caption=_notes(rows) or None, caption_justify="left")
    for name in COLUMNS:
        out.add_column(name, overflow="fold")
    for r in rows:
        cells = [r.cluster_id, r.target, _state(r), "\n".join(_nodes(g) for g in r.groups)]
        cells += [duration(r.age_s), "" if r.jobs_running is None else str(r.jobs_running)]
        cells += [_idle(r), _autostop(r), *_money(r)]
        out.add_row(*(Text(c) for c in cells))  # store words as text, never markup
    return out


def render_table(rows: list[ClusterStatus], width: int = PLAIN_WIDTH) -> str:
    """The table as plain text at ``width`` columns (what a test compares)."""
    text = io.StringIO()
    Console(file=text, width=width, color_system=None, highlight=False).print(table(rows))
    return "".join(line.rstrip() + "\n" for line in text.getvalue().splitlines())


def render_json(rows: list[ClusterStatus]) -> str:
    return json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n"


def run_status(cluster_id: str | None = None, as_json: bool = False, ui: Ui | None = None) -> int:
    ui = ui or Ui()
    rows = clusters(cluster_id)
    if as_json:
        ui.out.file.write(render_json(rows))
    elif rows and ui.out.is_terminal:
        ui.out.print(table(rows))
    elif rows:
        ui.out.file.write(render_table(rows))
    else:
        ui.info("no cluster is up on this machine (start one with: syndeo up)")
    return 0
