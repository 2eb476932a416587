"""An interrupted benchmark keeps what it measured: a whole result file, marked partial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from syndeo.bench.models import BenchResult
from syndeo.bench.report import load_results


def _bench(out: Path, repeats: int) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "syndeo.bench",
        "run",
        "--env",
        "CartPole",
        "--num-cpus",
        "1",
        "--repeats",
        str(repeats),
        "--samples-per-cpu",
        "3000",
        "--envs-per-actor",
        "4",
        "--no-local-limit",
        "--out",
        str(out),
    ]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")},
    )


@pytest.mark.cluster
def test_an_interrupted_run_keeps_its_repeats_marked_partial(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = _bench(out, repeats=1000)  # far more than it gets to run
    try:
        deadline = time.monotonic() + 240
        while not out.exists():
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no partial result was written"
            time.sleep(0.2)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    first = BenchResult.model_validate_json(out.read_text())
    assert first.partial and len(first.results) == 1
    assert len(first.results[0].syndeo.repeats) >= 1
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert f"marked partial): {out}" in err, err  # says where the result is
    kept = BenchResult.model_validate(json.loads(out.read_text()))  # whole, never torn
    assert kept.partial and len(kept.results[0].syndeo.repeats) >= 1
    assert not list(tmp_path.glob(".*tmp"))
    assert load_results(tmp_path)[0][1].partial  # the report reads it (and says partial)


@pytest.mark.cluster
def test_a_finished_run_is_not_partial(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = _bench(out, repeats=2)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    res = BenchResult.model_validate_json(out.read_text())
    assert not res.partial and len(res.results[0].syndeo.repeats) == 2


def test_report_names_the_files_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "broken.json").write_text('{"manifest": ')
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo.bench", "report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert f"{tmp_path / 'broken.json'} (not JSON)" in proc.stderr, proc.stderr
