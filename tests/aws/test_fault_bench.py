"""``python -m benchmarks.autoscale --fault SECONDS --target aws`` (docs/autoscale.md) runs
as shown on the emulated AWS and counts what it says: no zone with capacity while a
placement group waits for a node, and the cloud API requests the launcher's side made
meanwhile, from the emulator's own request log.  Kept short here (the first refusal
and its backoff); the 2-minute run is the benchmark's.  No goal is asserted: the
figures are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbeds import awsemu
from tests.support.bench import run_benchmark

pytestmark = [pytest.mark.aws, pytest.mark.slow]
FAULT = ("--fault", "45", "--target", "aws")


def test_the_cloud_fault_case_counts_the_requests_to_the_cloud_api(
    aws: awsemu.State, tmp_path: Path
) -> None:
    got = run_benchmark("autoscale", tmp_path / "fault.json", *FAULT)
    assert (got["case"], got["target"]) == ("fault", "aws") and got["fault_s"] >= 45
    api = got["cloud_api"]
    # The watcher tried, EC2 (emulated) refused, the watcher said so and backed off.
    assert api["run_instances"] >= 1 and got["refusals_logged"] >= 1, got
    assert api["by_action"]["ec2:RunInstances"] == api["run_instances"]
    assert api["launcher_calls"] == sum(api["by_action"].values()) >= api["run_instances"]
    minutes = got["fault_s"] / 60
    assert api["launcher_per_min"] == pytest.approx(api["launcher_calls"] / minutes, rel=0.02)
    # The bed was the tests' and still runs: the benchmark did not take it down.
    assert awsemu.running(aws.base) is not None
