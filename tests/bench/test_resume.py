"""The benchmark's checkpoint hook: warned with SIGUSR1, a run stops with its
whole repeats in ``$SYNDEO_CHECKPOINT_DIR`` and exits 75; the next run of the same
configuration continues from there, and every repeat counts exactly its samples.

What Slurm's time-limit warning and requeue do to it (tests/slurm/test_walltime.py),
without Slurm: the signal is sent here by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from syndeo.bench.models import BenchResult
from syndeo.bench.resume import CHECKPOINTED_EXIT, FILE_NAME

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPEATS = 4


def _bench(out: Path, ckpt_dir: Path) -> subprocess.Popen[str]:
    # Steady protocol: each repeat samples for ~2 s, so the warning comes mid-run
    # whatever this machine's speed.
    argv = [sys.executable, "-m", "syndeo.bench", "run", "--env", "CartPole", "--num-cpus", "1"]
    argv += ["--repeats", str(REPEATS), "--protocol", "steady", "--steady-seconds", "2"]
    argv += ["--samples-per-cpu", "1000", "--envs-per-actor", "4", "--no-local-limit"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env["SYNDEO_CHECKPOINT_DIR"] = str(ckpt_dir)
    return subprocess.Popen(
        [*argv, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _warn_after_first_repeat(proc: subprocess.Popen[str], ckpt: Path) -> None:
    deadline = time.monotonic() + 240
    while not ckpt.exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.1)
    proc.send_signal(signal.SIGUSR1)


def test_a_warned_run_checkpoints_and_the_next_run_continues_exactly(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt" / FILE_NAME
    ckpt.parent.mkdir()
    first = _bench(tmp_path / "first.json", ckpt.parent)
    try:
        _warn_after_first_repeat(first, ckpt)
        _out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == CHECKPOINTED_EXIT, err[-2000:]
    saved = BenchResult.model_validate_json(ckpt.read_text())
    kept = len(saved.results[0].syndeo.repeats)
    assert saved.partial and 1 <= kept < REPEATS, kept

    second = _bench(tmp_path / "second.json", ckpt.parent)
    _out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-2000:]
    assert "continuing from the checkpoint" in err
    res = BenchResult.model_validate_json((tmp_path / "second.json").read_text())
    assert not res.partial and res.repeats_from_checkpoint == kept
    [env] = res.results
    # The first run's repeats kept as measured, the rest measured to the same size.
    assert env.syndeo.repeats[:kept] == saved.results[0].syndeo.repeats
    assert [r.samples for r in env.syndeo.repeats] == [env.samples_requested] * REPEATS
    assert env.samples_requested == saved.results[0].samples_requested
    assert not ckpt.exists()  # finished: nothing left to continue
