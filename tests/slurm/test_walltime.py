"""A run whose walltime ends mid-run continues, on the real local Slurm.

The job has a 2-minute limit and ``signal_before = 40``: Slurm sends USR1 to the batch
shell in the last 40-70 s (slurmctld looks at time limits every 30 s and may warn up
to that much early), the shell passes it to every node, the head to the workload
(``checkpointed.py``), which saves its count in ``$SYNDEO_CHECKPOINT_DIR`` and exits
75; the batch shell requeues the job (``max_requeues``), and the next run continues
from the checkpoint.  The workload's first run works until it is warned, so the job
always ends mid-run whatever this machine's speed (the benchmark's own checkpoint
counting is tests/bench/test_resume.py, without Slurm).  About 2-3 minutes.
"""

from __future__ import annotations

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.slurm.conftest import HERE
from tests.support.slurm import assert_clean, collected_result

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

MORE = 5  # units the continued run does before it finishes


def test_walltime_warning_checkpoints_and_the_requeued_job_continues(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    run = f"python {HERE / 'checkpointed.py'} --unit-s 0.5 --more {MORE}"
    outcome = user_run.deploy(
        f'target = "slurm"\nnodes = 2\ncpus_per_node = 1\njoin_timeout_s = 120\nrun = "{run}"\n'
        '[slurm]\npartition = "debug"\ntime = "2"\nsignal_before = 40\nmax_requeues = 2\n',
    )
    err = outcome["_stderr"]
    assert outcome["exit_code"] == 0, err[-3000:]
    # The launcher says why the job ran again (with Slurm's other news, on stdout), and
    # records it.
    said = outcome["_stdout"]
    assert "requeued itself at its time-limit warning" in said, said[-3000:]
    requeues = outcome["requeues"]
    assert requeues and all(r["why"] == "time limit" for r in requeues), requeues
    assert outcome["attempt"] == len(requeues)
    result = collected_result(outcome)
    units = result["units"]
    # Every unit exactly once, in order: nothing lost at the warning, nothing redone.
    assert [u for u, _run in units] == list(range(len(units)))  # type: ignore[union-attr]
    runs = [run for _u, run in units]  # type: ignore[union-attr]
    assert result["runs"] == len(requeues) + 1 and runs == sorted(runs)
    assert runs.count(0) >= 1 and runs.count(len(requeues)) == MORE, runs
    # The deadline is visible to the program, a later one in the requeued job.
    ends = [int(e) for e in result["job_end_times"]]  # type: ignore[union-attr]
    assert len(ends) == len(requeues) + 1 and ends == sorted(ends) and ends[0] < ends[-1]
    assert_clean(slurm_cluster)
