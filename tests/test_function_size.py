"""No function in ``syndeo/`` is longer than a screen: a longer one is split
into pieces, each with a name that says what it does.  Complexity has its own rule
(ruff's C901, max-complexity 12, in pyproject.toml); this counts lines, which ruff
does not."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 60

# Functions still over the limit, as "path:qualified name".  Only ever shrinks: it held
# launcher/deploy.py's _deploy and _up until their split (35435db) and is empty now.
# Add nothing here: split the function instead.
ALLOWED: set[str] = set()


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function in ``tree``, nested ones included."""
    found = []
    for node in ast.iter_child_nodes(tree):
        name = prefix
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            assert node.end_lineno is not None
            found.append((name, node.end_lineno - node.lineno + 1))
        elif isinstance(node, ast.ClassDef):
            name = f"{prefix}{node.name}"
        else:
            found += _functions(node, prefix)
            continue
        found += _functions(node, f"{name}.")
    return found


def _long_functions() -> dict[str, int]:
    long = {}
    for path in sorted((ROOT / "syndeo").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for name, lines in _functions(ast.parse(path.read_text(), str(path))):
            if lines > MAX_LINES:
                long[f"{where}:{name}"] = lines
    return long


def test_no_function_is_longer_than_a_screen() -> None:
    too_long = {name: n for name, n in _long_functions().items() if name not in ALLOWED}
    assert too_long == {}, f"over {MAX_LINES} lines (split them): {too_long}"


def test_the_allow_list_names_only_functions_still_too_long() -> None:
    # A function split (or renamed) leaves the list: it cannot hide a later regression.
    stale = sorted(ALLOWED - _long_functions().keys())
    assert stale == [], f"now within {MAX_LINES} lines: remove them from ALLOWED: {stale}"


def test_the_count_sees_methods_and_nested_functions() -> None:
    tree = ast.parse(
        "class A:\n    def m(self):\n        def inner():\n            pass\n\n"
        "async def f():\n    pass\n"
    )
    assert _functions(tree) == [("A.m", 3), ("A.m.inner", 2), ("f", 2)]
