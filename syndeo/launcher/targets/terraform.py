"""The one Terraform-backed target: machines come from a Terraform root module.

A VM target (ssh, aws, gcp, azure) is a module under ``terraform/`` plus a subclass
that names it and adds its machine variables (:meth:`TerraformTarget.machine_vars`).  The
node environment, cloud-init and start/stop commands are rendered by
``terraform/modules/node`` -- never here -- from the cluster settings this class
passes as tfvars; the machines then run the same ``syndeo node`` as every target.

Verbs: ``script`` prints the tfvars and the terraform commands; ``launch`` runs
init + apply (and destroy if apply fails or is interrupted); ``poll`` reads the
head's "done" record; ``stop`` destroys.  State stays in the cluster's own dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from syndeo.core.errors import ConfigError, TargetError, tear_down_after
from syndeo.core.groups import Group, Layout
from syndeo.core.nodeconfig import cluster_options
from syndeo.core.resources import copy_tree, data_dir
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.nodecreds import STS_MAX_S, NodeCredentials, node_credentials
from syndeo.launcher.spec import ClusterSpec, Launched, TerraformPart, launched_key, saved_group
from syndeo.launcher.state import cluster_dir, save_launched
from syndeo.launcher.targets.base import NodeState, NodeView, Target
from syndeo.launcher.targets.tfexec import Terraform, TerraformError, Workspace
from syndeo.launcher.targets.tfvars_compat import current_tfvars
from syndeo.rendezvous import DoneRecord, Rendezvous, open_rendezvous, passthrough_env

# After launch, how long machines may take to boot before a missing head counts
# as a failure (added to the join timeout).
BOOT_GRACE_S = 600.0
# A head refreshes its status record every 2 s while it lives (syndeo.node.workload); one
# whose record stands still this long, on the launcher's own clock, has vanished
# with its machine (terminated, powered off) and will never record "done".
# 90 s, not less: after a worker's machine vanished, a live head's loop was once seen to
# stand still for over 45 s (Ray's GCS calls while it marks the node dead), and calling
# a live head lost tears down a running cluster.
HEAD_SILENT_S = 90.0
# A target that can ask its provider about a machine (machine_gone) does so once the
# head's status has stood still this long, and again at most this often: a terminated
# or stopped head machine ends the run in seconds instead of after HEAD_SILENT_S.
HEAD_ASK_S = 15.0


def terraform_root() -> Path:
    """The package's ``terraform/`` (read only), or ``$SYNDEO_TERRAFORM_DIR``."""
    env = os.environ.get("SYNDEO_TERRAFORM_DIR")
    root = Path(env) if env else data_dir("terraform")
    if not (root / "modules" / "node").is_dir():
        raise TargetError(
            f"Terraform modules not found at {root}: "
            + (
                "point SYNDEO_TERRAFORM_DIR at a syndeo terraform/ directory"
                if env
                else "reinstall syndeo (pip install --force-reinstall syndeo-*.whl)"
            )
        )
    return root


def working_copy(module_dir: Path, dest: Path) -> Path:
    """``module_dir`` copied under ``dest``, where Terraform runs it: ``terraform init``
    writes its lock file into its working directory, which must not be the installed
    package (read only, shared by every cluster).  The copy also keeps a cluster's own
    modules for its later grow, shrink and destroy, whatever syndeo is installed then.
    A shipped module keeps its neighbours (``../modules/node``); any other is copied
    alone."""
    root = terraform_root()
    if not module_dir.is_relative_to(root):
        copy_tree(module_dir.parent, dest, (module_dir.name,))
        return dest / module_dir.name
    rel = module_dir.relative_to(root)
    copy_tree(root, dest, tuple(dict.fromkeys((rel.parts[0], "modules"))))
    return dest / rel


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Teardown is not interrupted by a second Ctrl-C or a TERM."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for s in old:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


