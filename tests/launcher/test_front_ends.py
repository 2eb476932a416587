"""``syndeo`` and ``invoke`` offer the same verbs and options, from one declaration each,
with help text in plain words."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from invoke.collection import Collection
from invoke.loader import FilesystemLoader

from syndeo.cli.commands import VERBS
from syndeo.cli.main import build_parser
from tests.support.helpers import one_line_error, syndeo

ROOT = Path(__file__).resolve().parents[2]


def _collection() -> Collection:
    module, _ = FilesystemLoader(start=str(ROOT)).load("tasks")
    return Collection.from_module(module)


def _subparser(verb: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[verb]
    return parser


USER_VERBS = {
    *("deploy", "up", "down", "grow", "shrink", "status", "submit", "jobs", "logs"),
    *("cancel", "fetch", "check", "compare", "build", "bench", "report"),
}


def test_syndeo_and_invoke_have_every_user_verb() -> None:
    assert set(VERBS) >= USER_VERBS
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(VERBS) | {"node"}
    invoke_tasks = set(_collection().tasks)
    assert set(VERBS) <= invoke_tasks
    # What invoke has beyond them is the repository's own (docs, its benchmarks).
    assert invoke_tasks - set(VERBS) == {"docs", "bench-bringup", "bench-rendezvous"}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_both_front_ends_take_the_tables_options(verb: str) -> None:
    table = VERBS[verb].options
    task = _collection()[verb]
    invoke_names = {a.name.replace("-", "_") for a in task.get_arguments()}
    assert invoke_names == {o.cli for o in table}
    parser = _subparser(verb)
    flags = {s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}
    expected = {o.flag for o in table} | {f"--no-{o.flag[2:]}" for o in table if o.negatable}
    assert flags == expected
    # (submit's command, after `--`, is a positional of syndeo and invoke's remainder)
    dests = {a.dest for a in parser._actions if a.option_strings and a.dest != "help"}
    assert dests == {o.keyword for o in table}
    assert parser.description == VERBS[verb].help
    assert task.__doc__.rstrip(".").lower() == VERBS[verb].help.rstrip(".").lower()


# Sphinx roles, double backticks, Markdown code spans: what a terminal shows as noise.
MARKUP = re.compile(r"``|`[^`]+`|:(class|mod|func|meth|attr|ref):|\\[a-z]")


@pytest.mark.parametrize("verb", ["", *sorted(VERBS)])
def test_every_help_is_plain_text(verb: str) -> None:
    args = [verb, "--help"] if verb else ["--help"]
    out = syndeo(*args, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not MARKUP.search(out.stdout), out.stdout
    assert "usage: syndeo" in out.stdout


def test_version_is_the_packages() -> None:
    from importlib.metadata import version

    out = syndeo("--version", cwd=ROOT, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"syndeo {version('syndeo')}"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["deploy", "--nodes", "two"], "argument --nodes: invalid int value: 'two'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["build", "--base", "ubuntu"], "--base must be debootstrap or docker"),
        (["compare", "--plan", "--env", "X", "--sizes", "0"], "--sizes: give node counts from 1"),
    ],
)
def test_bad_input_is_one_line(args: list[str], says: str, tmp_path: Path) -> None:
    out = syndeo(*args, cwd=tmp_path, timeout=60)
    assert says in one_line_error(out)
    assert out.returncode == 2 and "usage:" not in out.stderr


def _tasks(ns: Collection, prefix: str = "") -> list[tuple[str, object]]:
    out = [(prefix + name, ns.tasks[name]) for name in ns.tasks]
    for name, sub in ns.collections.items():
        out += _tasks(sub, f"{prefix}{name}.")
    return out


def test_every_invoke_option_has_help_and_a_real_name() -> None:
    missing, broken = [], []
    for name, task in _tasks(_collection()):
        for arg in task.get_arguments():  # type: ignore[attr-defined]
            if not arg.help:
                missing.append(f"{name} --{arg.name}")
            if any(not n.strip("-") for n in arg.names) or len(arg.names) != 1:
                broken.append(f"{name}: {arg.names}")
    assert missing == [] and broken == []


def test_invoke_help_shows_long_options_only() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "--help", "bench"],
        capture_output=True,
        text=True,
        check=True,
    )
    options = [line.strip() for line in out.stdout.splitlines() if line.startswith("  -")]
    assert options and all(line.startswith("--") for line in options)
    assert not [line for line in options if line.startswith("--,") or line.startswith("--=")]


def test_the_reference_lists_every_verb_as_its_help_says() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    listed = re.findall(r"^\| `syndeo ([a-z]+)` \| (.+) \|$", page, flags=re.M)
    assert listed == [(v.name, v.help) for v in VERBS.values()]
