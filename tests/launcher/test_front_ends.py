"""``syndeo`` and ``invoke`` offer the same options, from one table, each with help text."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from invoke.collection import Collection
from invoke.loader import FilesystemLoader

from syndeo.cli.main import build_parser
from syndeo.cli.options import VERBS

ROOT = Path(__file__).resolve().parents[2]


def _collection() -> Collection:
    module, _ = FilesystemLoader(start=str(ROOT)).load("tasks")
    return Collection.from_module(module)


def _subparser(verb: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[verb]
    return parser


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_both_front_ends_take_the_tables_options(verb: str) -> None:
    table = VERBS[verb]
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
