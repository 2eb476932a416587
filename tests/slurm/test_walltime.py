"""A run whose walltime ends mid-benchmark continues (issue 34), on the real local Slurm.

The job has a 3-minute limit and ``signal_before = 60``: Slurm sends USR1 to the batch
shell some time in the last 60-90 s (slurmctld checks time limits every 30 s), the
shell passes it to every node, the head to the benchmark, which stops with its whole
repeats in ``$SYNDEO_CHECKPOINT_DIR``; the batch shell requeues the job
(``max_requeues``), the next run continues from the checkpoint, and the result holds
every repeat with its exact sample count.
"""

from __future__ import annotations

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.support.slurm import assert_clean, collected_result

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# ~200 s of sampling whatever the bed's speed (the steady protocol sizes a repeat by
# time): the warning, 60-90 s before a 3-minute limit, always comes mid-run (bring-up
# takes ~20 s), and the next run finishes the rest before its own warning.  About 4
# minutes in all: Slurm's --time is in minutes and slurmctld checks limits every 30 s.
SECONDS, REPEATS = 20, 10


def test_walltime_warning_checkpoints_and_the_requeued_job_continues(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    run = (
        "python -m syndeo.bench run --env CartPole-v1 --workers 3 --no-local-limit "
        f"--protocol steady --steady-seconds {SECONDS} --samples-per-cpu 1000 --repeats {REPEATS}"
    )
    outcome = user_run.deploy(
        f'target = "slurm"\nnodes = 3\ncpus_per_node = 1\njoin_timeout_s = 120\nrun = "{run}"\n'
        '[slurm]\npartition = "debug"\ntime = "3"\nsignal_before = 60\nmax_requeues = 3\n',
    )
    err = outcome["_stderr"]
    assert outcome["exit_code"] == 0, err[-3000:]
    # The launcher says why the job ran again, and records it.
    assert "requeued itself at its time-limit warning" in err, err[-3000:]
    requeues = outcome["requeues"]
    assert requeues and all(r["why"] == "time limit" for r in requeues), requeues
    assert outcome["attempt"] == len(requeues) >= 1
    result = collected_result(outcome)
    assert result["partial"] is False
    # Continued, not started again: the first job's repeats are in the result.
    assert result["repeats_from_checkpoint"] >= 1, result["notes"]
    [env] = result["results"]  # type: ignore[index]
    total = env["samples_requested"]
    assert env["samples_counted"] == total > 3000
    repeats = env["syndeo"]["repeats"]
    assert [r["samples"] for r in repeats] == [total] * REPEATS
    assert_clean(slurm_cluster)
