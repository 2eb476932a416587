"""terraform/modules/node, offline with the real terraform: its own ``terraform test``,
the node environment it renders read back by ``sh`` and by ``syndeo node``'s own
parser (both sides of the contract agree), the same validation rules as
syndeo/launcher/config.py, and user-data that Debian's ``cloud-init schema`` accepts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from syndeo.core.errors import SyndeoError
from syndeo.core.nodeconfig import ClusterOptions, NodeSettings, cluster_options
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.spec import ClusterSpec
from syndeo.rendezvous import backend_class
from tests.support import hcl

NODE = hcl.NODE_MODULE
# Everything a shell or systemd might interpret, in the one free-text setting.
TRICKY_RUN = 'python -c \'print("a b")\' $HOME `id` c=d \\ "q" --x=1,2 ;&|'


RENDERED = hcl.NODE_OUTPUTS
_render = hcl.render_node_module  # apply a root that calls the node module; its outputs


def _plan_error(root: Path, inputs: dict[str, Any]) -> str | None:
    """The validation errors ``terraform plan`` gives for ``inputs`` (one line), or None."""
    shutil.copytree(NODE, root / "node", dirs_exist_ok=True)
    (root / "main.tf.json").write_text(
        json.dumps({"module": {"n": hcl.node_module_call("./node", inputs)}})
    )
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(root / ".terraform")}
    if not (root / ".terraform").exists():
        assert hcl.run_tf("init", "-backend=false", cwd=root, env=env).returncode == 0
    out = hcl.run_tf("plan", "-no-color", cwd=root, env=env)
    if out.returncode == 0:
        return None
    assert "Invalid value for" in out.stderr, out.stderr
    return " ".join(out.stderr.split())  # error_message lines are wrapped


def _plan_ok(root: Path, inputs: dict[str, Any]) -> bool:
    return _plan_error(root, inputs) is None


def test_module_own_terraform_tests(tmp_path: Path) -> None:
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    assert hcl.run_tf("init", "-backend=false", cwd=NODE, env=env).returncode == 0
    out = hcl.run_tf("test", "-no-color", cwd=NODE, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "13 passed, 0 failed" in out.stdout


def _spec(run: str = TRICKY_RUN) -> ClusterSpec:
    return ClusterSpec(
        target="ssh",
        cluster_id="rt-1",
        rendezvous="file:///shared/dir with space",
        nodes=3,
        cpus=2,
        gpus=0,
        memory_mb=1024,
        object_store_mb=None,
        join_timeout=45.5,
        run=run,
        workdir=Path("/home/u/work dir"),
        image=None,
        image_digest="sha256:" + "ab" * 32,
        not_before=1763800000.25,
    )


def _module_inputs(spec: ClusterSpec, node_ips: list[str]) -> dict[str, Any]:
    # The same mapping TerraformTarget.tfvars makes (cluster_name -> cluster_id in the roots).
    return {
        "cluster_id": spec.cluster_id,
        "node_count": spec.nodes,
        "rendezvous": spec.rendezvous,
        "target": spec.target,
        "cpus_per_node": spec.cpus,
        "gpus_per_node": spec.gpus,
        "memory_mb_per_node": spec.memory_mb,
        "join_timeout_s": spec.join_timeout,
        "run": spec.run,
        "workdir": str(spec.workdir),
        "workdir_digest": spec.workdir_digest,
        "wheelhouse_digest": spec.wheelhouse_digest,
        "not_before": spec.not_before,
        "image_digest": spec.image_digest,
        "node_ips": node_ips,
        "extra_env": {"AWS_ENDPOINT_URL": "http://10.98.0.1:9000/a b$c"},
        "settings": cluster_options(spec),
    }


def _module_base(settings: NodeSettings) -> NodeSettings:
    """What a Python launcher sets, plus the base this module names (no scratch_dir
    given): /var/tmp, so that the node also checks the predictable sy-<hash> below it."""
    assert settings.scratch.parent.parent == Path("/var/tmp"), settings.scratch
    return settings.model_copy(update={"scratch_base": Path("/var/tmp")})


def test_env_file_read_back_by_sh_equals_what_python_would_set(tmp_path: Path) -> None:
    spec = _spec()
    ips = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    out = _render(tmp_path, _module_inputs(spec, ips))
    for rank, text in enumerate(out["env_files"]):
        path = tmp_path / f"node-{rank}.env"
        path.write_text(text)
        # What the start script and systemd's EnvironmentFile= do with it.
        shell = subprocess.run(
            ["sh", "-c", 'set -a; . "$1"; exec env -0', "sh", str(path)],
            capture_output=True,
            check=True,
            env={},
        )
        got = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
        assert got["SYNDEO_RUN"] == (TRICKY_RUN if rank == 0 else "")
        assert got["AWS_ENDPOINT_URL"] == "http://10.98.0.1:9000/a b$c"
        assert got["SYNDEO_FORWARD_ENV"] == "AWS_ENDPOINT_URL"
        scratch = Path(out["scratch_dirs"][rank])
        # syndeo node's own parser sees exactly what the Python launchers would pass.
        expected = _module_base(spec.node_settings(rank, scratch, ips[rank]))
        assert NodeSettings.from_env(got) == expected
        assert got == {**out["env"][rank], **{k: got[k] for k in got if k not in out["env"][rank]}}


def test_user_data_passes_cloud_init_schema(tmp_path: Path) -> None:
    assert shutil.which("cloud-init"), "cloud-init missing: run scripts/setup.d/cloudinit.sh"
    out = _render(tmp_path, _module_inputs(_spec(), []))
    for rank, doc in enumerate(out["user_data"]):
        path = tmp_path / f"user-data-{rank}.yaml"
        path.write_text(doc)
        res = subprocess.run(
            ["cloud-init", "schema", "--config-file", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Valid cloud-config" in res.stdout


CLUSTER_IDS = ["a", "demo-1", "0abc", "x" * 40, "x" * 41, "-a", "Abc", "a_b", "a.b", ""]
NODE_COUNTS = [1, 2, 4096, 0, 4097, -1]
URIS = ["file:///x", "s3://b/p", "gs://b/p", "az://c/p", "http://x/y", "ftp://x", "s3:/b", "s3://"]


def _python_accepts(**kw: Any) -> bool:
    try:
        DeployConfig.model_validate(kw)
        if "rendezvous" in kw:
            backend_class(kw["rendezvous"])  # a scheme a backend serves
    except (ValueError, SyndeoError):
        return False
    return True


@pytest.mark.parametrize(
    ("name", "values"),
    [("cluster_id", CLUSTER_IDS), ("nodes", NODE_COUNTS), ("rendezvous", URIS)],
)
def test_python_and_terraform_accept_the_same_values(
    name: str, values: list[Any], tmp_path: Path
) -> None:
    base = {"cluster_id": "ok", "node_count": 1, "rendezvous": "file:///x", "target": "ssh"}
    tf_name = {"nodes": "node_count"}.get(name, name)
    for value in values:
        py = _python_accepts(**{name: value})
        tf = _plan_ok(tmp_path, {**base, tf_name: value})
        assert py == tf, f"{name}={value!r}: python accepts it: {py}, terraform accepts it: {tf}"


def test_reserved_names_are_exactly_the_node_settings() -> None:
    """extra_env may not set what the module sets: the module's reserved list is the
    node contract (every NodeSettings field) plus the start script's own variables."""
    text = (NODE / "variables.tf").read_text()
    block = text[text.index("setintersection(keys(var.node.extra_env), concat([") :]
    reserved = set(re.findall(r'"(SYNDEO_[A-Z_]+)"', block[: block.index("]")]))
    # The settings every node shares are reserved by name, from node.settings itself.
    assert '[for k, v in var.node.settings : "SYNDEO_${upper(k)}"]' in block
    shared = {"SYNDEO_" + name.upper() for name in ClusterOptions.model_fields}
    fields = {"SYNDEO_" + name.upper() for name in NodeSettings.model_fields}
    assert reserved | shared == fields | {"SYNDEO_IMAGE", "SYNDEO_PYTHON", "SYNDEO_FORWARD_ENV"}
    assert not reserved & shared


