"""The ``syndeo`` command line: ``node`` (what every target runs on each machine) and the
user verbs, each made from its declaration in :mod:`syndeo.cli.commands`.

Every user-caused failure is a SyndeoError: printed as one line, with a non-zero exit,
never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, NoReturn

from syndeo.core.errors import SyndeoError

if TYPE_CHECKING:
    from syndeo.cli.commands import Verb

DESCRIPTION = (
    "Portable Ray clusters on your machine, Slurm, ssh hosts and cloud VMs. "
    "Run 'syndeo VERB --help' for a verb's options."
)


class _OneLineParser(argparse.ArgumentParser):
    """A mistake on the command line is one line and exit status 2, like every other."""

    def error(self, message: str) -> NoReturn:
        print(f"syndeo: error: {message} (see: {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def version() -> str:
    """The installed package's version (its metadata), else the source tree's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("syndeo")
    except PackageNotFoundError:
        from syndeo import __version__

        return __version__


def _node(_args: argparse.Namespace) -> int:
    from syndeo.node import main as node

    return node.main()


def _call(verb: Verb, args: argparse.Namespace) -> int:
    """Run ``verb`` with the options given; one not given is left to the verb (and to
    the config file it reads), so both command lines mean the same by leaving it out."""
    options = {o.keyword: getattr(args, o.keyword) for o in verb.options}
    given = {k: v for k, v in options.items() if v is not None}
    if verb.command:
        command = list(args.command)
        given["command"] = command[1:] if command[:1] == ["--"] else command
    result = verb.function()(**given)
    # A verb that says how it ended returns an exit status; any other result means 0.
    return result if type(result) is int else 0


def build_parser() -> argparse.ArgumentParser:
    from syndeo.cli.commands import VERBS, add_arguments

    parser = _OneLineParser(prog="syndeo", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"syndeo {version()}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = sub.add_parser("node", help="run this machine's node (configured by SYNDEO_* variables)")
    p.set_defaults(func=_node)
    for verb in VERBS.values():
        p = sub.add_parser(verb.name, help=verb.help, description=verb.help)
        add_arguments(p, verb)
        p.set_defaults(func=partial(_call, verb))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given == ["node"]:
        # On every node's start-up path (the head's is the cluster's): skip building
        # the launcher's CLI, which imports rich, the targets, compare (~0.5 s).
        func = _node
        args = argparse.Namespace(verb="node")
    else:
        args = build_parser().parse_args(given)
        func = args.func
    try:
        return int(func(args))
    except SyndeoError as exc:
        print(f"syndeo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("syndeo: interrupted", file=sys.stderr)
        return 130
