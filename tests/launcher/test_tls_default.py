"""Ray's TLS by target: on where the nodes talk over a network other users share (slurm,
ssh), off on loopback (local) and the clouds (a network per cluster); the user's word
(``--tls``/``--no-tls``, ``tls = …``) wins either way, and turning it off where it is on
by default is said in one line.  The dry run shows which: ``SYNDEO_TLS=1`` in what
every node is given.  (A real Slurm deploy with the default: tests/slurm/test_tls.py.)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from syndeo.cli.main import build_parser
from syndeo.launcher import tls as launcher_tls
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from tests.support.helpers import syndeo

NOTICE = (
    "syndeo: Ray's TLS is off: the cluster's token crosses the network between nodes in "
    "clear (--no-tls, or tls = false in the config)"
)


def _spec(target: str, **over: Any) -> ClusterSpec:
    return ClusterSpec.from_config(load_config(target=target, **over), "file:///tmp/r", "tls-d")


@pytest.mark.parametrize(
    ("target", "on"), [("slurm", True), ("ssh", True), ("local", False), ("aws", False)]
)
def test_each_target_has_its_own_tls_default_and_the_users_word_wins(target: str, on: bool) -> None:
    spec = _spec(target)
    assert spec.tls is on
    assert (spec.extra_env() == {"SYNDEO_TLS": "1"}) is on
    assert _spec(target, tls=not on).tls is (not on)  # --tls / --no-tls, tls = true / false


def test_turning_tls_off_where_it_is_on_by_default_is_one_line() -> None:
    assert launcher_tls.notice(_spec("slurm", tls=False)) == NOTICE
    assert launcher_tls.notice(_spec("ssh", tls=False)) == NOTICE
    # Nothing to say where TLS is on, or off by default (loopback, a cloud's own network).
    for spec in (_spec("slurm"), _spec("local"), _spec("aws", tls=False)):
        assert launcher_tls.notice(spec) is None


def _subparser(verb: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[verb]
    return parser


@pytest.mark.parametrize("verb", ["deploy", "up", "check"])
def test_the_command_line_says_tls_on_off_or_nothing(verb: str) -> None:
    parser = _subparser(verb)
    assert parser.parse_args([]).tls is None  # the target decides
    assert parser.parse_args(["--tls"]).tls is True
    assert parser.parse_args(["--no-tls"]).tls is False


def _dry_run(tmp_path: Path, *args: str) -> str:
    proc = syndeo("deploy", "--dry-run", "--cluster-id", "tls-dry", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_slurm_dry_run_shows_tls_on_unless_turned_off(syndeo_home: Path, tmp_path: Path) -> None:
    slurm = ["--target", "slurm", "--nodes", "2"]
    assert "export SYNDEO_TLS=1\n" in _dry_run(tmp_path, *slurm)
    assert "SYNDEO_TLS" not in _dry_run(tmp_path, *slurm, "--no-tls")
    # Loopback: off unless asked for.
    assert "SYNDEO_TLS" not in _dry_run(tmp_path, "--target", "local")
    assert "SYNDEO_TLS=1 " in _dry_run(tmp_path, "--target", "local", "--tls")
