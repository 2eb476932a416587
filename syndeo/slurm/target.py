"""The Slurm target: render the job, ``sbatch --parsable`` it, report on it, cancel it.

Every node runs the one per-node command built by ``syndeo.container.node_command``
(see :mod:`syndeo.slurm.render`).  Progress (nodes joining, running, done) and the
result come through the rendezvous like on every target; this module adds what only
Slurm knows: the queue state (pending and why), the job log, and why a job ended early.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from syndeo.config import DeployConfig
from syndeo.errors import ClusterLeftRunning, ImageError, TargetError
from syndeo.rendezvous.file import parse_file_uri
from syndeo.slurm import jobs
from syndeo.slurm.render import RUNTIME_VARS, SlurmJob, render
from syndeo.slurm.settings import JobShape, SlurmSettings
from syndeo.state import home
from syndeo.targets.base import ClusterSpec, Launched, Target, new_cluster_id

CANCEL_WAIT_S = 90.0
_EXIT_BY_STATE = {"CANCELLED": 143, "TIMEOUT": 124, "NODE_FAIL": 1, "PREEMPTED": 143}
_WHY = {
    "CANCELLED": "was cancelled (scancel, or by an administrator)",
    "TIMEOUT": "hit its time limit (raise slurm.time)",
    "NODE_FAIL": "lost a node (the head's node failed)",
    "PREEMPTED": "was preempted by a higher-priority job",
    "BOOT_FAIL": "could not boot its nodes",
    "OUT_OF_MEMORY": "ran out of memory",
    "DEADLINE": "missed its deadline",
}


class SlurmTarget(Target):
    name = "slurm"

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        self.settings = SlurmSettings.parse(cfg.slurm)
        self._log_pos = 0
        self._last_state = ""
        self._head_lost = ""

    # ------------------------------------------------------------------ building the job
    def _base_dir(self) -> Path:
        return self.settings.job_dir or home() / "slurm"

    def default_rendezvous(self) -> str:
        # On the shared filesystem every node and the login node see.
        return (self._base_dir() / "rendezvous").as_uri()

    def _job(self, spec: ClusterSpec) -> SlurmJob:
        placeholder = self.settings.scratch_dir / "x"
        env = spec.node_env(0, placeholder)
        env = {k: v for k, v in env.items() if k not in RUNTIME_VARS}
        # Rendezvous credentials by reference, never by value: the job inherits them
        # from the submitting environment (sbatch's default --export=ALL), and the
        # script (on disk, in Slurm's state, in --dry-run) names them only.
        env.update({k: f"@@{k}@@" for k in spec.passthrough_names()})
        env["SYNDEO_TARGET"] = "slurm"
        binds: list[Path] = [*self.settings.binds]
        if spec.rendezvous.startswith("file:"):
            binds.append(parse_file_uri(spec.rendezvous))
        if spec.workdir is not None:
            binds.append(spec.workdir)
        return SlurmJob(
            cluster_id=spec.cluster_id,
            settings=self.settings,
            shape=JobShape(
                nodes=spec.nodes,
                cpus_per_node=spec.cpus,
                gpus_per_node=spec.gpus,
                memory_mb_per_node=spec.memory_mb,
            ),
            node_env=env,
            image=spec.image,
            job_dir=self._base_dir() / "jobs" / spec.cluster_id,
            binds=binds,
        )

    def script(self, spec: ClusterSpec) -> str:
        """The sbatch script (what ``--dry-run`` prints)."""
        return render(self._job(spec))

    def _check(self, spec: ClusterSpec) -> None:
        """Everything that can be known to fail, checked before anything is submitted."""
        if spec.image is not None and not spec.image.is_file():
            raise ImageError(
                f"container image not found: {spec.image} (build it with `invoke image`)"
            )
        jobs.check_partition(self.settings.partition, spec.nodes)

    # ------------------------------------------------------------------ the Target verbs
    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        self._check(spec)
        job = self._job(spec)
        try:
            job.job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise TargetError(f"cannot create job dir {job.job_dir}: {exc.strerror}") from None
        script = job.job_dir / "job.sbatch"
        script.write_text(render(job))
        job_id = jobs.submit(script)
        log = job.job_dir / f"slurm-{job_id}.out"
        if self.echo is not None:
            self.echo(f"slurm: submitted job {job_id}; log {log}")
        return Launched(
            target=self.name, cluster_id=spec.cluster_id, rendezvous=spec.rendezvous,
            started_at=spec.not_before,
            data={"job_id": job_id, "job_dir": str(job.job_dir), "log": str(log)},
        )  # fmt: skip

    def poll(self, launched: Launched) -> int | None:
        job_id = launched.data["job_id"]
        try:
            info = jobs.job_info(job_id, on_retry=self._say)
        except jobs.SlurmUnreachable as exc:
            # Not seeing the job says nothing about the job: it keeps running and must
            # never be cancelled for our blindness.  ``stop`` reads this mark.
            launched.data["unobserved"] = True
            raise ClusterLeftRunning(
                f"lost contact with Slurm ({exc}); job {job_id} was left running: follow it "
                f"with `squeue -j {job_id}` and its log {launched.data['log']} (results land "
                f"in the rendezvous {launched.rendezvous}), cancel it with `scancel {job_id}`"
            ) from None
        # A requeued job is a new attempt with its own rendezvous scope: tell the follower.
        launched.data["attempt"] = info.restarts
        self._report(info, launched)
        if info.state == "RUNNING" and info.batch_host and jobs.node_down(info.batch_host):
            # With --no-kill Slurm keeps a job whose batch host (rank 0, the head) died
            # RUNNING until its time limit: nothing can finish it any more, so end it.
            self._head_lost = info.batch_host
            jobs.cancel(info.job_id)
            return 1
        if not info.finished:
            return None
        return _exit_code(info, Path(launched.data["job_dir"]))

    def stop(self, launched: Launched) -> None:
        job_id = launched.data["job_id"]
        if launched.data.get("unobserved"):
            self._say(f"slurm: job {job_id} left running (not cancelled): `scancel {job_id}`")
            return
        if jobs.job_info(job_id, on_retry=self._say).finished:
            return
        jobs.cancel(job_id)
        # proctrack/cgroup ends every process of the job (daemonised ones too);
        # wait until Slurm says so, so "stopped" means nothing is left.
        deadline = time.monotonic() + CANCEL_WAIT_S
        delay = 0.1
        while not jobs.job_info(job_id).finished and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def describe(self, launched: Launched) -> str:
        try:
            info = jobs.job_info(launched.data["job_id"], deadline_s=30.0)
        except jobs.SlurmUnreachable as exc:
            return f"Slurm job {launched.data['job_id']}: {exc}; log: {launched.data['log']}"
        why = _WHY.get(info.state)
        if self._head_lost:
            why = f"lost its head node {self._head_lost} (rank 0) and was cancelled"
        if why is None:
            why = f"ended {info.state}" + (
                f" ({info.reason})" if info.reason not in ("", "None") else ""
            )
        tail = _error_tail(Path(launched.data["log"]))
        return f"Slurm job {info.job_id} {why}; log: {launched.data['log']}" + (
            f"; last error: {tail}" if tail else ""
        )

    # ------------------------------------------------------------------ progress
    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(f"slurm: {line}" if not line.startswith("slurm: ") else line)

    def _report(self, info: jobs.JobInfo, launched: Launched) -> None:
        if self.echo is None:
            return
        state = f"{info.state}:{info.reason}:{info.restarts}"
        if state != self._last_state:
            self._last_state = state
            if info.state == "PENDING":
                why = f" ({info.reason})" if info.reason not in ("", "None") else ""
                self.echo(f"slurm: job {info.job_id} pending{why}")
            elif info.state == "RUNNING":
                self.echo(f"slurm: job {info.job_id} running on {info.nodes}")
            elif info.restarts and info.state != "COMPLETED":
                self.echo(f"slurm: job {info.job_id} {info.state} (attempt {info.restarts})")
        for line in self._new_log_lines(Path(launched.data["log"])):
            if _relevant(line):
                self.echo(line)

    def _new_log_lines(self, log: Path) -> list[str]:
        try:
            with log.open("rb") as fh:
                fh.seek(self._log_pos)
                chunk = fh.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n") + 1  # only whole lines; the rest next time
        self._log_pos += end
        return chunk[:end].decode(errors="replace").splitlines()


def _relevant(line: str) -> bool:
    # Rank 0 (head + workload output), and anything that looks like a failure.
    return line.startswith("0: ") or "syndeo" in line or "rror" in line or "FATAL" in line


def _error_tail(log: Path) -> str:
    with contextlib.suppress(OSError):
        lines = log.read_text(errors="replace").splitlines()
        bad = [ln for ln in lines if "rror" in ln or "FATAL" in ln or "syndeo:" in ln]
        if bad:
            return bad[-1].strip()[:300]
    return ""


def _exit_code(info: jobs.JobInfo, job_dir: Path) -> int:
    if info.state == "COMPLETED":
        return info.exit_code
    if info.state == "UNKNOWN":
        # Forgotten by the controller: rank 0's own record still says how it ended.
        rcs = sorted(job_dir.glob("rank0.a*.rc"))
        with contextlib.suppress(OSError, ValueError):
            return int(rcs[-1].read_text().strip()) if rcs else 1
        return 1
    return info.exit_code or _EXIT_BY_STATE.get(info.state, 1)


def dry_run(cfg: DeployConfig) -> str:
    """The sbatch script ``deploy --target slurm --dry-run`` prints (nothing is submitted)."""
    target = SlurmTarget(cfg)
    uri = cfg.rendezvous or target.default_rendezvous()
    cluster_id = cfg.cluster_id or new_cluster_id("slurm")
    return target.script(ClusterSpec.from_config(cfg, uri, cluster_id))
