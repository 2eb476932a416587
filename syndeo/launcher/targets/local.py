"""The local target: N nodes as subprocesses of this machine.

Each node is a separate ``syndeo node`` process tree with its own raylet and its
own loopback address (127.0.0.10+rank), so a laptop cluster behaves like hosts on
a network while no packet leaves the machine.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import psutil

from syndeo.core import gpus
from syndeo.core.errors import ConfigError, TargetError
from syndeo.core.groups import Group
from syndeo.core.nodeconfig import LAUNCH_KEY_VAR
from syndeo.core.processes import ended, wait_gone
from syndeo.core.securedir import secure_dir
from syndeo.launcher import command
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.spec import ClusterSpec, Launched, LocalNode, LocalPart, saved_group
from syndeo.launcher.state import cluster_dir, home
from syndeo.launcher.targets.base import (
    SCRATCH_BASE,
    NodeState,
    NodeView,
    Target,
    rendezvous_binds,
    short_scratch,
)

MAX_LOCAL_NODES = 64
# What a dry run prints of a node's environment (never forwarded credentials).
_SHOWN = (
    "SYNDEO_",
    "APPTAINERENV_SYNDEO_",
    *sorted({f"APPTAINERENV_{v.visible}" for v in gpus.VENDORS.values()}),
    *sorted({f"APPTAINERENV_{v.ray_visible}" for v in gpus.VENDORS.values()}),
)
STOP_GRACE_S = 30.0


class LocalTarget(Target):
    name = "local"
    shows_head_output = True

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._threads: list[threading.Thread] = []

    def default_rendezvous(self) -> str:
        return (home() / "rendezvous").resolve().as_uri()

    def _binds(self, spec: ClusterSpec) -> list[Path]:
        """What a node's container sees of this machine besides its scratch: the cluster's
        own records (never the launcher's state beside them, nor other clusters'), and the
        program's work dir.  The node's log is written from outside (its stdout)."""
        return rendezvous_binds(spec) + ([spec.workdir] if spec.workdir is not None else [])

    def _node(
        self,
        spec: ClusterSpec,
        rank: int,
        binds: list[Path],
        visible: str | None,
        group: Group | None = None,
        gen: int = 0,
    ) -> tuple[list[str], dict[str, str], Path]:
        """``visible``: the node's devices (CUDA_VISIBLE_DEVICES, or ROCR's); ``group``: for
        ranks added by grow; ``gen``: > 0 for a replacement that runs next to its rank's
        old (drained) node, which keeps its own scratch dir and address."""
        scratch = short_scratch(spec, f"{rank}-{gen}" if gen else rank)
        # Credentials/endpoints of a cloud rendezvous included: they must survive
        # `apptainer --cleanenv`.
        ip = f"127.0.{gen}.{10 + rank}"
        node_env = spec.node_env(rank, scratch, node_ip=ip, group=group)
        if visible is not None:
            # This node's GPUs only (syndeo/core/gpus.py).
            node_env.update(gpus.device_env(gpus.vendor(spec.gpu_vendor), visible))
        image = spec.image_for(group or spec.group_of(rank))
        argv, env = command.node_command(image, node_env, [scratch, *binds])
        return argv, env, scratch

    def _devices(self, spec: ClusterSpec) -> list[str] | None:
        """Each rank's CUDA_VISIBLE_DEVICES (the machine's GPUs split), or None without GPUs."""
        per_node = [spec.node_settings(r, SCRATCH_BASE).gpus for r in range(spec.nodes)]
        if not any(per_node):
            return None
        v = gpus.vendor(spec.gpu_vendor)
        return gpus.split_devices(per_node, gpus.host_devices(os.environ, v), v)

    def script(self, spec: ClusterSpec) -> str:
        logs = home() / "clusters" / spec.cluster_id  # named, not created: a dry run writes nothing
        lines = ["#!/bin/sh", f"# syndeo local cluster {spec.cluster_id}: {spec.nodes} node(s)"]
        devices = self._devices(spec)
        for rank in range(spec.nodes):
            visible = devices[rank] if devices is not None else None
            argv, env, _ = self._node(spec, rank, self._binds(spec), visible)
            # Only our own variables: forwarded credentials are never printed.
            ours = {k: v for k, v in env.items() if k.startswith(_SHOWN)}
            # Nor the launch key: a dry run's key is not the real launch's, but a script
            # shown never holds a secret (a real launch passes it in the environment).
            ours = {k: v for k, v in ours.items() if not k.endswith(LAUNCH_KEY_VAR)}
            v = gpus.vendor(spec.gpu_vendor)
            if devices is not None and "APPTAINERENV_" + v.visible not in env:
                # A bare node: in its own environment.
                ours.update(gpus.device_env(v, devices[rank]))
            assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(ours.items()))
            lines.append(f"env {assigns} {shlex.join(argv)} > {logs}/node-{rank}.log 2>&1 &")
        lines.append("wait")
        return "\n".join(lines) + "\n"

    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        if spec.nodes > MAX_LOCAL_NODES:
            raise ConfigError(f"the local target runs at most {MAX_LOCAL_NODES} nodes")
        devices = self._devices(spec)  # before anything starts: too few GPUs is bad input
        logs = cluster_dir(spec.cluster_id)
        binds = self._binds(spec)
        launched = Launched(
            target=self.name,
            cluster_id=spec.cluster_id,
            rendezvous=spec.rendezvous,
            started_at=spec.not_before,
            part=LocalPart(devices=devices),  # a replaced rank sees the same GPUs
        )
        if spec.layout is not None:
            # What `grow` needs to add nodes later (the launcher is gone by then).
            launched.spec, launched.local.next_rank = spec, spec.nodes
        try:
            for rank in range(spec.nodes):
                visible = devices[rank] if devices is not None else None
                self._start_node(spec, rank, logs, binds, visible, launched, not detach)
        except BaseException:
            self.stop(launched)
            raise
        return launched

    def _start_node(
        self,
        spec: ClusterSpec,
        rank: int,
        logs: Path,
        binds: list[Path],
        visible: str | None,
        launched: Launched,
        foreground: bool,
        group: Group | None = None,
        gen: int = 0,
    ) -> None:
        argv, env, scratch = self._node(spec, rank, binds, visible, group, gen)
        secure_dir(scratch, base=SCRATCH_BASE)  # every level ours and private, or refused
        log_path = logs / (f"node-{rank}-{gen}.log" if gen else f"node-{rank}.log")
        log = open(log_path, "ab")  # noqa: SIM115 - owned by the child / reader thread
        pipe = foreground and rank == 0 and self.echo is not None
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=spec.workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipe else log,
                stderr=subprocess.STDOUT,
                # Own session: a terminal Ctrl-C reaches only the launcher, which then
                # tears nodes down in order instead of every process dying at once.
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise TargetError(f"cannot start local node {rank}: {exc}") from exc
        if pipe:
            assert proc.stdout is not None
            t = threading.Thread(target=self._relay, args=(proc.stdout, log), daemon=True)
            t.start()
            self._threads.append(t)
        else:
            log.close()
        self._procs[proc.pid] = proc
        part = launched.local
        part.pids.append(proc.pid)
        part.create_times.append(psutil.Process(proc.pid).create_time())
        part.logs.append(str(log_path))
        part.scratch.append(str(scratch))

    def _relay(self, stream: IO[bytes], log: IO[bytes]) -> None:
        with log:
            for line in iter(stream.readline, b""):
                log.write(line)
                log.flush()
                if self.echo is not None:
                    self.echo(line.decode(errors="replace").rstrip("\n"))

    def _ours(self, launched: Launched) -> list[psutil.Process]:
        procs = []
        part = launched.local
        pairs = zip(part.pids, part.create_times, strict=True)
        # Old nodes of replaced ranks that were left running (drained: see replace).
        for pid, ctime in [*pairs, *part.retired]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p = psutil.Process(pid)
                # A recycled PID belongs to someone else: leave it alone.
                if abs(p.create_time() - ctime) < 0.01 and not self._ended(p):
                    procs.append(p)
        return procs

    def _ended(self, proc: psutil.Process) -> bool:
        """A node started by this target is reaped by its Popen, which keeps its exit
        status (the head's is the run's); any other by :func:`ended`."""
        child = self._procs.get(proc.pid)
        return child.poll() is not None if child is not None else ended(proc)

    # ------------------------------------------------------------------ recovery
    def replace(self, launched: Launched, spec: ClusterSpec, rank: int) -> str:
        part = launched.local
        if rank == 0 or rank >= len(part.pids):
            raise TargetError(f"rank {rank} is not a worker of {spec.cluster_id}")
        # Whatever is left of the lost node goes first (its Ray may linger half-dead) --
        # unless it got a spot notice: drained, it runs on (as its VM would until the
        # cloud's deadline), and stop() still ends it.
        pid, ctime = part.pids[rank], part.create_times[rank]
        old_scratch = part.scratch[rank] if rank < len(part.scratch) else None
        gen = 0
        if rank in launched.draining:
            launched.draining.remove(rank)
            retired = part.retired
            retired.append((pid, ctime))
            gen = len(retired)  # its own scratch dir and address: the old node keeps its
        else:
            self._end_node(pid, ctime)
        logs = cluster_dir(spec.cluster_id)
        devices = part.devices
        visible = devices[rank] if devices else None
        self._start_node(
            spec,
            rank,
            logs,
            self._binds(spec),
            visible,
            launched,
            False,
            group=spec.group_of(rank),
            gen=gen,
        )
        # _start_node appended the new process: it takes the lost one's place.
        for entries in (part.pids, part.create_times, part.logs, part.scratch):
            if len(entries) > rank + 1:
                entries[rank] = entries.pop()  # type: ignore[assignment]
        if gen and old_scratch is not None:
            part.scratch.append(old_scratch)  # still removed by stop()
        return f"rank {rank} (pid {part.pids[rank]})"

    @staticmethod
    def _end_node(pid: int, ctime: float) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            old = psutil.Process(pid)
            if abs(old.create_time() - ctime) < 0.01:
                for p in [*old.children(recursive=True), old]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        p.kill()

    # ------------------------------------------------------------------ growing
    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        spec, g = saved_group(launched, group)
        part = launched.local
        base = part.next_rank if part.next_rank is not None else spec.nodes
        if base + nodes > MAX_LOCAL_NODES:
            raise ConfigError(f"the local target runs at most {MAX_LOCAL_NODES} nodes")
        used = part.devices
        visible: list[str | None] = [None] * nodes
        if g.gpus:
            taken = {d for v in used or [] for d in v.split(",") if d}
            v = gpus.vendor(spec.gpu_vendor)
            free = [d for d in gpus.host_devices(os.environ, v) or [] if d not in taken]
            visible = list(gpus.split_devices([g.gpus] * nodes, free, v))
        elif used is not None:
            visible = [""] * nodes  # the cluster has GPUs; these nodes see none
        logs = cluster_dir(spec.cluster_id)
        binds = self._binds(spec)
        for i in range(nodes):
            rank = base + i
            self._start_node(spec, rank, logs, binds, visible[i], launched, False, group=g)
            if used is not None:
                used.append(visible[i] or "")
            part.grown.append(LocalNode(group=g.name, rank=rank))
            part.next_rank = rank + 1
        return f"ranks {base}-{base + nodes - 1}"

    def added(self, launched: Launched, group: str) -> list[int]:
        return [e.rank for e in launched.local.grown if e.group == group and not e.gone]

    def observe(self, launched: Launched, group: str, joined: set[int]) -> list[NodeView]:
        """Each added node by its process (pid and start time, so never someone else's)."""
        out = []
        for e in launched.local.grown:
            if e.group != group or e.gone:
                continue
            rank = e.rank
            if self._running(launched, rank):
                state = NodeState.JOINED if rank in joined else NodeState.STARTING
                out.append(NodeView(rank, group, state))
                continue
            e.gone = True  # reported once, here
            log = Path(launched.local.logs[rank])
            tail = _last_error(log)
            why = f"its process ended (log {log}{': ' + tail if tail else ''})"
            out.append(
                NodeView(rank, group, NodeState.GONE if rank in joined else NodeState.FAILED, why)
            )
        return out

    def _running(self, launched: Launched, rank: int) -> bool:
        pid, ctime = launched.local.pids[rank], launched.local.create_times[rank]
        try:
            proc = psutil.Process(pid)
            return abs(proc.create_time() - ctime) < 0.01 and not self._ended(proc)
        except psutil.NoSuchProcess:
            return False

    def shrink(
        self,
        launched: Launched,
        group: str,
        nodes: int | None = None,
        ranks: set[int] | None = None,
    ) -> list[str]:
        saved_group(launched, group)
        part = launched.local
        grown = [
            e
            for e in reversed(part.grown)
            if e.group == group and not e.gone and (ranks is None or e.rank in ranks)
        ]
        if nodes is not None:
            grown = grown[:nodes]
        if not grown:
            raise ConfigError(f"group {group!r} has no added node to remove (grow adds them)")
        procs = []
        for e in grown:
            pid, ctime = part.pids[e.rank], part.create_times[e.rank]
            with contextlib.suppress(psutil.NoSuchProcess):
                p = psutil.Process(pid)
                if abs(p.create_time() - ctime) < 0.01:
                    procs.append(p)
                    p.send_signal(signal.SIGTERM)  # the node stops its own Ray
            e.gone = True
        for p in wait_gone(procs, STOP_GRACE_S):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        return [f"rank {e.rank}" for e in grown]

    def poll(self, launched: Launched) -> int | None:
        head_pid = launched.local.pids[0]
        proc = self._procs.get(head_pid)
        if proc is not None:
            return proc.poll()
        return None if any(p.pid == head_pid for p in self._ours(launched)) else 0

    def wait(self, launched: Launched, timeout_s: float) -> None:
        head = self._procs.get(launched.local.pids[0])
        if head is None:
            super().wait(launched, timeout_s)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=timeout_s)  # the head's exit ends the wait at once

    def stop(self, launched: Launched) -> None:
        nodes = self._ours(launched)
        family: list[psutil.Process] = list(nodes)
        for p in nodes:
            with contextlib.suppress(psutil.NoSuchProcess):
                family += p.children(recursive=True)
        for p in nodes:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGTERM)
        # Nodes stop their own Ray on TERM; give them the time that takes.
        alive = wait_gone(nodes, STOP_GRACE_S)
        leftovers = [p for p in family if p.is_running()]
        for p in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        wait_gone(leftovers, 5)
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        # A node that ended on this TERM as a child of this very process (the Python
        # API's up, then down, in one script) is reaped here: nothing else would.
        for p in family:
            ended(p)
        for t in self._threads:
            t.join(timeout=2)
        if not os.environ.get("SYNDEO_KEEP_SCRATCH"):
            # Ray's session files (sockets, spilled objects) are dead weight now;
            # the node logs stay in the cluster dir.
            for scratch in launched.local.scratch:
                shutil.rmtree(scratch, ignore_errors=True)
                with contextlib.suppress(OSError):
                    Path(scratch).parent.rmdir()  # the cluster's dir, once all ranks are gone
        if alive:
            pids = ", ".join(str(p.pid) for p in alive)
            sys.stderr.write(f"syndeo: killed unresponsive local nodes {pids}\n")

    def describe(self, launched: Launched) -> str:
        return f"node logs: {cluster_dir(launched.cluster_id)}"


def _last_error(log: Path) -> str:
    """The node log's last line that says what went wrong, if any (a short one)."""
    with contextlib.suppress(OSError):
        lines = log.read_text(errors="replace").splitlines()
        bad = [ln for ln in lines if "rror" in ln or "syndeo:" in ln]
        if bad:
            return bad[-1].strip()[:300]
    return ""
