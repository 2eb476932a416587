"""Test workload: a long run that survives its walltime through the checkpoint hook.

It does numbered units of work (``--unit-s`` each) and saves how far it got in
``$SYNDEO_CHECKPOINT_DIR`` after every one.  SIGUSR1 -- Syndeo's time-limit warning --
makes it stop after the unit in hand and exit 75 (stopped to continue later).

A first run (no checkpoint) works until it is warned, however late the warning comes:
so its job always ends mid-run, whatever this machine's speed.  A continued run (a
checkpoint exists) does ``--more`` units from where the checkpoint left off and
finishes, writing every unit with the run that did it to ``$SYNDEO_RESULT_PATH``: a
unit lost or done twice shows there.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

WARNED = False


def _on_warning(_signum: int, _frame: FrameType | None) -> None:
    global WARNED
    WARNED = True


def _save(path: Path, data: dict[str, object]) -> None:
    # Atomic: a run killed mid-write leaves the previous checkpoint whole.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main() -> int:
    # First thing: the warning must never find the default action (which ends us).
    signal.signal(signal.SIGUSR1, _on_warning)
    ap = argparse.ArgumentParser()
    ap.add_argument("--unit-s", type=float, default=0.5)
    ap.add_argument("--more", type=int, default=5)
    args = ap.parse_args()
    ckpt = Path(os.environ["SYNDEO_CHECKPOINT_DIR"]) / "counter.json"
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"units": [], "runs": 0}
    run = state["runs"]
    state["runs"] = run + 1
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    state.setdefault("job_end_times", []).append(end)
    goal = len(state["units"]) + args.more if run else None  # first run: until warned
    while goal is None or len(state["units"]) < goal:
        time.sleep(args.unit_s)  # one unit of work
        state["units"].append([len(state["units"]), run])
        _save(ckpt, state)
        if WARNED:
            print(f"warned: checkpointed {len(state['units'])} unit(s); exit 75", flush=True)
            return 75
    _save(Path(os.environ["SYNDEO_RESULT_PATH"]), state)
    ckpt.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
