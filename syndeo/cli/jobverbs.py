"""``submit``, ``jobs``, ``logs``, ``cancel``, ``fetch``: jobs on an ``up`` cluster, for
both front ends, over the Python API (:class:`syndeo.api.Cluster`).

Exit status of ``submit --follow`` and ``logs --follow``: the job's own (0 when it
succeeded, its exit code when it failed, 130 when cancelled, 2 when rejected).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.table import Table

from syndeo.api import Cluster, ended, exit_status
from syndeo.launcher import job_client
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import JobState


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _say_end(ui: Ui, state: JobState | None) -> None:
    if state is not None:
        ui.info(ended(state))


def run_submit(
    command: list[str],
    cluster_id: str | None = None,
    workdir: Path | None = None,
    env: list[str] | None = None,
    exclude: list[str] | None = None,
    follow: bool = False,
    ui: Ui | None = None,
    requirements: Path | None = None,
) -> int:
    ui = ui or Ui()
    job_client.check_request(command, env)  # before the cluster is looked for
    job = Cluster.attach(cluster_id).submit(
        command,
        workdir=workdir or Path.cwd(),
        requirements=requirements,
        env=env,
        exclude=exclude or (),
        ui=ui,
    )
    print(job.id, flush=True)
    if not follow:
        ui.info(f"submitted to {job.cluster.id}: syndeo logs {job.id} --follow")
        return 0
    state = job.stream(_write, follow=True)
    _say_end(ui, state)
    return exit_status(state)


def run_jobs(cluster_id: str | None = None, ui: Ui | None = None) -> int:
    ui = ui or Ui()
    rdv, found = job_client.list_jobs(cluster_id)
    table = Table(title=f"jobs of {rdv.cluster_id}", title_justify="left")
    for name in ("job", "command", "state", "started", "duration", "exit"):
        table.add_column(name, overflow="fold")
    now = time.time()
    for spec, state in found:
        start = state.started_at
        end = state.ended_at or (now if state.state == "running" else None)
        table.add_row(
            spec.job_id,
            " ".join(spec.command),  # a Text cell: never read as markup
            state.state,
            time.strftime("%H:%M:%S", time.localtime(start)) if start else "",
            f"{end - start:.0f} s" if start and end else "",
            "" if state.exit_code is None else str(state.exit_code),
        )
    if found:
        ui.out.print(table, markup=False)
    else:
        ui.info(f"no jobs on {rdv.cluster_id} yet")
    return 0


def run_logs(job: str, cluster_id: str | None = None, follow: bool = False) -> int:
    state = Cluster.attach(cluster_id).job(job).stream(_write, follow=follow)
    if follow:
        _say_end(Ui(), state)
        return exit_status(state)
    return 0


def run_cancel(job: str, cluster_id: str | None = None) -> int:
    state = Cluster.attach(cluster_id).job(job).cancel()
    if state.done:
        Ui().info(f"job {job} has ended already ({state.value})")
    else:
        Ui().info(f"asked the head to cancel {job}")
    return 0


def run_fetch(job: str, cluster_id: str | None = None, out: Path | None = None) -> int:
    found = Cluster.attach(cluster_id).job(job)
    dest = out or Path("results") / found.cluster.id / "jobs" / job
    files = found.fetch(dest)
    Ui().info(f"{len(files)} file(s) of {job} in {dest}")
    return 0
