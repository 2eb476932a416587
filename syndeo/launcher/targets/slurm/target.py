"""The Slurm target: render the job, ``sbatch --parsable`` it, report on it, cancel it.

Every node runs the one per-node command built by ``syndeo.launcher.command.node_command``
(see :mod:`syndeo.launcher.targets.slurm.render`).  Progress (nodes joining, running, done) and the
result come through the rendezvous like on every target; this module adds what only
Slurm knows: the queue state (pending and why), the job log, and why a job ended early.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from syndeo.core.errors import ClusterLeftRunning, ConfigError, ImageError, TargetError
from syndeo.core.groups import Group
from syndeo.core.nodeconfig import LAUNCH_KEY_VAR
from syndeo.core.poll import Poller
from syndeo.core.securedir import secure_dir, trusted_base
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.nodecreds import STS_MAX_S, node_credentials
from syndeo.launcher.spec import (
    ClusterSpec,
    Launched,
    Requeue,
    SlurmEntry,
    SlurmPart,
    saved_group,
)
from syndeo.launcher.state import home, private_dirs
from syndeo.launcher.targets.base import NodeState, NodeView, Target, rendezvous_binds
from syndeo.launcher.targets.slurm import commands, queue, watcher
from syndeo.launcher.targets.slurm.render import (
    RUNTIME_VARS,
    SlurmJob,
    render,
    script_name,
    secrets_path,
    secrets_text,
)
from syndeo.launcher.targets.slurm.settings import JobShape, SlurmSettings
from syndeo.rendezvous import gstoken, passthrough_env

CANCEL_WAIT_S = 90.0
_EXIT_BY_STATE = {"CANCELLED": 143, "TIMEOUT": 124, "NODE_FAIL": 1, "PREEMPTED": 143}
_WHY = {
    "CANCELLED": "was cancelled (scancel, or by an administrator)",
    "TIMEOUT": "hit its time limit (raise slurm.time, or let it continue: "
    "slurm.signal_before and slurm.max_requeues)",
    "NODE_FAIL": "lost a node (the head's node failed)",
    "PREEMPTED": "was preempted by a higher-priority job",
    "BOOT_FAIL": "could not boot its nodes",
    "OUT_OF_MEMORY": "ran out of memory",
    "DEADLINE": "missed its deadline",
}


class SlurmTarget(Target):
    name = "slurm"
    shows_head_output = True

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        self.settings = SlurmSettings.parse(cfg.slurm)
        self.group_settings = _group_settings(cfg, self.settings)
        self._log_pos = 0
        self._last_state = ""
        self._head_lost = ""
        self._group_states: dict[str, str] = {}
        # Every question about this cluster's jobs: batched, rate-limited, backing off.
        self._queue = queue.jobs()
        # (group, nodes) the partition was checked for: a watcher that grows a group
        # again and again asks sinfo once, not at every try.
        self._checked: set[tuple[str, int]] = set()

    # ------------------------------------------------------------------ building the job
    def _base_dir(self) -> Path:
        return self.settings.job_dir or home() / "slurm"

    def default_rendezvous(self) -> str:
        # On the shared filesystem every node and the login node see.
        return (self._base_dir() / "rendezvous").as_uri()

    def _job(
        self,
        spec: ClusterSpec,
        group: Group | None = None,
        rank_base: int | None = None,
        nodes: int | None = None,
    ) -> SlurmJob:
        """The job of the whole cluster, or (node groups) of one group's nodes."""
        settings = self.settings if group is None else self._settings_of(group.name)
        base = rank_base if rank_base is not None else (group.first_rank if group else 0)
        placeholder = settings.scratch_dir / "x"
        env = spec.node_env(base, placeholder, group=group)
        env = {k: v for k, v in env.items() if k not in RUNTIME_VARS}
        # Rendezvous credentials by reference, never by value: the job inherits them
        # from the submitting environment (sbatch's default --export=ALL), and the
        # script (on disk, in Slurm's state, in --dry-run) names them only.
        env.update({k: f"@@{k}@@" for k in spec.passthrough_names()})
        # The launch key the same way, but it is no variable of the launcher's own: sbatch
        # gets it in its environment (commands.submit), the script names it only.
        secret_env = {}
        if LAUNCH_KEY_VAR in env:
            secret_env[LAUNCH_KEY_VAR] = env[LAUNCH_KEY_VAR]
            env[LAUNCH_KEY_VAR] = f"@@{LAUNCH_KEY_VAR}@@"
        env["SYNDEO_TARGET"] = "slurm"
        binds: list[Path] = [*settings.binds, *rendezvous_binds(spec)]
        if spec.workdir is not None:
            binds.append(spec.workdir)
        shape = JobShape(
            nodes=spec.nodes,
            cpus_per_node=spec.cpus,
            gpus_per_node=spec.gpus,
            memory_mb_per_node=spec.memory_mb,
        )
        if group is not None:
            shape = JobShape(
                nodes=nodes or group.nodes,
                cpus_per_node=group.cpus,
                gpus_per_node=group.gpus,
                memory_mb_per_node=group.memory_mb,
            )
        elif nodes is not None:
            shape = shape.model_copy(update={"nodes": nodes})  # a replacement's one node
        return SlurmJob(
            cluster_id=spec.cluster_id,
            settings=settings,
            shape=shape,
            node_env=env,
            secret_env=secret_env,
            image=spec.image_for(group),
            job_dir=self._base_dir() / "jobs" / spec.cluster_id,
            binds=binds,
            group=group.name if group is not None else None,
            rank_base=base,
            head_job=base == 0,
            attempt_base=spec.attempt,
        )

    def _settings_of(self, group: str) -> SlurmSettings:
        return self.group_settings.get(group, self.settings)

    def _jobs(self, spec: ClusterSpec) -> list[SlurmJob]:
        """One job per node group (the head's first), or the one job of a cluster without."""
        if spec.layout is None:
            return [self._job(spec)]
        return [self._job(spec, g) for g in spec.layout.groups if g.nodes > 0]

    def script(self, spec: ClusterSpec) -> str:
        """The sbatch script(s) (what ``--dry-run`` prints)."""
        batch = self._jobs(spec)
        if len(batch) == 1:
            return render(batch[0])
        parts = []
        for i, job in enumerate(batch, 1):
            parts.append(
                f"# ==== job {i} of {len(batch)}: group {job.group}, submitted as "
                f"{job.job_dir / script_name(job)}\n" + render(job)
            )
        return "\n".join(parts)

    def check(self, spec: ClusterSpec) -> None:
        """Everything that can be known to fail (image, partition, GPUs), checked before
        the rendezvous is touched or anything is submitted."""
        watcher.check(self.settings, spec.rendezvous, home() / "clusters")
        if spec.layout is None:
            _check_image(spec.image)
            if self.settings.preflight:
                commands.check_partition(self.settings.partition, spec.nodes)
            return
        for g in spec.layout.groups:
            if g.nodes > 0:
                self._check_group(g, g.nodes)

    def _check_group(self, g: Group, nodes: int) -> None:
        _check_image(g.container)
        settings = self._settings_of(g.name)
        if not settings.preflight:
            return
        try:
            commands.check_partition(settings.partition, nodes)
        except ConfigError as exc:
            raise ConfigError(f"group {g.name!r}: {exc}") from None
        if g.gpus:
            commands.check_partition_gpus(
                settings.partition,
                settings.gres_name,
                g.gpus,
                nodes,
                f"group {g.name!r}",
                settings.gpu_type,
            )

    # ------------------------------------------------------------------ the Target verbs
    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        batch = self._jobs(spec)
        job = batch[0]
        base = self._base_dir()
        # The base and every level above it are taken as they are by secure_dir below:
        # whoever can write one of them (a group-writable project dir) could put their
        # own jobs/ in place of ours.  Checked before anything is made there, and again
        # once the levels mkdir adds exist (below a sticky /tmp, someone may win the race).
        trusted_base(base, "job dir base", "[slurm] job_dir")
        try:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise TargetError(f"cannot create job dir {base}: {exc.strerror}") from None
        trusted_base(base, "job dir base", "[slurm] job_dir")
        # The job dir holds the script, Slurm's log and the rank-0 exit status, under a
        # job_dir that other users may share: every level below it is ours and private,
        # or refused (one pre-created by someone else could hold a planted symlink).
        secure_dir(job.job_dir, base=base, what="job dir")
        submitted: list[SlurmEntry] = []
        try:
            for j in batch:
                # The other groups start once the head's job has: started before it,
                # their nodes would wait for a head that is still queued, and give up.
                after = [f"--dependency=after:{submitted[0].job_id}"] if submitted else []
                submitted.append(self._submit(j, after))
        except BaseException:
            for entry in submitted:  # all groups or none
                with contextlib.suppress(TargetError):
                    commands.cancel(entry.job_id)
            raise
        job_id = submitted[0].job_id
        log = job.job_dir / f"slurm-{job_id}.out"
        # The job's attempt is attempt_base plus its requeues (see poll).
        part = SlurmPart(
            job_id=job_id, job_dir=str(job.job_dir), log=str(log), attempt_base=spec.attempt
        )
        if spec.layout is not None:
            # What `grow` needs to add a group's nodes later, and `stop` to end them all.
            part.groups, part.next_rank, part.slurm = submitted, spec.nodes, self.cfg.slurm
            part.group_slurm = {g.name: g.slurm for g in spec.layout.groups}
        return Launched(
            target=self.name,
            cluster_id=spec.cluster_id,
            rendezvous=spec.rendezvous,
            started_at=spec.not_before,
            spec=spec if spec.layout is not None else None,
            attempt=spec.attempt,
            part=part,
        )

    def _submit(self, job: SlurmJob, options: Sequence[str] = ()) -> SlurmEntry:
        job = self._with_node_credentials(job)
        text = render(job)
        # A copy for the user (what ran), owner-only: it holds --run.  sbatch gets the
        # text itself on stdin (commands.submit), so nothing done to this file reaches the job.
        _write_private(job.job_dir / script_name(job), text)
        if job.secret_env:
            _write_private(secrets_path(job), secrets_text(job))
        # Its rank's name in the queue: a retry after an sbatch that did not answer adopts
        # the job it may have queued (commands.submit).
        marker = f"syndeo:{job.cluster_id}:{script_name(job).removesuffix('.sbatch')}"
        marker += f":a{job.attempt_base}"
        job_id = commands.submit(text, unset=job.unset_env, options=options, marker=marker)
        if self.echo is not None:
            what = f" (group {job.group}, {job.shape.nodes} node(s))" if job.group else ""
            self.echo(
                f"slurm: submitted job {job_id}{what}; log {job.job_dir / f'slurm-{job_id}.out'}"
            )
        return SlurmEntry(
            group=job.group, job_id=job_id, rank_base=job.rank_base, nodes=job.shape.nodes
        )

    def _with_node_credentials(self, job: SlurmJob) -> SlurmJob:
        """The job with credentials made for it (its cluster's prefix, its time limit)
        in place of the launcher's own: the script names them, sbatch gets the values
        (syndeo/launcher/nodecreds/).  Only real submissions make them: a dry run
        needs no credentials."""
        if self.cfg.node_credentials == "forward":
            return job  # the user chose to pass on their own (by reference, as always)
        uri = job.node_env.get("SYNDEO_RENDEZVOUS", "")
        limit = job.settings.time_limit_s()
        life = STS_MAX_S if limit is None else limit + float(job.node_env["SYNDEO_JOIN_TIMEOUT"])
        creds = node_credentials(uri, job.cluster_id, life)
        if self.echo is not None and creds.kind != "none":
            long = limit is None or life > STS_MAX_S
            self.echo(
                f"slurm: {creds.describe()}"
                + (" (shorter than the job may run)" if long and creds.expires_at else "")
            )
        if not creds.names:
            return job  # nothing made: what the launcher has is passed by reference
        forwarded = set(passthrough_env(uri))
        env = {k: v for k, v in job.node_env.items() if k not in forwarded}
        env.update({k: f"@@{k}@@" for k in creds.env})
        if gstoken.TOKEN_VAR in creds.env:
            # A job may queue past its token's hour: the launcher's renewals reach it in
            # the job dir too, which the nodes share (syndeo/rendezvous/gstoken.py).
            token = job.job_dir / gstoken.FILE_NAME
            private_dirs(token.parent)  # bound into the nodes' containers: it must exist
            env[gstoken.FILE_VAR] = str(token)
        return job.model_copy(
            update={
                "node_env": env,
                "secret_env": {**job.secret_env, **creds.env},
                "unset_env": sorted(forwarded - set(creds.env)),
            }
        )

    # ------------------------------------------------------------------ growing
    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        """Submit ``nodes`` more nodes of ``group`` that join the running head; the job id."""
        spec, g = self._saved_group(launched, group)
        part = launched.slurm
        base = part.next_rank if part.next_rank is not None else spec.nodes
        if (group, nodes) not in self._checked:
            self._check_group(g, nodes)
            self._checked.add((group, nodes))
        entry = self._submit(self._job(spec, g, rank_base=base, nodes=nodes))
        part.groups.append(entry)
        part.next_rank = base + nodes
        return entry.job_id

    grow_unit = 1  # a job holds its nodes together: one node each, to let each go alone

    def observe(self, launched: Launched, group: str, joined: set[int]) -> list[NodeView]:
        """Each added node by its job's state, from the one batched, paced query that
        covers every job of the cluster (queue.py): a job that is pending is QUEUED (with
        Slurm's reason), one that ended is GONE or FAILED with why."""
        self._queue.watch(*_job_ids(launched))
        out = []
        for e in launched.slurm.groups:
            if e.group != group or e.rank_base == 0 or e.gone:
                continue
            info = self._queue.info(e.job_id, on_retry=self._say)
            ranks = sorted(_job_ranks(e))
            if info.finished:
                e.gone = True  # reported once, here
                why = _WHY.get(info.state) or f"ended {info.state}"
                why = f"Slurm job {info.job_id} {why}"
                for r in ranks:
                    state = NodeState.GONE if r in joined else NodeState.FAILED
                    out.append(NodeView(r, group, state, why))
            elif info.state == "PENDING":
                reason = info.reason if info.reason not in ("", "None") else ""
                out += [NodeView(r, group, NodeState.QUEUED, reason) for r in ranks]
            else:
                out += [
                    NodeView(r, group, NodeState.JOINED if r in joined else NodeState.STARTING)
                    for r in ranks
                ]
        return out

    def added(self, launched: Launched, group: str) -> list[int]:
        return sorted(
            r
            for e in launched.slurm.groups
            if e.group == group and e.rank_base != 0 and not e.gone
            for r in _job_ranks(e)
        )

    def shrink(
        self,
        launched: Launched,
        group: str,
        nodes: int | None = None,
        ranks: set[int] | None = None,
    ) -> list[str]:
        """Cancel whole jobs of ``group`` (newest first, never the head's) until ``nodes``
        nodes are gone (default: every job of the group); ``ranks``: the jobs that hold
        exactly those ranks; the cancelled job ids."""
        self._saved_group(launched, group)
        self._queue.watch(*_job_ids(launched))
        entries = []
        for e in launched.slurm.groups:
            if e.group != group or e.rank_base == 0 or e.gone:
                continue
            if ranks is not None and not _job_ranks(e) <= ranks:
                continue
            if self._queue.info(e.job_id).finished:
                e.gone = True  # ended by itself (its node let go, or lost)
                continue
            entries.append(e)
        if not entries and ranks is not None:
            return []  # those nodes are gone already
        if not entries:
            raise ConfigError(f"group {group!r} has no running job to remove (the head stays)")
        chosen, removed = [], 0
        for e in sorted(entries, key=lambda e: -e.rank_base):
            if nodes is not None and removed >= nodes:
                break
            chosen.append(e)
            removed += e.nodes
        commands.cancel(*[e.job_id for e in chosen])  # one scancel
        for e in chosen:
            e.gone = True  # `added` reads the state, not the queue
        self._queue.hurry()
        return [e.job_id for e in chosen]

    # ------------------------------------------------------------------ recovery
    def replace(self, launched: Launched, spec: ClusterSpec, rank: int) -> str:
        """Submit a new one-node job for the lost worker ``rank``; the job id.

        A new job, not the lost rank's job resubmitted: without node groups that job
        is the whole cluster's, head included, and with them it holds the group's other
        ranks, still running (``--no-kill`` kept the job alive without the failed node).
        A one-node job touches nothing that runs, queues like any job (Slurm finds the
        node; it may share one with this cluster's other ranks, as jobs do) and is
        cancelled with the cluster.  Its node joins under the attempt that runs now.
        """
        if rank <= 0 or rank >= spec.nodes:
            raise TargetError(f"rank {rank} is not a worker of {spec.cluster_id}")
        group = spec.group_of(rank)
        attempt = launched.attempt_or(spec.attempt)
        job = self._job(
            spec.model_copy(update={"attempt": attempt}), group, rank_base=rank, nodes=1
        )
        extra = list(job.settings.extra_sbatch)
        lost_host = _host_of(launched, rank)
        if lost_host:
            # Until Slurm marks the failed node down (SlurmdTimeout) it would still
            # place the job there, where it could never start.
            extra.append(f"--exclude={lost_host}")
        # A requeued replacement would count as the next attempt, which has no head.
        settings = job.settings.model_copy(
            update={"extra_sbatch": extra, "requeue": False, "max_requeues": 0}
        )
        entry = self._submit(job.model_copy(update={"settings": settings}))
        entry.replaces = rank
        launched.slurm.replacements.append(entry)
        where = f", not on {lost_host}" if lost_host else ""
        return f"rank {rank} in Slurm job {entry.job_id}{where}"

    def _saved_group(self, launched: Launched, group: str) -> tuple[ClusterSpec, Group]:
        spec, g = saved_group(launched, group)
        # The group's Slurm settings as they were at `up` (this process has no config).
        part = launched.slurm
        self.settings = SlurmSettings.parse(part.slurm or {})
        self.group_settings[group] = SlurmSettings.parse(
            {
                **(part.slurm or {}),
                **part.group_slurm.get(group, {}),
                "requeue": False,
            },
            prefix=f"groups.{group}.slurm",
        )
        return spec, g

    def poll(self, launched: Launched) -> int | None:
        part = launched.slurm
        job_id = part.job_id
        self._queue.watch(*_job_ids(launched))  # one query covers every job of the cluster
        try:
            info = self._queue.info(job_id, on_retry=self._say)
        except commands.SlurmUnreachable as exc:
            # Not seeing the job says nothing about the job: it keeps running and must
            # never be cancelled for our blindness.  ``stop`` reads this mark.
            launched.unobserved = True
            raise ClusterLeftRunning(
                f"lost contact with Slurm ({exc}); job {job_id} was left running: follow it "
                f"with `squeue -j {job_id}` and its log {part.log} (results land "
                f"in the rendezvous {launched.rendezvous}), cancel it with `scancel {job_id}`"
            ) from None
        # A requeued job is a new attempt with its own rendezvous scope: tell the follower.
        attempt = part.attempt_base + info.restarts
        if attempt > launched.attempt_or(attempt):
            self._requeued(launched, info.job_id, attempt)
        launched.attempt = attempt
        if info.state == "RUNNING" and info.nodes and not part.hosts:
            # Which node runs which rank, recorded while all are there: a lost node
            # leaves the job's node list (--no-kill), and its replacement must avoid it.
            part.hosts = commands.hostnames(info.nodes)
        self._report(info, launched)
        if _head_node_lost(info):
            # With --no-kill Slurm keeps a job whose batch host (rank 0, the head) died
            # RUNNING until its time limit: nothing can finish it any more, so end it.
            self._head_lost = info.batch_host
            commands.cancel(info.job_id)
            return 1
        if not info.finished:
            return None
        return _exit_code(info, Path(part.job_dir), attempt)

    def summary(self, launched: Launched) -> dict[str, Any]:
        # Each requeue and why (deploy.json): a time limit told apart from a preemption.
        requeues = launched.slurm.requeues
        return {"requeues": [r.model_dump() for r in requeues]} if requeues else {}

    def _requeued(self, launched: Launched, job_id: str, attempt: int) -> None:
        """Say and record why the job runs again: its own requeue at the time-limit
        warning (the batch script leaves walltime.a<N>), or Slurm's (a preemption or a
        node failure)."""
        before = launched.attempt_or(0)
        walltime = (Path(launched.slurm.job_dir) / f"walltime.a{before}").exists()
        why = "time limit" if walltime else "preempted or a node failed"
        launched.slurm.requeues.append(Requeue(attempt=attempt, why=why, at=time.time()))
        if walltime:
            self._say(
                f"job {job_id} requeued itself at its time-limit warning: continues as "
                f"attempt {attempt} from its checkpoint"
            )
        else:
            self._say(
                f"job {job_id} was requeued by Slurm ({why}): runs again as attempt {attempt}"
            )

    def hurry(self) -> None:
        self._queue.hurry()

    def stop(self, launched: Launched) -> None:
        # Node groups: every group's job (grown ones too), the head's first; then the
        # jobs that replaced lost nodes.
        part = launched.slurm
        ids = [e.job_id for e in part.groups] or [part.job_id]
        ids += [e.job_id for e in part.replacements]
        if launched.unobserved:
            listed = " ".join(ids)
            self._say(f"slurm: job(s) {listed} left running (not cancelled): `scancel {listed}`")
            return
        self._queue.watch(*ids)
        running = [j for j in ids if not self._queue.info(j, on_retry=self._say).finished]
        commands.cancel(*running)

        # proctrack/cgroup ends every process of the job (daemonised ones too);
        # wait until Slurm says so, so "stopped" means nothing is left.  The queue asks
        # at most every MIN_INTERVAL_S, whatever the Poller's pace.
        def all_ended() -> bool | None:
            self._queue.hurry()
            running[:] = [j for j in running if not self._queue.info(j).finished]
            return True if not running else None

        if running:
            pace = Poller(start_s=queue.MIN_INTERVAL_S, max_s=queue.MIN_INTERVAL_S)
            pace.until(all_ended, time.monotonic() + CANCEL_WAIT_S)
        # Nothing of the cluster runs any more: its secrets go (a requeue needed them).
        for path in Path(part.job_dir).glob("*.secrets"):
            path.unlink(missing_ok=True)

    def start_watcher(
        self, launched: Launched, argv: list[str], env: dict[str, str], log: Path
    ) -> dict[str, Any] | None:
        if self.settings.watcher != "job":
            return None
        text = watcher.script(launched.cluster_id, self.settings, argv, env, log)
        _write_private(log.with_name("watcher.sbatch"), text)  # a copy: what ran
        job_id = commands.submit(text, export="NONE")
        self._say(f"slurm: the watcher runs as job {job_id}; log {log}")
        return {"job_id": job_id}

    def stop_watcher(self, entry: dict[str, Any]) -> None:
        job_id = str(entry["job_id"])
        self._queue.watch(job_id)
        if self._queue.info(job_id, on_retry=self._say).finished:
            return
        commands.cancel(job_id)
        pace = Poller(start_s=queue.MIN_INTERVAL_S, max_s=queue.MIN_INTERVAL_S)

        def ended() -> bool | None:
            self._queue.hurry()
            return True if self._queue.info(job_id).finished else None

        if not pace.until(ended, time.monotonic() + CANCEL_WAIT_S):
            raise TargetError(f"the watcher's job {job_id} did not end: `scancel {job_id}`")

    def describe(self, launched: Launched) -> str:
        part = launched.slurm
        try:
            info = self._queue.info(part.job_id, deadline_s=30.0)
        except commands.SlurmUnreachable as exc:
            return f"Slurm job {part.job_id}: {exc}; log: {part.log}"
        why = _WHY.get(info.state)
        if self._head_lost:
            why = f"lost its head node {self._head_lost} (rank 0) and was cancelled"
        if why is None:
            why = f"ended {info.state}" + (
                f" ({info.reason})" if info.reason not in ("", "None") else ""
            )
        tail = _error_tail(Path(part.log))
        return f"Slurm job {info.job_id} {why}; log: {part.log}" + (
            f"; last error: {tail}" if tail else ""
        )

    # ------------------------------------------------------------------ progress
    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(f"slurm: {line}" if not line.startswith("slurm: ") else line)

    def _report(self, info: commands.JobInfo, launched: Launched) -> None:
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
        for line in self._new_log_lines(Path(launched.slurm.log)):
            if _relevant(line):
                self.echo(line)
        for entry in launched.slurm.groups[1:]:
            # Other groups' jobs queue on their own: say when each starts or ends.
            with contextlib.suppress(commands.SlurmUnreachable):
                g = self._queue.info(entry.job_id, deadline_s=5.0)
                if self._group_states.get(g.job_id) != g.state:
                    self._group_states[g.job_id] = g.state
                    self.echo(f"slurm: group {entry.group} job {g.job_id} {g.state.lower()}")

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


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (0600), never through a link planted in its place."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a copy from an earlier submit, or whatever was put in its place
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _host_of(launched: Launched, rank: int) -> str:
    """The node that ran ``rank`` (one task per node, in node-list order), if known."""
    part = launched.slurm
    hosts = part.hosts
    if part.groups:
        # Node groups: the head job's list covers only its own group's ranks.
        head = part.groups[0]
        if not head.rank_base <= rank < head.rank_base + head.nodes:
            return ""
    return hosts[rank] if rank < len(hosts) else ""


