"""``syndeo`` command line: ``node`` (what every target runs) plus the user-facing verbs.

Every user-caused failure is a :class:`SyndeoError`: printed as one line, with a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from syndeo.core.errors import SyndeoError


def _node(_args: argparse.Namespace) -> int:
    from syndeo.node import main as node

    return node.main()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="syndeo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("node", help="run this machine's node (configured by SYNDEO_* variables)")
    p.set_defaults(func=_node)
    from syndeo.cli import verbs

    verbs.add_commands(sub)
    from syndeo.cli import jobverbs

    jobverbs.add_commands(sub)
    from syndeo.cli import compare as compare_cli

    compare_cli.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given == ["node"]:
        # On every node's start-up path (the head's is the cluster's): skip building
        # the launcher's CLI, which imports rich, the targets, compare (~0.5 s).
        func = _node
        args = argparse.Namespace(command="node")
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
