"""Start and stop this node's Ray processes, and only this node's.

Ray runs as ``ray start --block``, a child of ``syndeo node`` in its own process
group, because a daemonised Ray does not survive ``apptainer exec`` and because
it lets teardown find exactly our processes (never ``ray stop``, which kills
every Ray of every user's job on the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil

from syndeo.core import gpus
from syndeo.core.errors import NodeError
from syndeo.core.nodeconfig import LAUNCH_KEY_VAR, NodeSettings
from syndeo.core.poll import Poller
from syndeo.core.processes import wait_gone
from syndeo.core.timeline import RAY_STARTED_LINE, ray_phases
from syndeo.node import autoscale, memory
from syndeo.rendezvous import without_secrets

# Every port is chosen by the OS (0) except Ray's client server, whose CLI insists
# on a fixed port: derive it from the cluster id so two clusters on one machine
# differ (and publish it with the head record).
CLIENT_PORT_BASE, CLIENT_PORT_SPAN = 20000, 10000
# A started raylet exits within ~0.2 s of TERM (telling the GCS it leaves); a Ray
# process still starting up (a node stopped while joining) may sit on TERM for
# seconds.  What has not exited after this is KILLed: nothing of theirs is worth
# waiting for at teardown.
STOP_GRACE_S = 1.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
T = TypeVar("T")


def client_server_port(cluster_id: str) -> int:
    return CLIENT_PORT_BASE + zlib.crc32(cluster_id.encode()) % CLIENT_PORT_SPAN


def ray_cli() -> list[str]:
    # The `ray` script next to this interpreter, so a venv/container's Ray is used.
    cand = Path(sys.executable).with_name("ray")
    return [str(cand)] if cand.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


HEALTH_CHECK = {
    "RAY_health_check_period_ms": "2000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}

# Where Ray (2.60) binds what it listens on, as read in its source, and what we do:
#
# * gRPC servers of the GCS, the raylet (node manager and object manager) and every
#   core worker (``ray::IDLE``, tasks, actors): ``GrpcServer::Run`` in
#   src/ray/rpc/grpc_server.cc listens on 127.0.0.1 if ``listen_to_localhost_only``,
#   else on the wildcard; its callers (``GcsServer::GcsServer`` in
#   src/ray/gcs/gcs_server.cc, the raylet's NodeManager and ObjectManager,
#   ``CoreWorker`` in src/ray/core_worker/core_worker.cc) pass
#   ``node_ip_address == "127.0.0.1"``.  There is no bind-address setting: no RayConfig
#   entry (src/ray/common/ray_config_def.h), no flag of gcs_server or raylet
#   (``--helpfull``).  Ray's change to bind the node IP instead (ray-project/ray#59852)
#   was reverted (#60012).  And `ray start` never runs a node as 127.0.0.1: ``start``
#   (python/ray/scripts/scripts.py) replaces it with the machine's external address
#   (``resolve_ip_for_localhost``, python/ray/_private/services.py), as does every
#   client's ``ray.init`` for the address it connects to (``canonicalize_bootstrap_address``),
#   so a node forced to 127.0.0.1 is one no client program can reach.  These listeners
#   stay on the wildcard on every target, the local one included (docs/security.md).
# * Dashboard agent gRPC: ``DashboardAgent._init_non_minimal`` (python/ray/dashboard/
#   agent.py): localhost if ``is_localhost(node ip)`` (127.0.0.1, ::1, "localhost" only:
#   C++ ``IsLocalhost``), else the wildcard: the same rule, the same outcome.
# * Dashboard agent HTTP: ``HttpServerAgent._start_site_with_retry``
#   (python/ray/dashboard/http_server_agent.py): the node IP, plus 127.0.0.1.
# * Runtime-env agent: ``main`` in python/ray/_private/runtime_env/agent/main.py binds
#   the node IP.  Ray client server: ``serve`` (python/ray/util/client/server/server.py)
#   binds ``--host`` (the node IP: ``start_ray_client_server`` in services.py) plus
#   127.0.0.1.  Dashboard: ``--dashboard-host=127.0.0.1`` below.
# * Prometheus exporters, unauthenticated: the agent's metrics export port
#   (``ReportAgent.__init__``, python/ray/dashboard/modules/reporter/reporter_agent.py:
#   localhost for a localhost node IP, else all interfaces), the autoscaler monitor's
#   (``Monitor.__init__``, python/ray/autoscaler/_private/monitor.py: port
#   AUTOSCALER_METRIC_PORT, default 44217, on 0.0.0.0) and the dashboard head's
#   (``DashboardHead._setup_metrics``, python/ray/dashboard/head.py: port
#   DASHBOARD_METRIC_PORT, default 44227, on 0.0.0.0; started even with
#   --include-dashboard=false).  All three are turned off here (METRICS_OFF).
#
# METRICS_OFF applies unless the user's environment sets these variables itself:
# * RAY_enable_metrics_collection=0: the raylet starts its dashboard agent with
#   ``--disable-metrics-collection`` (``AgentManager::StartAgent``,
#   src/ray/raylet/agent_manager.cc) and ``ReportAgent`` opens no export port; Ray's
#   C++ processes stop recording stats (``stats::Init``).  The node stats that the
#   dashboard shows still flow: they do not go through Prometheus.
# * Ray has no switch for the monitor's and the dashboard head's exporters: a port out
#   of range makes ``prometheus_client.start_http_server`` fail, which both callers
#   catch and log (one traceback each in monitor.log and dashboard.log) before going on
#   without it.  (Not 0: that would pick a free port, on 0.0.0.0.)
METRICS_OFF = {
    "RAY_enable_metrics_collection": "0",
    "AUTOSCALER_METRIC_PORT": "65536",
    "DASHBOARD_METRIC_PORT": "65536",
}


def child_env(settings: NodeSettings) -> dict[str, str]:
    """The node's environment as the processes it starts get it (Ray's, and through them
    every task and job; the workload's): without the store's credentials, since the node
    makes every store request itself, and without the launch key, which signs head records
    and opens the TLS bundle.  Any task can read its own environment."""
    env = without_secrets(settings.rendezvous, os.environ)
    env.pop(LAUNCH_KEY_VAR, None)
    # Each node's own copy of the jobs' packages: a job's PYTHONPATH names
    # ${SYNDEO_PYLIBS}/<digest>, which Ray expands in each worker's environment.
    env["SYNDEO_PYLIBS"] = str(settings.scratch / "pylibs")
    return env


def memory_args(s: NodeSettings, env: dict[str, str]) -> list[str]:
    """``--memory`` and ``--object-store-memory``: the store inside the node's budget
    (the allocation's, syndeo/node/memory.py), or Ray's own sizing where there is none."""
    host_mb = psutil.virtual_memory().total // memory.MIB
    b = memory.budget(s.memory_mb, s.object_store_mb, env, host_mb, memory.shm_free_mb())
    if b is None:
        return (
            [f"--object-store-memory={s.object_store_mb * memory.MIB}"] if s.object_store_mb else []
        )
    print(
        f"[syndeo {s.cluster_id} r{s.rank}] memory from {b.source}: Ray heap "
        f"{b.memory_mb} MiB + object store {b.object_store_mb} MiB",
        file=sys.stderr,
        flush=True,
    )
    return [
        f"--memory={b.memory_mb * memory.MIB}",
        f"--object-store-memory={b.object_store_mb * memory.MIB}",
    ]


class RayProcess:
    """One ``ray start --block`` child and everything it spawns."""

    def __init__(self, settings: NodeSettings, token_path: Path, head_address: str | None) -> None:
        self.settings = settings
        self.temp_dir = settings.scratch / "r"
        self.log_path = settings.scratch / ("ray-head.log" if head_address is None else "ray.log")
        self.head_address = head_address
        self.env = {
            **child_env(settings),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token_path),
            # Ray would otherwise phone home and open a usage-stats prompt.
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.env.pop("RAY_AUTH_TOKEN", None)  # the file is the only source of the token
        # The GCS (on the head) health-checks every node.  Ray's defaults (10 s timeout,
        # 5 failures) notice a machine that vanished -- powered off, spot-terminated:
        # no reply, no reset -- only after ~50 s; these within ~20 s.  A user's own
        # RAY_health_check_* settings win.
        for name, value in HEALTH_CHECK.items():
            self.env.setdefault(name, value)
        for name, value in METRICS_OFF.items():
            self.env.setdefault(name, value)
        if settings.autoscale:
            # Ray's monitor updates every 5 s by default; its update is a GCS query on
            # the head and a file write, so once a second costs little and a waiting
            # task is seen sooner (benchmarks/autoscale.py).
            self.env.setdefault("AUTOSCALER_UPDATE_INTERVAL_S", "1")
            # Ray's scorer, less the groups the watcher cannot start nodes of now.
            self.env.setdefault(autoscale.SCORER_ENV, autoscale.SCORER)
        # The one GPU rule (gpus.py).
        visible = gpus.node_devices(settings.gpus, self.env, gpus.vendor(settings.gpu_vendor))
        if visible is not None:
            self.env.update(visible)
        self.proc: subprocess.Popen[bytes] | None = None
        self._raylet: psutil.Process | None = None
        self.started_at = 0.0
        self._log_offset = 0

    def _args(self) -> list[str]:
        s = self.settings
        labels = {"syndeo-cluster": s.cluster_id, "syndeo-rank": str(s.rank)}
        if s.group is not None:
            # User code places work with Ray's own API: label_selector={"syndeo-group": …}.
            labels["syndeo-group"] = s.group
        args = [
            *ray_cli(),
            "start",
            "--block",
            f"--temp-dir={self.temp_dir}",
            f"--num-cpus={s.cpus}",
            f"--num-gpus={s.gpus}",
            f"--labels={json.dumps(labels)}",
            "--dashboard-agent-listen-port=0",
            "--dashboard-agent-grpc-port=0",
            "--runtime-env-agent-port=0",
            "--metrics-export-port=0",
            "--disable-usage-stats",
        ]
        args += memory_args(s, self.env)
        if s.node_ip:
            args.append(f"--node-ip-address={s.node_ip}")
        if self.head_address is None:
            args += [
                "--head",
                "--port=0",
                "--dashboard-host=127.0.0.1",
                "--dashboard-port=0",
                f"--include-dashboard={'true' if s.dashboard else 'false'}",
                f"--ray-client-server-port={client_server_port(s.cluster_id)}",
            ]
            scaling = autoscale.write_config(s, self.temp_dir)
            if scaling is not None:  # groups that follow demand: Ray's autoscaler runs here
                args.append(f"--autoscaling-config={scaling}")
        else:
            args.append(f"--address={self.head_address}")
        return args

    def start(self) -> None:
        self.temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A scratch dir can be reused (a requeued job, a repeated cluster id): an old
        # marker would hand out the address of a Ray that no longer exists.
        (self.temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        # Likewise the link to the last session: its GCS port file would be stale.
        (self.temp_dir / "session_latest").unlink(missing_ok=True)
        self.started_at = time.time()
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self._log_offset = log.tell()
        try:
            self.proc = subprocess.Popen(
                self._args(),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise NodeError(f"cannot start Ray: {exc}") from exc
        finally:
            log.close()

    def alive(self) -> bool:
        """``ray start`` still runs.  Asked without reaping it: until :meth:`stop` has
        signalled its group, its pid (the number of its process group and session) must
        stay taken, or a busy machine hands the number to a new process and our signals
        reach that one (it was seen: another node's ``ray start`` killed at birth)."""
        return self.proc is not None and _running(self.proc)

    def how_it_ended(self) -> str:
        """``ray start``'s exit status or the signal that ended it, in words."""
        assert self.proc is not None
        code, status = None, self.proc.returncode
        if status is None:
            with contextlib.suppress(ChildProcessError):
                if (ended := _ended(self.proc)) is not None:
                    code, status = ended.si_code, ended.si_status
        if status is None:
            return "still running"
        if code in (os.CLD_KILLED, os.CLD_DUMPED) or status < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(abs(status)).name}"
        return f"exit status {status}"

    def raylet_alive(self) -> bool:
        """False once this node's raylet has exited while ``ray start --block`` goes on:
        Ray's autoscaler lets an idle node go by shutting its raylet down cleanly, and
        ``--block`` reports (and ends on) only an exit with an error status."""
        if not self.alive():
            return False
        assert self.proc is not None
        if self._raylet is None:
            with contextlib.suppress(psutil.Error):
                kids = psutil.Process(self.proc.pid).children()
                self._raylet = next((k for k in kids if k.name() == "raylet"), None)
            return True  # not started yet, or not found: nothing says it is gone
        with contextlib.suppress(psutil.Error):
            return self._raylet.is_running() and self._raylet.status() != psutil.STATUS_ZOMBIE
        return False

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        interesting = [ln for ln in text if "Error" in ln or "error" in ln] or text
        return " | ".join(ln.strip()[:200] for ln in interesting[-lines:])

    def _gcs_address(self) -> str | None:
        """``ip:port`` of this session's GCS once it has bound its port, else None.

        Ray writes the port the OS gave its GCS to ``gcs_server_port_<node id>``
        seconds before ``ray start`` has started the rest of the head (raylet,
        agents); publishing it then lets workers start joining in parallel.
        """
        ip = self.settings.node_ip or self._logged_ip()
        if ip is None:
            return None
        for path in (self.temp_dir / "session_latest").glob("gcs_server_port_*"):
            with contextlib.suppress(OSError, ValueError):
                if path.stat().st_mtime >= self.started_at - 1:
                    return f"{ip}:{int(path.read_text().strip())}"
        return None

    def _new_log(self) -> str:
        """What this start of Ray has written to the (appended) log so far."""
        with contextlib.suppress(OSError), self.log_path.open("rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")
        return ""

    def _logged_ip(self) -> str | None:
        # `ray start` names the IP it chose ("Local node IP: 10.1.2.3", in colour).
        for line in self._new_log().splitlines():
            if "Local node IP" in line:
                return _ANSI.sub("", line).rsplit(":", 1)[-1].strip() or None
        return None

    def wait_gcs_address(self, timeout_s: float) -> str:
        """The head's GCS address as soon as the GCS accepts connections."""
        from syndeo.node.leaving import gcs_reachable

        return self._wait(
            lambda: a if (a := self._gcs_address()) and gcs_reachable(a, 1.0) else None,
            timeout_s,
            "Ray head's GCS",
        )

    def wait_started(self, timeout_s: float, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Until ``ray start`` reports this node started (its raylet registered): True;
        False as soon as ``give_up()`` says there is no point (the run is over)."""

        def probe() -> bool | None:
            if RAY_STARTED_LINE in self._new_log():
                return True
            return False if give_up() else None

        return self._wait(probe, timeout_s, "Ray")

    def phases(self) -> dict[str, float]:
        """Ray's own start-up phases on this node (from its logs)."""
        return {
            k: v
            for k, v in ray_phases(self.temp_dir, self.log_path).items()
            if v >= self.started_at - 1
        }

    def _wait(
        self, probe: Callable[[], T | None], timeout_s: float, what: str, max_s: float = 0.25
    ) -> T:
        """``probe()``'s value once there is one; NodeError if Ray exits or times out."""

        def look() -> T | None:
            if not self.alive():
                tail = self.log_tail() or f"nothing in {self.log_path}"
                raise NodeError(f"{what} exited while starting ({self.how_it_ended()}): {tail}")
            return probe()

        value = Poller(start_s=0.02, max_s=max_s).until(look, time.monotonic() + timeout_s)
        if value is None:
            raise NodeError(f"{what} did not come up within {timeout_s:.0f} s: {self.log_tail()}")
        return value

    def wait_head_address(self, timeout_s: float) -> str:
        """The GCS address the head bound (port chosen by the OS), once Ray is up."""
        marker = self.temp_dir / "ray_current_cluster"

        def address() -> str | None:
            with contextlib.suppress(OSError):
                return marker.read_text().strip() or None
            return None

        return self._wait(address, timeout_s, "Ray head", max_s=0.5)

    def stop(self) -> None:
        """TERM every process of this node's Ray at once; KILL what is left after a short grace.

        Not through ``ray start``'s own TERM handler: it drains the node for up to
        30 s first (moving work off a node that leaves a cluster that goes on) and
        then stops its processes one after another.  At teardown nothing goes on,
        and Ray's processes exit within a second of their own TERM, all in parallel.
        """
        if self.proc is None:
            return
        pid = self.proc.pid
        # Only while `ray start` is unreaped (alive or a zombie) does `pid` still name
        # its group and session; once reaped, the number may be someone else's.
        held = self.proc.returncode is None
        try:
            leader = psutil.Process(pid)
            family = [leader, *leader.children(recursive=True)] if held else []
        except psutil.NoSuchProcess:
            family = []
        # `ray start` itself only supervises: KILL it first, so that its handler does
        # not start the drain, then TERM the rest. The group was created for this
        # node (start_new_session): all of it is ours.  os.kill, not Popen.kill: that
        # reaps a `ray start` that has exited and so frees its number.
        if held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        for p in family[1:]:  # a child that made its own group is still in the family
            with contextlib.suppress(psutil.NoSuchProcess):
                p.terminate()
        alive = wait_gone(family[1:], STOP_GRACE_S)
        if held:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        wait_gone(alive, 5)
        scratch = self.env.get("SYNDEO_SCRATCH") or str(self.settings.scratch)
        _sweep(scratch, pid if held else None)
        # Reaped last: the session's number stays ours through the sweep.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def _ended(proc: subprocess.Popen[bytes]) -> os.waitid_result | None:
    """How ``proc`` ended, if it has, read without reaping it."""
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)


def _running(proc: subprocess.Popen[bytes]) -> bool:
    """``proc`` has not exited; unlike ``poll()`` this leaves an exited one unreaped."""
    if proc.returncode is not None:
        return False
    try:
        return _ended(proc) is None
    except ChildProcessError:  # reaped elsewhere (it is ours alone: should not happen)
        return proc.poll() is None


def _session(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _sweep(scratch: str, ray_session: int | None, settle_s: float = 3.0) -> None:
    """KILL what is left of this node outside our view: a raylet may respawn its
    dashboard agent while it dies, and the orphan is in no family we listed.  It is
    ours if it is in the session ``ray start`` began (Ray's agents do not inherit our
    environment) or carries this node's SYNDEO_SCRATCH; no other node shares either.
    ``ray_session`` is given only while that ``ray start`` is unreaped: a reaped one's
    number may lead someone else's session by now (pid_max is 32768 on many hosts)."""
    me = os.getpid()
    deadline = time.monotonic() + settle_s
    while True:
        left = []
        for p in psutil.process_iter():
            if p.pid == me:
                continue
            with contextlib.suppress(psutil.Error):
                if p.uids().real != os.getuid() or p.status() == psutil.STATUS_ZOMBIE:
                    continue
                mine = ray_session is not None and _session(p.pid) == ray_session
                if mine or p.environ().get("SYNDEO_SCRATCH") == scratch:
                    left.append(p)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.2)
