"""Bad input to the user-facing verbs: one clear line, exit != 0, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, one_line_error, syndeo


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--target", "moon"],
            "target: Input should be 'local', 'slurm', 'ssh', 'aws', 'gcp', 'azure' or 'alibaba'",
        ),
        (["--target", "aws"], "aws: --instance-type or [aws] instance_type in the config"),
        (["--nodes", "-1"], "nodes: Input should be greater than or equal to 1"),
        (["--nodes", "0"], "nodes: Input should be greater than or equal to 1"),
        (["--cpus-per-node", "0"], "cpus_per_node: Input should be greater than or equal to 1"),
        (["--cluster-id", "Not_OK"], "cluster_id: Value error, use 1-40 of a-z"),
        (["--run", ""], "run: Value error, is not a valid command line (is empty)"),
        (["--run", "python 'unclosed"], "is not a valid command line (No closing quotation)"),
        (["--rendezvous", "ftp://host/x"], "rendezvous: Value error, use file:///dir, s3://"),
        (["--rendezvous", "file://relative/dir"], "not a file URI"),
        (["--rendezvous", "file:///proc/syndeo"], "cannot create rendezvous directory /proc/"),
        (["--join-timeout", "-5"], "join_timeout_s: Input should be greater than 0"),
    ],
)
def test_deploy_rejects_bad_options(
    syndeo_home: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    proc = syndeo("deploy", *args, cwd=tmp_path, timeout=60)
    line = one_line_error(proc)
    assert message in line
    assert not (tmp_path / "results").exists()
    assert not (syndeo_home / "clusters").exists() or not any(
        (syndeo_home / "clusters").glob("*/node-*.log")
    )


def test_unwritable_rendezvous_under_a_file(syndeo_home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    proc = syndeo("deploy", "--rendezvous", (blocker / "rdv").as_uri(), cwd=tmp_path)
    assert "cannot create rendezvous directory" in one_line_error(proc)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("nodes = [", "is not valid TOML"),
        ("nodes = 2\ncolour = 'blue'\n", "colour: is not a known setting"),
        ("nodes = 'three'\n", "nodes: Input should be a valid integer"),
        ("[bench]\nmode = 'fast'\n", "bench.mode: Input should be 'count' or 'collect'"),
    ],
)
def test_malformed_config_file(
    syndeo_home: Path, tmp_path: Path, content: str, message: str
) -> None:
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(content)
    proc = syndeo("deploy", "--config", str(cfg), cwd=tmp_path)
    assert message in one_line_error(proc)


def test_missing_config_file(syndeo_home: Path, tmp_path: Path) -> None:
    proc = syndeo("deploy", "--config", "nope.toml", cwd=tmp_path)
    assert "config file not found: nope.toml" in one_line_error(proc)


def test_down_without_a_cluster(syndeo_home: Path, tmp_path: Path) -> None:
    proc = syndeo("down", cwd=tmp_path)
    assert "no cluster is up" in one_line_error(proc)
    proc = syndeo("down", "--cluster-id", "ghost", cwd=tmp_path)
    assert "no cluster 'ghost' is up" in one_line_error(proc)


def test_invoke_front_end_gives_the_same_one_line_errors(syndeo_home: Path, tmp_path: Path) -> None:
    invoke = Path(sys.executable).with_name("invoke")
    proc = subprocess.run(
        [str(invoke), "-r", str(ROOT), "deploy", "--nodes=-3"],
        cwd=tmp_path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "nodes: Input should be greater than or equal to 1" in proc.stderr


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("checkout", "holds the syndeo package the launcher runs"),
        ("venv", "the launcher's virtualenv"),
        ("around-home", "holds SYNDEO_HOME (launch keys, cluster state)"),
        ("in-home", "lies inside SYNDEO_HOME (launch keys, cluster state)"),
        ("user-home", "holds your home directory"),
    ],
)
def test_a_work_dir_holding_what_the_launcher_runs_is_refused(
    syndeo_home: Path, tmp_path: Path, where: str, message: str
) -> None:
    """Tasks may write their work dir (bound into every container on local and Slurm):
    one that holds the launcher's own code or state -- the checkout an editable install
    runs from, the venv, $SYNDEO_HOME -- or the user's home is refused before anything
    starts, whether named or the current directory."""
    workdir = {
        "checkout": ROOT,
        "venv": Path(sys.prefix) / "lib",
        "around-home": syndeo_home.parent,
        "in-home": syndeo_home / "proj",
        "user-home": Path.home(),
    }[where]
    if where == "venv" and sys.prefix == sys.base_prefix:
        pytest.fail("the tests run in the project's venv (scripts/setup): not in one here")
    named = syndeo("deploy", "--run", "python prog.py", "--workdir", str(workdir), cwd=tmp_path)
    assert message in one_line_error(named)
    if workdir.is_dir():
        here = syndeo("deploy", "--run", "python prog.py", cwd=workdir)
        assert message in one_line_error(here)
    assert not (syndeo_home / "clusters").exists()


def test_the_benchmark_from_the_checkout_needs_no_work_dir(syndeo_home: Path) -> None:
    """The README's first command runs the built-in benchmark from the clone: no program
    of the user's, so no work dir to bind, and nothing to refuse (dry run: nothing starts)."""
    proc = syndeo("deploy", "--target", "local", "--dry-run", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "SYNDEO_WORKDIR" not in proc.stdout, proc.stdout
