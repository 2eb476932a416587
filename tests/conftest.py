"""Shared fixtures.  Everything here is real: subprocesses, Ray, files; no mocks."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

# The real SIF (built once per machine) for every test directory that runs containers.
from tests.apptainer.conftest import built_image, sif  # noqa: F401
from tests.support import quick, workers

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--gpu",
        action="store_true",
        help="run only the tests that need a real GPU (scripts/test-gpu); they fail without one",
    )
    parser.addoption(
        "--quick",
        action="store_true",
        help="the quick tier (scripts/test --quick): leave out every test marked as needing "
        f"more ({', '.join(quick.NEEDS_MORE)}), and fail one that starts Ray or a test bed",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Ctrl-C as a terminal sends it: a suite started in the background of a script (`cmd &`
    # without job control) inherits SIGINT ignored, and so would every launcher the tests
    # start and then interrupt.  A handler of ours becomes the default again in children.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.getoption("--quick"):
        config.pluginmanager.register(quick.QuickGuard(), "syndeo-quick-guard")
    if config.pluginmanager.hasplugin("xdist") and not workers.in_worker():
        config.pluginmanager.register(workers.Controller(config), "syndeo-workers")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The GPU tests are a job of their own: without --gpu they are left out, and the
    summary says so (never a silent skip); with --gpu only they run."""
    gpu = config.getoption("--gpu")
    keep = [i for i in items if (i.get_closest_marker("gpu") is not None) == gpu]
    left = [i for i in items if i not in keep]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
    config.stash[_GPU_LEFT] = 0 if gpu else len(left)
    if config.getoption("--quick"):
        more = [i for i in items if quick.needs_more(i)]
        if more:
            config.hook.pytest_deselected(items=more)
            items[:] = [i for i in items if not quick.needs_more(i)]
        config.stash[_QUICK_LEFT] = len(more)
    _image_modules_last(items)
    if workers.grouped(config):
        workers.order(items)
        workers.write_groups(items)
    workers.report_left(config, gpu=config.stash[_GPU_LEFT], quick=config.stash.get(_QUICK_LEFT, 0))


def _image_modules_last(items: list[pytest.Item]) -> None:
    """Modules with a test that needs the test image run after all others, in their
    order: scripts/test builds the image in the background meanwhile (testbeds/image.py;
    the first test that needs it waits for that build).  Whole modules, so that no
    module-scoped fixture is set up twice."""
    needs = {i.nodeid.split("::")[0] for i in items if "built_image" in i.fixturenames}
    needs |= {i.nodeid.split("::")[0] for i in items if "sif" in i.fixturenames}
    items.sort(key=lambda i: i.nodeid.split("::")[0] in needs)  # stable: order kept


_GPU_LEFT = pytest.StashKey[int]()
_QUICK_LEFT = pytest.StashKey[int]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    left = config.stash.get(_GPU_LEFT, 0) or workers.left(config, "gpu")
    if left:
        terminalreporter.write_line(
            f"GPU job not run here: {left} test(s) need a real GPU (run scripts/test-gpu on a "
            "machine with one)",
            yellow=True,
        )
    more = config.stash.get(_QUICK_LEFT, 0) or workers.left(config, "quick")
    if more:
        terminalreporter.write_line(
            f"quick tier: {more} test(s) that need a Ray cluster, a test bed or more time were "
            "left out (scripts/test runs them all)",
            yellow=True,
        )


@pytest.fixture
def syndeo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private SYNDEO_HOME so tests never see each other's clusters or logs: beside
    ``tmp_path`` (where tests put the program's work dir), never inside it -- the
    launcher refuses a work dir that holds its state (syndeo/launcher/trusted.py)."""
    home = tmp_path.with_name(tmp_path.name + ".home")
    monkeypatch.setenv("SYNDEO_HOME", str(home))
    return home
