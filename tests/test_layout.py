"""The package's layers hold: no lower layer imports an upper one, the node runtime never
imports the launcher, nothing imports a test bed, and no two files or layers import each
other (see ``tests/support/layers.py`` for the layers)."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.layers import ALLOWED, check, layer_of

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_keeps_its_layers() -> None:
    report = check(ROOT)
    assert report.violations == []
    assert report.file_cycles == []
    assert report.layer_cycles == []


def test_every_package_file_is_in_a_layer() -> None:
    for path in (ROOT / "syndeo").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        layer = layer_of(name)
        assert layer is None or layer in ALLOWED, f"{name}: {layer}"


def test_the_node_runtime_may_not_import_the_launcher_cli_bench_or_compare() -> None:
    assert not ALLOWED["node"] & {"launcher", "targets", "verbs", "cli", "bench", "compare"}


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "syndeo", tmp_path / "syndeo", ignore=shutil.ignore_patterns("*.pyc"))
    return tmp_path


def _plant(root: Path, rel: str, line: str, *, lazy: bool = False) -> None:
    path = root / rel
    text = path.read_text()
    if lazy:  # inside a function, where a top-of-file scan would miss it
        text += f"\n\ndef _planted() -> None:\n    {line}\n"
    else:
        future = "from __future__ import annotations\n"
        text = text.replace(future, f"{future}{line}\n", 1)
    path.write_text(text)


@pytest.mark.parametrize(
    ("rel", "line", "lazy", "expected"),
    [
        # the node runtime importing the launcher, lazily
        ("syndeo/node/raynode.py", "from syndeo.launcher import config", True, "(launcher)"),
        # the shared contract importing the rendezvous (an upper layer)
        ("syndeo/core/nodeconfig.py", "import syndeo.rendezvous.base", False, "(rendezvous)"),
        # a target importing the verbs above it
        (
            "syndeo/launcher/targets/local.py",
            "from syndeo.launcher.grow import grow",
            True,
            "(verbs)",
        ),
        # the launcher building images
        ("syndeo/launcher/command.py", "from syndeo.image import build", True, "(image.build)"),
        # the package importing a test bed
        ("syndeo/rendezvous/file.py", "from testbeds import objectstores", True, "outside"),
    ],
)
def test_a_planted_bad_import_fails_the_contract(
    copy: Path, rel: str, line: str, lazy: bool, expected: str
) -> None:
    _plant(copy, rel, line, lazy=lazy)
    report = check(copy)
    assert len(report.violations) == 1, report.violations
    assert expected in report.violations[0]


def test_a_planted_circle_between_files_fails_the_contract(copy: Path) -> None:
    # bench.points is below bench.report; importing the report back closes a circle
    _plant(copy, "syndeo/bench/points.py", "from syndeo.bench import report", lazy=True)
    report = check(copy)
    assert report.violations == []
    assert len(report.file_cycles) == 1
    assert {"syndeo.bench.points", "syndeo.bench.report"} <= set(report.file_cycles[0])


def test_no_test_imports_from_another_test_module_or_a_private_name() -> None:
    """Shared helpers live in tests/support (or a folder's conftest/helper module)."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                top = node.module.split(".")[0]
                if top not in ("tests", "testbeds", "benchmarks", "syndeo"):
                    continue
                last = node.module.rsplit(".", 1)[-1]
                if top == "tests" and last.startswith("test_"):
                    bad.append(f"{path.relative_to(ROOT)}: from {node.module}")
                private = [a.name for a in node.names if a.name.startswith("_")]
                if top != "syndeo" and private:
                    bad.append(f"{path.relative_to(ROOT)}: {node.module}.{private}")
    assert bad == []


def test_every_tracked_symlink_points_at_a_file() -> None:
    """A moved file leaves its links behind (slurm/job.sbatch.j2 once pointed nowhere)."""
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000")]
    assert links, "the repository's links (slurm/job.sbatch.j2 at least)"
    assert [link for link in links if not (ROOT / link).exists()] == []