class TerraformTarget(Target):
    """Machines from ``terraform/<module>``; subclasses add their machine variables."""

    shares_workdir = False  # VMs, ssh hosts: the launcher's files are not there

    module: ClassVar[str]
    # Whether nodes may receive the launcher's credentials for the rendezvous
    # (hosts without an instance identity) or only endpoints (clouds).
    forward_credentials: ClassVar[bool] = False

    # The launch key of the cluster this object launched (a deploy's, whose spec is not
    # saved); a later command finds an ``up`` cluster's in its saved spec.

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        if cfg.layout is not None:
            for g in cfg.layout.groups:
                if g.container != cfg.container:
                    # One image per cluster: the ssh module uploads one SIF, a cloud
                    # image bakes one.
                    raise ConfigError(
                        f"group {g.name!r}: a container of its own is not supported on the "
                        f"{self.name} target (one image per cluster there): remove its "
                        "container setting"
                    )
        self.module_dir = terraform_root() / self.module
        self._rdv: tuple[tuple[str, str], Rendezvous] | None = None
        self._node_creds: NodeCredentials | None = None

    # ------------------------------------------------------------------ per target
    @abstractmethod
    def machine_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        """This target's variables (hosts, instance type, region, …), checked locally."""

    def prepare(self, spec: ClusterSpec) -> None:
        """Write local files the module reads (launch only; a dry run writes nothing)."""

    def rendezvous_env(self, spec: ClusterSpec) -> dict[str, str]:
        """Settings (no secrets) by which the launcher found the rendezvous, which a new
        shell may lack (``down``, ``grow``); restored by
        :func:`syndeo.launcher.state.store_env`."""
        return {}

    def before_destroy(self, launched: Launched, tf: Terraform) -> None:
        """Remove what an interrupted apply made but never recorded in the state (a
        launcher killed mid-apply), which ``terraform destroy`` cannot know about."""

    def machine_gone(self, launched: Launched, rank: int) -> str | None:
        """Why the machine of ``rank`` is gone (terminated, stopped) if the provider says
        so, else None (also when this target cannot ask: only the head's silence counts)."""
        return self.machines_ended(launched, [rank]).get(rank)

    def machines_ended(self, launched: Launched, ranks: list[int]) -> dict[int, str]:
        """Of ``ranks``, those whose machine the provider lists as ended (stopped,
        terminated), each with why, in one request; {} where this target cannot ask
        (then only the launcher's clocks tell that a node never came).  A failed request
        answers {} too: the next poll asks again."""
        return {}

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        """What deploy.json records about the machines (cost comparison input)."""
        return {"provider": self.name, "count": spec.nodes}

    # ------------------------------------------------------------------ shared
    def _forwarded(self, spec: ClusterSpec) -> dict[str, str]:
        if self._node_creds is not None:
            return dict(self._node_creds.env)
        env = passthrough_env(spec.rendezvous)
        if not self.forward_credentials:
            env = {k: v for k, v in env.items() if "ENDPOINT" in k or k.endswith(("_HOST", "_URL"))}
        return env

    def node_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        """This target's own node settings (attributes of the module's ``node``)."""
        return {}

    def tfvars(self, spec: ClusterSpec) -> dict[str, Any]:
        """The cluster settings as the one ``node`` object (terraform/modules/node
        declares its attributes), this launch's key, and the machines' variables."""
        node: dict[str, Any] = {
            "cluster_id": spec.cluster_id,
            "node_count": spec.nodes,
            "rendezvous": spec.rendezvous,
            "cpus_per_node": spec.cpus,
            "gpus_per_node": spec.gpus,
            "memory_mb_per_node": spec.memory_mb,
            "object_store_mb_per_node": spec.object_store_mb,
            "join_timeout_s": spec.join_timeout,
            "run": spec.run,
            "workdir_digest": spec.workdir_digest,
            "wheelhouse_digest": spec.wheelhouse_digest,
            "not_before": spec.not_before,
            "extra_env": {**self._forwarded(spec), **spec.extra_env()},
            "groups": group_vars(spec.layout),
            # The settings every node shares (ClusterOptions): the module renders each
            # as SYNDEO_<NAME>, its type and rules written from the same fields.
            "settings": cluster_options(spec),
        }
        return {
            "node": {**node, **self.node_vars(spec)},
            # A secret, in the 0600 tfvars file only (sensitive in every module).
            "launch_key": spec.launch_key,
            **self.machine_vars(spec),
        }

    def check(self, spec: ClusterSpec) -> None:
        self.tfvars(spec)
        self.machine_summary(spec)

    def _workspace(self, cluster_id: str, base: Path | None = None) -> Workspace:
        return Workspace(self.module_dir, (base or cluster_dir(cluster_id)) / "terraform")

    def script(self, spec: ClusterSpec) -> str:
        # A dry run writes nothing and needs no credentials: name the files only.
        ws = self._workspace(spec.cluster_id, base=Path("~/.syndeo/clusters") / spec.cluster_id)
        tfvars = self.tfvars(spec)
        node = dict(tfvars["node"])
        if node.get("extra_env"):
            node["extra_env"] = "<forwarded: " + ", ".join(sorted(node["extra_env"])) + ">"
        shown = {**tfvars, "node": node}
        if shown.get("launch_key") is not None:
            shown["launch_key"] = "<made per launch, not shown>"
        tf = Terraform(ws)
        lines = [
            f"# syndeo {self.name} cluster {spec.cluster_id}: {spec.nodes} node(s) from "
            f"{self.module_dir}",
            f"# {ws.tfvars}:",
            *("#   " + ln for ln in json.dumps(shown, indent=2, sort_keys=True).splitlines()),
            *tf.commands(),
        ]
        return "\n".join(lines) + "\n"

    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        ws = self._workspace(spec.cluster_id)
        ws = Workspace(working_copy(ws.module_dir, ws.source_dir), ws.cluster_dir)
        tf = Terraform(ws, echo=self.echo)
        launched = Launched(
            target=self.name,
            cluster_id=spec.cluster_id,
            rendezvous=spec.rendezvous,
            started_at=spec.not_before,
            launch_key=spec.launch_key,
            part=TerraformPart(
                target=self.name,
                module_dir=str(ws.module_dir),
                workspace=str(ws.cluster_dir),
                join_timeout=spec.join_timeout,
                machines=self.machine_summary(spec),
                apply_started=time.time(),
            ),
        )
        if spec.layout is not None:
            launched.spec = spec  # what grow/shrink need later
        # `down` from another shell must know that destroy takes the bucket with it,
        # and how to find the store at all.
        launched.owns_rendezvous = self.creates_rendezvous(spec.rendezvous)
        launched.rendezvous_env = self.rendezvous_env(spec)
        self.prepare(spec)  # local files, and what only the cloud can tell (image, types)
        if self.forward_credentials and self.cfg.node_credentials == "scoped":
            # Hosts without an identity of their own get credentials made for this cluster
            # (its prefix, its life), not the launcher's own (syndeo/launcher/nodecreds/).
            self._node_creds = node_credentials(spec.rendezvous, spec.cluster_id, STS_MAX_S)
            if self.echo is not None and self._node_creds.kind != "none":
                self.echo(f"{self.name}: {self._node_creds.describe()}")
        tfvars = self.tfvars(spec)
        tf.write_vars(tfvars)
        # From here on something may exist: a launcher killed now (SIGKILL, a lost
        # laptop) leaves `invoke down --cluster-id ID` what it needs to remove it.
        save_launched(launched)
        try:
            tf.init()
            tf.apply()
            launched.tf.outputs = tf.output()
        except BaseException as exc:
            tear_down_after(exc, lambda: self._destroy(tf, launched))
            raise
        return launched

    def _rendezvous(self, launched: Launched) -> Rendezvous:
        # One client per cluster: poll runs every second or so.
        key = (launched.rendezvous, launched.cluster_id)
        if self._rdv is None or self._rdv[0] != key:
            launch_key = launched_key(launched)
            self._rdv = (
                key,
                open_rendezvous(launched.rendezvous, launched.cluster_id, 0, launch_key),
            )
        return self._rdv[1]

    def poll(self, launched: Launched) -> int | None:
        rdv = self._rendezvous(launched)
        done = self._signed_done(launched, rdv)
        if done is not None:
            if done.exit_code != 0:
                # The head's last words, if it left any, say more than its message.
                launched.tf.head_failure = rdv.read_logs().get(0) or done.message
            return done.exit_code
        deadline = launched.started_at + launched.tf.join_timeout + BOOT_GRACE_S
        if rdv.read_head() is None:
            if time.time() > deadline:
                launched.tf.head_failure = "no head was published before the deadline"
                return 1
            return None
        return self._head_silent(launched, rdv)

    def _signed_done(self, launched: Launched, rdv: Rendezvous) -> DoneRecord | None:
        """The head's done record, if the head signed it: whoever can write the store
        could plant one (or a log of rank 0), and the cluster would bill on unwatched."""
        done = rdv.read_done()
        if done is None:
            return None
        key = launched_key(launched)
        if done.verified(key, launched.cluster_id, 0):
            return done
        mark = (done.signature, done.finished_at)
        if launched.tf.done_refused != mark:
            launched.tf.done_refused = mark  # said once per record
            if self.echo is not None:
                self.echo(f"{self.name}: a done record not signed by this cluster's head: ignored")
        return None

    def _head_silent(self, launched: Launched, rdv: Rendezvous) -> int | None:
        """1 once a published head's status has stood still for HEAD_SILENT_S (measured
        on this machine's clock, so no clock skew between it and the head matters).  Only
        a status the head signed is a sign of it: a record rewritten by whoever can write
        the store must not keep a vanished head's cluster billing unnoticed."""
        st = rdv.read_status()
        key = launched_key(launched)
        signed = st is not None and st.verified(key, launched.cluster_id, 0)
        stamp = st.updated_at if st is not None and signed else None
        part = launched.tf
        seen = part.head_seen
        now = time.time()
        if seen is None or seen[0] != stamp:
            part.head_seen = (stamp, now)
            return None
        quiet = now - seen[1]
        if quiet >= HEAD_ASK_S and now - part.head_asked >= HEAD_ASK_S:
            part.head_asked = now
            gone = self.machine_gone(launched, 0)
            if gone is not None:
                part.head_failure = f"the head vanished: no sign of it for {quiet:.0f} s and {gone}"
                return 1
        if quiet < HEAD_SILENT_S:
            return None
        part.head_failure = (
            f"the head vanished: no sign of it for {now - seen[1]:.0f} s and no "
            "done record (its machine was stopped, terminated or lost)"
        )
        return 1

    def stop(self, launched: Launched) -> None:
        tf, _ = self._saved_vars(launched)
        self._destroy(tf, launched)

    def _destroy(self, tf: Terraform, launched: Launched) -> None:
        if launched.tf.destroyed:
            return
        if self.echo is not None:
            self.echo(f"{self.name}: destroying cluster {launched.cluster_id} (terraform destroy)")
        with signals_ignored():
            try:
                self.before_destroy(launched, tf)
                tf.destroy()
            except TerraformError as exc:
                left = tf.resources()
                # `down` finishes from here: the run is over, nothing to ask the head.
                launched.destroy_failed = True
                save_launched(launched)
                raise TargetError(
                    f"{exc}; may still exist: {', '.join(left) or 'unknown (see the log)'}; "
                    f"remove with: syndeo down --cluster-id {launched.cluster_id}"
                ) from None
        launched.tf.destroyed = True
        left = self.leaks(launched)
        if left:
            raise TargetError(
                f"{self.name}: destroy of cluster {launched.cluster_id} left {', '.join(left)}: "
                "remove them by hand (they may cost money)"
            )
        # Nothing left to manage: drop the workspace (its tfvars may hold credentials,
        # its .terraform a linked provider); the log stays for whoever reads it.
        tf.ws.forget()
        started = launched.tf.apply_started or time.time()
        machines = launched.tf.machines
        # Billing runs from creation to destruction, boot and teardown included.
        machines["instance_seconds"] = round((time.time() - started) * machines.get("count", 0), 1)

    def leaks(self, launched: Launched) -> list[str]:
        """What of the cluster still exists after a destroy (asked of the cloud, not of
        Terraform's state); empty where the target cannot ask."""
        return []

    # ------------------------------------------------------------------ growing
    # The cluster's tfvars are the record of what runs: grow adds entries to the
    # node settings' `grown` and applies (Terraform creates only those nodes), shrink removes
    # some and applies (Terraform destroys only those), down destroys them with the rest.
    grows: ClassVar[bool] = False  # whether terraform/<module> takes node.grown

    @classmethod
    def can_grow(cls) -> bool:
        return cls.grows  # its grow/shrink are there; the module decides

    def grown_nodes(
        self,
        launched: Launched,
        tfvars: dict[str, Any],
        group: Group,
        ranks: list[int],
        hosts: list[str],
    ) -> list[dict[str, Any]]:
        """The ``node.grown`` entries for new nodes of ``group`` at ``ranks``."""
        return [{"rank": rank, "group": group.name} for rank in ranks]

    def _saved_vars(self, launched: Launched) -> tuple[Terraform, dict[str, Any]]:
        """The cluster's Terraform and tfvars, the file brought to today's shape first
        (a cluster an older launcher started: tfvars_compat.py)."""
        ws = Workspace(Path(launched.tf.module_dir), Path(launched.tf.workspace))
        tf = Terraform(ws, echo=self.echo)
        if not ws.tfvars.exists():
            return tf, {}  # never written: nothing was applied (destroy has nothing to do)
        saved = json.loads(ws.tfvars.read_text())
        tfvars = current_tfvars(saved)
        if tfvars != saved:
            tf.write_vars(tfvars)
        return tf, tfvars

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        if not self.grows:
            return super().grow(launched, group, nodes, hosts)
        spec, g = saved_group(launched, group)
        tf, tfvars = self._saved_vars(launched)
        grown = list(tfvars["node"].get("grown", []))
        # Ranks are never reused: a removed node's records must not be taken for a new one's.
        first = max([spec.nodes - 1, launched.tf.last_rank, *(e["rank"] for e in grown)]) + 1
        added = self.grown_nodes(
            launched, tfvars, g, list(range(first, first + nodes)), list(hosts or [])
        )
        wanted = _with_grown(tfvars, grown + added)
        tf.write_vars({**wanted, **self.grow_overrides(wanted)})
        try:
            tf.apply()
        except BaseException:
            # Back to what ran before: Terraform removes whatever of the new nodes exists.
            tf.write_vars(tfvars)
            with signals_ignored():
                tf.apply()
            raise
        tf.write_vars(wanted)  # the overrides were this apply's alone
        launched.tf.last_rank = first + nodes - 1
        return ", ".join(_where(e) for e in added)

    def grow_overrides(self, tfvars: dict[str, Any]) -> dict[str, Any]:
        """Variables a grow's apply sets otherwise than the cluster's other applies
        (none by default; the revert after a failed grow uses the cluster's own)."""
        return {}

    def added(self, launched: Launched, group: str) -> list[int]:
        if not self.grows:
            return super().added(launched, group)
        _, tfvars = self._saved_vars(launched)
        return [int(e["rank"]) for e in tfvars["node"].get("grown", []) if e["group"] == group]

    def observe(self, launched: Launched, group: str, joined: set[int]) -> list[NodeView]:
        """Each added node by its machine's state, as the provider lists it
        (:meth:`machines_ended`).  A node whose machine ended stays in :meth:`added`
        (what is left of it, a stopped VM and its disk, is still there) until a
        ``shrink`` removes it: the caller shrinks every ended rank that is still added."""
        if not self.grows:
            return super().observe(launched, group, joined)
        ranks = self.added(launched, group)
        ended = self.machines_ended(launched, ranks) if ranks else {}
        views = []
        for r in ranks:
            if r in ended:
                state = NodeState.GONE if r in joined else NodeState.FAILED
                views.append(NodeView(r, group, state, ended[r]))
            else:
                views.append(
                    NodeView(r, group, NodeState.JOINED if r in joined else NodeState.STARTING)
                )
        return views

    def shrink(
        self,
        launched: Launched,
        group: str,
        nodes: int | None = None,
        ranks: set[int] | None = None,
    ) -> list[str]:
        if not self.grows:
            return super().shrink(launched, group, nodes, ranks)
        saved_group(launched, group)
        tf, tfvars = self._saved_vars(launched)
        grown = list(tfvars["node"].get("grown", []))
        going = [
            e
            for e in reversed(grown)
            if e["group"] == group and (ranks is None or int(e["rank"]) in ranks)
        ]
        if nodes is not None:
            going = going[:nodes]
        if not going:
            raise ConfigError(f"group {group!r} has no added node to remove (grow adds them)")
        ranks = {e["rank"] for e in going}
        tf.write_vars(_with_grown(tfvars, [e for e in grown if e["rank"] not in ranks]))
        with signals_ignored():
            tf.apply()  # Terraform destroys exactly those nodes
        return [_where(e) for e in going]

    # ------------------------------------------------------------------ recovery
    # The resource in terraform/<module> that is one rank's node, keyed by rank.
    # Re-creating it brings back exactly that rank: a new VM with the same user-data
    # on a cloud, the node started again on its host (after its stop ran) on ssh.
    node_resource: ClassVar[str | None] = None
    # Where the root keeps it: "" when terraform/<module> is the root itself (ssh),
    # "module.cluster." behind a cloud's deploy/ root.
    resource_prefix: ClassVar[str] = ""

    def replace(self, launched: Launched, spec: ClusterSpec, rank: int) -> str:
        if self.node_resource is None:
            return super().replace(launched, spec, rank)
        tf, tfvars = self._saved_vars(launched)
        ranks = set(range(1, int(tfvars["node"]["node_count"]))) | {
            int(e["rank"]) for e in tfvars["node"].get("grown", [])
        }
        if rank not in ranks:
            raise TargetError(f"rank {rank} is not a worker of {launched.cluster_id}")
        address = f'{self.resource_prefix}{self.node_resource}["{rank}"]'
        # The whole root is planned, but -replace forces only this one address; the
        # rest is unchanged unless it drifted (a machine that is gone is re-created
        # by any apply).  A host that does not answer fails the apply: reported by
        # the caller, the node stays lost, and the next apply tries again.
        tf.apply(replace=[address])
        return f"rank {rank} ({address} re-created)"

    def describe(self, launched: Launched) -> str:
        parts = []
        if launched.tf.head_failure:
            parts.append(f"head: {launched.tf.head_failure}")
        with contextlib.suppress(Exception):
            for rank, tail in sorted(self._rendezvous(launched).read_logs().items()):
                if rank != 0:
                    parts.append(f"rank {rank}: {tail}")
        parts.append(f"terraform log: {launched.tf.workspace}/terraform.log")
        return "; ".join(parts)

    def summary(self, launched: Launched) -> dict[str, Any]:
        return {"machines": launched.tf.machines}


def _with_grown(tfvars: dict[str, Any], grown: list[dict[str, Any]]) -> dict[str, Any]:
    """``tfvars`` with the node settings' ``grown`` replaced."""
    return {**tfvars, "node": {**tfvars["node"], "grown": grown}}


def _where(entry: dict[str, Any]) -> str:
    return f"rank {entry['rank']}" + (f" on {entry['host']}" if entry.get("host") else "")


def group_vars(layout: Layout | None) -> list[dict[str, Any]]:
    """The node module's ``groups`` variable: every shape resolved, in rank order."""
    if layout is None:
        return []
    return [
        {
            "name": g.name,
            "nodes": g.nodes,
            "cpus": g.cpus,
            "gpus": g.gpus,
            "memory_mb": g.memory_mb,
            "min_nodes": g.min_nodes,
            "autoscale": (
                None if g.autoscale is None else {"min": g.autoscale[0], "max": g.autoscale[1]}
            ),
        }
        for g in layout.groups
    ]


def require(section: dict[str, Any], key: str, target: str, hint: str) -> Any:
    value = section.get(key)
    if value in (None, "", []):
        raise ConfigError(f"{target}: {key} is required ({hint})")
    return value
