"""``deploy --run`` on a target whose machines do not share the launcher's files: the
launcher packs the work dir into the rendezvous by its sha256 (as ``submit`` does), and
the head runs the workload in its own checked, unpacked copy (syndeo/node/workdir.py),
which Ray ships to every node as the job's working dir."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core import launchkey
from syndeo.core.errors import ConfigError, RendezvousTimeout, WorkloadError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import _packed
from syndeo.launcher.job_client import pack_workdir
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets import get_target
from syndeo.node import workdir
from syndeo.node.workload import RAY_JOB_CONFIG_JSON_ENV_VAR
from syndeo.rendezvous import open_rendezvous

KEY = launchkey.new_key()


def _project(root: Path) -> Path:
    (root / "mylib").mkdir(parents=True)
    (root / "mylib" / "__init__.py").write_text("WHO = 'mylib'\n")
    (root / "prog.py").write_text("import mylib\nprint(mylib.WHO)\n")
    (root / "data.bin").write_bytes(b"\0" * 10)
    (root / ".syndeoignore").write_text("data.bin\n")
    return root


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A scratch dir as short as a node's (Ray's socket paths below it)."""
    path = Path(tempfile.mkdtemp(prefix="sy-wd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _settings(tmp_path: Path, scratch: Path, digest: str, timeout: float = 5.0) -> NodeSettings:
    return NodeSettings(
        cluster_id="wd",
        rank=0,
        nodes=1,
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        join_timeout=timeout,
        workdir_digest=digest,
        launch_key=KEY,
    )


def test_the_name_ray_reads_is_rays_own() -> None:
    from ray._private.runtime_env.constants import RAY_JOB_CONFIG_JSON_ENV_VAR as rays

    assert rays == RAY_JOB_CONFIG_JSON_ENV_VAR


def test_the_head_unpacks_what_the_launcher_packed_waiting_for_it(
    tmp_path: Path, scratch: Path
) -> None:
    archive = pack_workdir(_project(tmp_path / "proj"), ["*.bin"])
    digest = hashlib.sha256(archive).hexdigest()
    s = _settings(tmp_path, scratch, digest)
    rdv = open_rendezvous(s.rendezvous, "wd", launch_key=KEY)
    # The launcher stores it after the launch (a cloud's bucket exists only then).
    later = threading.Timer(0.5, rdv.put_workdir, (digest, archive))
    later.start()
    t0 = time.monotonic()
    work = workdir.for_run(rdv, s)
    later.join()
    assert time.monotonic() - t0 >= 0.4
    assert work == s.scratch / "work"
    assert (work / "mylib" / "__init__.py").read_text() == "WHO = 'mylib'\n"
    assert not (work / "data.bin").exists()  # .syndeoignore
    assert work.stat().st_mode & 0o777 == 0o700


def test_a_work_dir_that_never_comes_or_was_changed_is_never_run(
    tmp_path: Path, scratch: Path
) -> None:
    archive = pack_workdir(_project(tmp_path / "proj"), [])
    digest = hashlib.sha256(archive).hexdigest()
    s = _settings(tmp_path, scratch, digest, timeout=0.3)
    rdv = open_rendezvous(s.rendezvous, "wd", launch_key=KEY)
    with pytest.raises(RendezvousTimeout, match=r"work dir .* did not reach .* within 0 s"):
        workdir.for_run(rdv, s)
    # Planted under the digest by someone without the launch key: refused unopened.
    key = rdv._key(f"workdirs/{digest}.tar.gz")
    rdv._create(key, archive)
    with pytest.raises(WorkloadError, match=r"work dir cannot be used: .* is refused") as exc:
        workdir.for_run(rdv, s)
    assert exc.value.exit_code == 2
    # Sealed with the key but other bytes than the digest's: never unpacked either.
    rdv._delete_prefix(key)
    rdv.put_workdir(digest, archive[:-1] + b"x")
    with pytest.raises(WorkloadError, match="does not match its digest") as exc:
        workdir.for_run(rdv, s)
    assert exc.value.exit_code == 2
    assert not (s.scratch / "work" / "prog.py").exists()
    # A node started without the launch key opens no payload: one line says what to do.
    keyless = s.model_copy(update={"launch_key": None})
    with pytest.raises(WorkloadError, match=r"no launch key .* needs SYNDEO_LAUNCH_KEY"):
        workdir.for_run(open_rendezvous(s.rendezvous, "wd"), keyless)


def test_only_the_head_gets_the_digest_and_only_targets_without_the_files_pack(
    tmp_path: Path,
) -> None:
    proj = _project(tmp_path / "proj")
    ssh = {"hosts": ["10.0.0.1", "10.0.0.2"], "known_hosts": str(tmp_path / "kh")}
    cfg = load_config(target="ssh", ssh=ssh, run="python prog.py", workdir=proj)
    spec = ClusterSpec.from_config(cfg, (tmp_path / "rdv").as_uri(), "wd")
    packed, archive = _packed(cfg, get_target(cfg), spec)
    assert archive is not None and packed.workdir_digest == hashlib.sha256(archive).hexdigest()
    assert packed.node_settings(0, Path("/tmp/s0")).workdir_digest == packed.workdir_digest
    assert packed.node_settings(1, Path("/tmp/s1")).workdir_digest is None
    # The built-in benchmark needs no files of ours; local nodes see them where they are.
    bench = load_config(target="ssh", ssh=ssh, workdir=proj)
    assert _packed(bench, get_target(bench), spec)[1] is None
    local = load_config(run="python prog.py", workdir=proj)
    assert _packed(local, get_target(local), spec)[1] is None
    # --exclude, as for submit: the same files, the same digest.
    excluded = load_config(
        target="ssh", ssh=ssh, run="python prog.py", workdir=proj, exclude=["mylib/"]
    )
    smaller = _packed(excluded, get_target(excluded), spec)[1]
    assert smaller is not None and len(smaller) < len(archive)
    assert json.loads(json.dumps(packed.model_dump(mode="json")))["workdir_digest"]


def test_a_digest_that_is_not_a_sha256_is_refused(tmp_path: Path, scratch: Path) -> None:
    with pytest.raises(ValueError, match="64 lower-case hex digits"):
        _settings(tmp_path, scratch, "abc")


def test_the_launchers_own_state_is_never_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$SYNDEO_HOME holds launch keys, tfvars and TLS keys: never in an archive, even
    where the user keeps it inside the project (the test beds do)."""
    import tarfile

    proj = _project(tmp_path / "proj")
    (proj / "state" / "clusters").mkdir(parents=True)
    (proj / "state" / "clusters" / "launch.key").write_text("secret")
    monkeypatch.setenv("SYNDEO_HOME", str(proj / "state"))
    with tarfile.open(fileobj=io.BytesIO(pack_workdir(proj, [])), mode="r:gz") as tar:
        names = tar.getnames()
    assert "prog.py" in names and not [n for n in names if n.startswith("state")]
    for inside in (proj / "state", proj / "state" / "clusters"):
        with pytest.raises(ConfigError, match="Syndeo's own state"):
            pack_workdir(inside, [])


def test_wheels_that_never_come_or_were_changed_are_never_installed(
    tmp_path: Path, scratch: Path
) -> None:
    """The workload's wheels (syndeo/node/wheelhouse.py) follow the work dir's rules: by
    digest, waited for up to the join timeout, never installed unless they match."""
    from syndeo.core.errors import NodeError
    from syndeo.node import wheelhouse

    digest = "ef" * 32
    s = _settings(tmp_path, scratch, "ab" * 32, timeout=0.3).model_copy(
        update={"wheelhouse_digest": digest}
    )
    rdv = open_rendezvous(s.rendezvous, "wd", launch_key=KEY)
    with pytest.raises(RendezvousTimeout, match=r"wheels .* did not reach"):
        wheelhouse.install(rdv, s)
    rdv._create(rdv._key(f"wheelhouses/{digest}.tar.gz"), b"planted")
    with pytest.raises(WorkloadError, match=r"wheels cannot be used: .* is refused"):
        wheelhouse.install(rdv, s)
    rdv._delete_prefix(rdv._key("wheelhouses/"))
    rdv.put_wheelhouse(digest, b"not the digest's")
    with pytest.raises(NodeError, match="do not match their digest"):
        wheelhouse.install(rdv, s)
    assert not (scratch / "pylib").exists()