def test_spot_notices_reach_every_node_and_only_known_clouds_pass(tmp_path: Path) -> None:
    inputs = {**_module_inputs(_spec(), []), "spot_notices": "gcp"}
    out = _render(tmp_path / "r", inputs)
    assert [NodeSettings.from_env(env).spot_notices for env in out["env"]] == ["gcp"] * 3
    plain = _render(tmp_path / "p", _module_inputs(_spec(), []))
    assert all("SYNDEO_SPOT_NOTICES" not in env for env in plain["env"])
    base = {"cluster_id": "ok", "node_count": 1, "rendezvous": "file:///x", "target": "ssh"}
    assert "spot_notices: null or one of aws, gcp, azure, alibaba" in (
        _plan_error(tmp_path / "bad", {**base, "spot_notices": "oci"}) or ""
    )


def test_a_backends_own_syndeo_variable_passes_through(tmp_path: Path) -> None:
    inputs = _module_inputs(_spec(), [])
    inputs["extra_env"] = {"SYNDEO_AZURE_ACCOUNT_URL": "http://10.98.0.1:10000/devstoreaccount1"}
    out = _render(tmp_path, inputs)
    assert out["env"][1]["SYNDEO_AZURE_ACCOUNT_URL"].endswith("/devstoreaccount1")
    assert out["env"][1]["SYNDEO_FORWARD_ENV"] == "SYNDEO_AZURE_ACCOUNT_URL"


