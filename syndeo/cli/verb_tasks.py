"""The repository's invoke tasks for the user verbs, made from their declarations.

Each task's signature is made from the verb's options in :mod:`syndeo.cli.commands`: a
verb or an option added there appears on ``syndeo`` and on ``invoke`` at once, with the
same name and help, and the task calls the same function as ``syndeo``.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import Task, task

from syndeo.cli.commands import VERBS, Verb, invoke_help
from syndeo.cli.options import Option
from syndeo.core.errors import SyndeoError


@contextmanager
def exit_on_error() -> Iterator[None]:
    """A SyndeoError or Ctrl-C ends the task in one line with its exit code."""
    try:
        yield
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("syndeo: interrupted", code=130) from None


def number(kind: Callable[[str], Any], flag: str, value: Any) -> Any:
    """invoke hands an option whose default is None over as text: make it the number it
    is (a bad one is one line, before anything starts)."""
    if value is None:
        return None
    try:
        return kind(str(value))
    except ValueError:
        raise Exit(f"syndeo: error: {flag}: {value!r} is not a number", code=2) from None


def _default(o: Option, defaults: Mapping[str, Any]) -> Any:
    """What invoke shows when the option is not given (it infers the option's kind from
    it: a bool makes a flag, None takes text)."""
    if o.cli in defaults:
        return defaults[o.cli]
    if o.switch or o.negatable:
        return bool(o.default)
    return o.default


def _value(o: Option, given: Any, default: Any) -> Any:
    """invoke's value of ``o`` as the verb takes it: a flag left at its default is "not
    given" (None: the config file or the verb decides), a list is comma-separated."""
    if o.switch or o.negatable:
        return None if given == default and o.default is None else given
    if given is None:
        return None
    if o.repeat and not o.split:
        return list(given) or None  # invoke's iterable: the option repeated
    if o.repeat:
        return [part for part in str(given).split(",") if part]
    if o.type in (int, float) and not isinstance(given, o.type):
        return number(o.type, o.flag, given)
    if o.type is Path:
        return Path(given)
    return given


def _remainder(c: Context) -> list[str]:
    try:
        return shlex.split(c.remainder or "")
    except ValueError as exc:
        raise Exit(f"syndeo: error: the command after --: {exc}", code=2) from None


def _signature(options: list[Option], shown: Mapping[str, Any]) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("c", kind)]
    for o in options:
        if o.required:
            params.append(inspect.Parameter(o.cli, kind))
        else:
            params.append(inspect.Parameter(o.cli, kind, default=shown[o.cli]))
    return inspect.Signature(params)


def verb_task(verb: Verb) -> Task[Any]:
    """The invoke task of ``verb``: its options from its declaration, each handed to the
    verb's function under its keyword (``--join-timeout`` as ``join_timeout_s``)."""
    # Required options first (a Python signature's rule; invoke also takes them in order
    # without their flag).
    options = sorted(verb.options, key=lambda o: not o.required)
    shown = {o.cli: _default(o, verb.shown_defaults) for o in options}

    def body(c: Context, *args: Any, **given: Any) -> None:
        given.update(zip((o.cli for o in options), args, strict=False))
        keywords = {o.keyword: _value(o, given.get(o.cli), shown[o.cli]) for o in options}
        keywords = {k: v for k, v in keywords.items() if v is not None}
        if verb.command:
            keywords["command"] = _remainder(c)
        with exit_on_error():
            rc = verb.function()(**keywords)
        if type(rc) is int and rc != 0:
            raise Exit(code=rc)

    body.__signature__ = _signature(options, shown)  # type: ignore[attr-defined]
    body.__name__ = body.__qualname__ = verb.name
    body.__doc__ = verb.help[0].upper() + verb.help[1:] + "."
    iterable = [o.cli for o in options if o.repeat and not o.split]
    made: Task[Any] = task(help=invoke_help(verb.name), iterable=iterable, auto_shortflags=False)(
        body
    )
    return made


def verb_tasks() -> dict[str, Task[Any]]:
    """A task for every user verb, by name, in the order they are declared."""
    return {name: verb_task(v) for name, v in VERBS.items()}
