"""The cluster id a launcher claims is given back whenever that launcher fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import one_line_error, syndeo


@pytest.mark.parametrize("verb", ["deploy", "up"])
def test_a_launch_that_fails_after_the_claim_frees_the_id(
    syndeo_home: Path, tmp_path: Path, verb: str
) -> None:
    # More nodes than the local target runs: refused by launch, after the id was claimed.
    args = [verb, "--target", "local", "--nodes", "65", "--cluster-id", "tclaimfree"]
    if verb == "deploy":
        args += ["--run", "python -c pass"]
    for _ in range(2):  # the second attempt meets the same error, not "in use"
        line = one_line_error(syndeo(*args, cwd=tmp_path, timeout=60))
        assert "at most 64 nodes" in line, line
    assert not (syndeo_home / "rendezvous" / "tclaimfree").exists()