def test_start_and_stop_commands_under_posix_sh(tmp_path: Path) -> None:
    """The rendered commands run under dash (Debian's /bin/sh), as remote-exec runs them:
    start detaches the node; stop ends its group and also what left the group (Ray
    starts sessions of its own), even when the node ignores TERM."""
    fake = tmp_path / "fakepy"
    # Stands in for `python -m syndeo node`: a child in a session of its own (like
    # `ray start`), and a main process that ignores TERM (the KILL path).
    # It makes its scratch dir and leaves a token there, as a node killed mid-run does.
    fake.write_text(
        '#!/bin/sh\nmkdir -m 0700 -p "$SYNDEO_SCRATCH"\necho t > "$SYNDEO_SCRATCH/token"\n'
        "setsid sleep 300 &\ntrap '' TERM\nsleep 300\n"
    )
    fake.chmod(0o755)
    inputs = {
        "cluster_id": "sh-1",
        "node_count": 1,
        "rendezvous": "file:///x",
        "target": "ssh",
        "image_path": None,
        "python": str(fake),
        "host_dir": str(tmp_path / "h"),
        "scratch_dir": str(_short_base("sy-t")),
        "stop_grace_s": 1,
    }
    try:
        _start_then_stop(tmp_path, inputs)
    finally:
        shutil.rmtree(inputs["scratch_dir"], ignore_errors=True)