def _check_image(image: Path | None) -> None:
    if image is not None and not image.is_file():
        raise ImageError(f"container image not found: {image} (build it with `syndeo build`)")


def _group_settings(cfg: DeployConfig, top: SlurmSettings) -> dict[str, SlurmSettings]:
    """Each group's [slurm] settings: the section with the group's own keys on top."""
    if cfg.layout is None:
        return {}
    if top.requeue or top.max_requeues:
        raise ConfigError(
            "slurm.requeue and slurm.max_requeues cannot be used with [[groups]]: each group "
            "is its own job, and a requeued head would start an attempt the other groups never join"
        )
    out = {}
    for g in cfg.layout.groups:
        for key in ("job_dir", "requeue", "max_requeues"):
            if key in g.slurm:
                raise ConfigError(f"groups.{g.name}.slurm.{key}: set it once, in [slurm]")
        # Never requeued (the site's JobRequeue included): see the refusal above.
        out[g.name] = SlurmSettings.parse(
            {**cfg.slurm, **g.slurm, "requeue": False}, prefix=f"groups.{g.name}.slurm"
        )
    return out


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


def _exit_code(info: commands.JobInfo, job_dir: Path, attempt: int) -> int:
    if info.state == "COMPLETED":
        return info.exit_code
    if info.state == "UNKNOWN":
        # Forgotten by the controller: rank 0's own record still says how it ended (the
        # job's last attempt's: the job dir keeps those of earlier launches too).
        with contextlib.suppress(OSError, ValueError):
            return int((job_dir / f"rank0.a{attempt}.rc").read_text().strip())
        return 1
    return info.exit_code or _EXIT_BY_STATE.get(info.state, 1)


def _job_ids(launched: Launched) -> list[str]:
    """Every job of the cluster: the head's, each group's (grown ones too), replacements'."""
    part = launched.slurm
    ids = [part.job_id]
    for entry in [*part.groups, *part.replacements]:
        ids.append(entry.job_id)
    return list(dict.fromkeys(ids))


def _head_node_lost(info: commands.JobInfo) -> bool:
    """The job runs without its batch host (rank 0, the head): with --no-kill Slurm takes
    a failed node out of the job's node list and keeps the job (this needs no query
    beyond the job's own: its node list and batch host)."""
    if info.state != "RUNNING" or not info.batch_host or not info.nodes:
        return False
    hosts = commands.hostnames(info.nodes)
    return bool(hosts) and info.batch_host not in hosts


def _job_ranks(entry: SlurmEntry) -> set[int]:
    """The ranks a group job holds."""
    return set(range(entry.rank_base, entry.rank_base + entry.nodes))