def _short_base(prefix: str) -> Path:
    """A scratch base of this run alone, short enough for the module (35 characters, for
    Ray's socket paths) where tmp_path is not: made now, owned by whoever runs the test,
    so that another user's run (root's, before) never holds the same name."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def _start_then_stop(tmp_path: Path, inputs: dict[str, Any]) -> None:
    names = ("start_commands", "stop_commands", "host_dirs", "scratch_dirs")
    out = _render(tmp_path / "r", inputs, names)
    start, stop = out["start_commands"][0], out["stop_commands"][0]
    scratch = out["scratch_dirs"][0]
    started = subprocess.run(["dash", "-c", start], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    assert "node started" in started.stdout

    def ours() -> list[int]:
        found = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if f"SYNDEO_SCRATCH={scratch}".encode() in environ.read_bytes().split(b"\0"):
                    found.append(int(environ.parent.name))
            except OSError:
                continue
        return found

    deadline = time.monotonic() + 10
    while len(ours()) < 3 and time.monotonic() < deadline:  # script, sleep, setsid sleep
        time.sleep(0.1)
    assert len(ours()) >= 2, ours()
    stopped = subprocess.run(["dash", "-c", stop], capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 10
    while ours() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ours() == [], "processes of the node outlived stop"
    assert not Path(out["host_dirs"][0]).exists()
    assert not Path(scratch).exists(), "the node's scratch dir (its token) outlived stop"


def test_stop_removes_only_its_own_scratch_dir(tmp_path: Path) -> None:
    """Rank 0's rendered stop script, run under dash: its scratch dir goes, token and
    all; rank 1's (same host, same base) and the base stay; and a symlink in place of
    its dir is left alone -- what it points to is never emptied."""
    base = _short_base("sy-s")
    inputs = {
        "cluster_id": "sh-2",
        "node_count": 2,
        "rendezvous": "file:///x",
        "target": "ssh",
        "host_dir": str(tmp_path / "h"),
        "scratch_dir": str(base),
    }
    out = _render(tmp_path / "r", inputs, ("stop_commands", "scratch_dirs"))
    stop0 = out["stop_commands"][0]
    own, other = (Path(s) for s in out["scratch_dirs"])
    assert (own.parent, other.parent) == (base, base)
    try:
        for d in (own / "r" / "session", other):
            d.mkdir(mode=0o700, parents=True)
        (own / "token").write_text("t")
        (other / "token").write_text("t")
        stopped = subprocess.run(["dash", "-c", stop0], capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert not own.exists() and base.is_dir()
        assert (other / "token").read_text() == "t"

        precious = tmp_path / "precious"
        precious.mkdir()
        (precious / "keep").write_text("k")
        own.symlink_to(precious)
        stopped = subprocess.run(["dash", "-c", stop0], capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert own.is_symlink() and (precious / "keep").read_text() == "k"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stop(command: str) -> None:
    stopped = subprocess.run(["dash", "-c", command], capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr


@pytest.mark.parametrize("named", [False, True])
def test_the_cluster_dir_goes_with_its_last_node_on_the_host(named: bool, tmp_path: Path) -> None:
    """Without a scratch_dir the module makes up /var/tmp/sy-<hash> for the cluster: the
    stop of its last node on a host removes it (it was left behind, empty, on every
    host of every cluster); a scratch_dir the user named is theirs and stays."""
    base = _short_base("sy-n") if named else None
    inputs = {
        "cluster_id": f"cd-{uuid.uuid4().hex[:8]}",
        "node_count": 2,
        "rendezvous": "file:///x",
        "target": "ssh",
        "host_dir": str(tmp_path / "h"),
        "scratch_dir": None if base is None else str(base),
    }
    out = _render(tmp_path / "r", inputs, ("stop_commands", "scratch_dirs"))
    ranks = [Path(s) for s in out["scratch_dirs"]]
    cluster = ranks[0].parent
    assert named or cluster.parent == Path("/var/tmp")
    try:
        for d in ranks:
            d.mkdir(mode=0o700, parents=True)
            (d / "token").write_text("t")
        _stop(out["stop_commands"][0])
        assert not ranks[0].exists() and (ranks[1] / "token").exists()  # rank 1 still here
        _stop(out["stop_commands"][1])
        assert not ranks[1].exists() and cluster.is_dir() == named
    finally:
        shutil.rmtree(cluster, ignore_errors=True)


def _grouped_spec() -> ClusterSpec:
    from syndeo.core.groups import GroupConfig, build_layout

    layout = build_layout(
        [
            GroupConfig(name="cpu", nodes=2, cpus_per_node=4, memory_mb_per_node=2048),
            GroupConfig(name="later", nodes=0),  # declared for grow: owns no rank
            GroupConfig(name="gpu", nodes=1, gpus_per_node=2, min_nodes=0),
            # Follows demand: no rank of its own at launch, every node added by grow.
            GroupConfig(name="burst", min_nodes=1, max_nodes=3, cpus_per_node=8),
        ],
        head="own",
        cpus=2,
        gpus=0,
        memory_mb=1024,
        container=None,
    )
    update = {"nodes": 4, "layout": layout, "dashboard": True, "workdir_digest": "ab" * 32}
    update["wheelhouse_digest"] = "cd" * 32
    return _spec().model_copy(update=update)


def test_groups_render_what_python_would_set(tmp_path: Path) -> None:
    """Per rank: the group's shape, SYNDEO_GROUP, every group's count (the head's rule),
    the dashboard setting on every node (the head alone reads it) -- exactly NodeSettings
    as local and Slurm set it."""
    from syndeo.launcher.targets.terraform import group_vars

    spec = _grouped_spec()
    inputs = {**_module_inputs(spec, []), "groups": group_vars(spec.layout)}
    out = _render(tmp_path, inputs)
    assert len(out["env"]) == 4
    for rank, env in enumerate(out["env"]):
        want = _module_base(spec.node_settings(rank, Path(out["scratch_dirs"][rank])))
        assert NodeSettings.from_env(env) == want
    assert [e["SYNDEO_GROUP"] for e in out["env"]] == ["head", "cpu", "cpu", "gpu"]
    assert [e["SYNDEO_CPUS"] for e in out["env"]] == ["2", "4", "4", "2"]
    assert [e["SYNDEO_GPUS"] for e in out["env"]] == ["0", "0", "0", "2"]
    assert [e.get("SYNDEO_MEMORY_MB") for e in out["env"]] == ["1024", "2048", "2048", "1024"]
    assert {e["SYNDEO_GROUPS"] for e in out["env"]} == {
        "head:1:1,cpu:2:2,later:0:0,gpu:1:0,burst:0:0"
    }
    # Ray's autoscaler on the head: the group's bounds and shape (memory inherited).
    assert {e["SYNDEO_AUTOSCALE"] for e in out["env"]} == {"burst:1:3:8:0:1024"}
    assert [e.get("SYNDEO_DASHBOARD") for e in out["env"]] == ["True"] * 4
    # The packed work dir's digest: the head's alone (it runs the workload).
    assert [e.get("SYNDEO_WORKDIR_DIGEST") for e in out["env"]] == ["ab" * 32, None, None, None]
    # The workload's wheels: every node installs them.
    assert [e.get("SYNDEO_WHEELHOUSE_DIGEST") for e in out["env"]] == ["cd" * 32] * 4


def test_without_groups_nothing_changes(tmp_path: Path) -> None:
    out = _render(tmp_path, _module_inputs(_spec(), []))
    assert not any(
        k in e for e in out["env"] for k in ("SYNDEO_GROUP", "SYNDEO_GROUPS", "SYNDEO_AUTOSCALE")
    )
    assert not any("SYNDEO_DASHBOARD" in e for e in out["env"])


@pytest.mark.parametrize(
    ("groups", "python_why", "terraform_why"),
    [
        (
            [{"name": "a", "nodes": 2}, {"name": "a", "nodes": 1}],
            "group 'a' is defined twice",
            "groups: a name is used twice.",
        ),
        (
            [{"name": "a", "nodes": 0}, {"name": "b", "nodes": 3}],
            "group 'a' holds the head (rank 0): it needs nodes >= 1",
            "groups: the first group holds the head (nodes >= 1)",
        ),
        (
            [{"name": "a", "nodes": 1, "min_nodes": 2}, {"name": "b", "nodes": 2}],
            "group 'a': min_nodes 2 is more than its 1 nodes",
            "min_nodes null or 0..nodes",
        ),
        (
            [{"name": "A", "nodes": 3}],
            "'A': use 1-31 of a-z, 0-9 and '-', starting with a letter",
            "groups: names are 1-31 of a-z, 0-9 and '-', starting with a letter.",
        ),
    ],
)
def test_python_and_terraform_refuse_the_same_groups(
    groups: list[dict[str, Any]], python_why: str, terraform_why: str, tmp_path: Path
) -> None:
    """Each side refuses for the stated reason, not for any other."""
    from syndeo.core.groups import GroupConfig, build_layout

    with pytest.raises(ValueError) as refused:
        build_layout(
            [GroupConfig(**g) for g in groups],
            head="first",
            cpus=1,
            gpus=0,
            memory_mb=None,
            container=None,
        )
    assert python_why in str(refused.value)
    tf_groups = [{"cpus": 1, "gpus": 0, "memory_mb": None, "min_nodes": None, **g} for g in groups]
    base = {"cluster_id": "ok", "node_count": 3, "rendezvous": "file:///x", "target": "ssh"}
    error = _plan_error(tmp_path, {**base, "groups": tf_groups})
    assert error is not None and terraform_why in error, error
    # And the groups' nodes must add up to the cluster's (TerraformTarget passes both).
    ok = [{"name": n, "nodes": 1, "cpus": 1, "gpus": 0} for n in ("a", "b")]
    error = _plan_error(tmp_path, {**base, "groups": ok})
    assert error is not None and "groups' nodes add up to node_count" in error, error
    assert _plan_ok(tmp_path, {**base, "node_count": 2, "groups": ok})


def test_grown_nodes_render_like_their_group_and_leave_the_cluster_unchanged(
    tmp_path: Path,
) -> None:
    """`grow` on a VM target adds var.grown entries: each renders exactly what the local
    and Slurm grow start (the group's settings, a rank past the cluster's), and the
    cluster's own renderings do not change (so Terraform touches no running node)."""
    from syndeo.launcher.targets.terraform import group_vars

    spec = _grouped_spec()
    inputs = {**_module_inputs(spec, []), "groups": group_vars(spec.layout)}
    before = _render(tmp_path / "a", inputs)
    grown = [{"rank": 4, "group": "gpu", "node_ip": "10.0.0.9"}, {"rank": 6, "group": "later"}]
    after = _render(tmp_path / "b", {**inputs, "grown": grown})
    assert sorted(before["machines"]) == ["0", "1", "2", "3"]
    assert sorted(after["machines"]) == ["0", "1", "2", "3", "4", "6"]
    assert {k: after[k] for k in ("env", "user_data")} == {
        k: before[k] for k in ("env", "user_data")
    }
    assert {k: after["machines"][k] for k in before["machines"]} == before["machines"]
    for rank, m in before["machines"].items():  # the lists by rank and the map agree
        assert m["user_data"] == before["user_data"][int(rank)]
        assert m["group"] == before["env"][int(rank)]["SYNDEO_GROUP"]
    assert spec.layout is not None
    for key, ip in (("4", "10.0.0.9"), ("6", None)):
        g = after["machines"][key]
        want = _module_base(
            spec.node_settings(
                int(key), Path(g["env"]["SYNDEO_SCRATCH"]), ip, group=spec.layout.group(g["group"])
            )
        )
        assert NodeSettings.from_env(g["env"]) == want
        assert g["host_dir"].endswith(f"/clusters/rt-1/{key}")
    assert (
        after["machines"]["4"]["env"]["SYNDEO_GPUS"] == "2" and after["machines"]["4"]["gpus"] == 2
    )
    refused = {**inputs, "grown": [{"rank": 2, "group": "gpu"}]}  # a rank the cluster has
    assert not _plan_ok(tmp_path / "c", refused)
    assert not _plan_ok(tmp_path / "d", {**inputs, "grown": [{"rank": 9, "group": "nope"}]})


def test_generated_settings_type_render_and_refuse_in_terraform(tmp_path: Path) -> None:
    """scripts/tf_generate.py on settings of every kind ClusterOptions allows: Terraform
    fills their defaults, renders them as NodeSettings would (null and false left out)
    and refuses what pydantic refuses, each with its own message."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class Probe(BaseModel):
        workers: int = Field(2, ge=1, le=8)
        mode: Literal["a", "b"] = "a"
        note: str | None = None
        ratio: float | None = Field(None, gt=0)
        flag: bool = False

    node = tmp_path / "node"
    shutil.copytree(NODE, node)
    text = (node / "variables.tf").read_text()
    (node / "variables.tf").write_text(hcl.tf_generate().render_node_variables(text, Probe))
    base = {"cluster_id": "ok", "node_count": 1, "rendezvous": "file:///x", "target": "ssh"}

    def plan(settings: dict[str, Any]) -> str | None:
        root = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
        shutil.copytree(node, root / "node")
        (root / "main.tf.json").write_text(
            json.dumps(
                {
                    "module": {"n": {"source": "./node", "node": {**base, "settings": settings}}},
                    "output": {"env": {"value": "${module.n.env}", "sensitive": True}},
                }
            )
        )
        env = {**hcl.TF_ENV, "TF_DATA_DIR": str(root / ".terraform")}
        assert hcl.run_tf("init", "-backend=false", cwd=root, env=env).returncode == 0
        out = hcl.run_tf("apply", "-auto-approve", "-no-color", cwd=root, env=env)
        if out.returncode != 0:
            return " ".join(out.stderr.split())
        got = hcl.run_tf("output", "-json", "env", cwd=root, env=env)
        return json.dumps(json.loads(got.stdout)[0])

    for good in ({}, {"workers": 8, "mode": "b", "note": "x y", "ratio": 0.5, "flag": True}):
        env = json.loads(plan(good) or "{}")
        want = {k: v for k, v in Probe(**good).model_dump().items() if v not in (None, False)}
        assert {k: env.get("SYNDEO_" + k.upper()) for k in Probe.model_fields} == {
            k: (str(want[k]) if k in want else None) for k in Probe.model_fields
        }
    for bad, says in [
        ({"workers": 0}, "settings.workers: a whole number >= 1, <= 8."),
        ({"workers": 2.5}, "settings.workers: a whole number >= 1, <= 8."),
        ({"mode": "c"}, "settings.mode: one of a, b."),
        ({"note": "x\ny"}, "settings.note: null or one line."),
        ({"ratio": 0}, "settings.ratio: null or a number > 0."),
    ]:
        if "note" not in bad:  # a newline: only env files need one line
            with pytest.raises(ValueError):
                Probe(**bad)  # pydantic refuses it too
        assert says in (plan(bad) or ""), bad
