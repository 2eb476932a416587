"""A launch whose apply fails and whose teardown then fails too: the user gets both in
one line -- Terraform's reason for the failed apply and what may still exist, with the
command that removes it -- never only the second (the first used to be lost to it).

A Terraform-backed target on a small provider-free module, with the real terraform
binary; the run-path counterpart (a run that ended, then a destroy refused for good) is
tested whole on the emulated AWS (tests/aws/test_lifecycle.py).  Both, and `up`'s early
ends, share one helper (core.errors.tear_down_after), tested here on its own too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syndeo.core.errors import TargetError, tear_down_after
from syndeo.launcher.targets import tfexec
from tests.support.tftarget import ModuleTarget, one_node_spec

# One resource made, one whose creation fails; the first's delete fails every time.
MODULE = """
variable "marker" {
  type = string
}
resource "terraform_data" "made" {
  input = var.marker
  provisioner "local-exec" {
    when    = destroy
    command = "echo 'Error: the delete was refused' >&2; exit 1"
  }
}
resource "terraform_data" "broken" {
  depends_on = [terraform_data.made]
  provisioner "local-exec" {
    command = "echo 'Error: no capacity in this zone' >&2; exit 1"
  }
}
"""


def test_a_failed_apply_then_a_failed_destroy_reports_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYNDEO_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tfexec, "DESTROY_RETRY_S", 0.0)
    module = tmp_path / "module"
    module.mkdir()
    (module / "main.tf").write_text(MODULE)
    spec = one_node_spec("tf-both", f"file://{tmp_path / 'rdv'}")
    with pytest.raises(TargetError) as err:
        ModuleTarget(module, {"marker": str(tmp_path / "m")}).launch(spec)
    msg = str(err.value)
    assert "\n" not in msg
    apply_failed, _, teardown = msg.partition("; and the teardown failed: ")
    assert "terraform apply failed" in apply_failed and "no capacity in this zone" in apply_failed
    assert "terraform destroy failed" in teardown and "the delete was refused" in teardown, msg
    assert "may still exist: terraform_data.made;" in teardown, msg
    assert teardown.endswith("remove with: syndeo down --cluster-id tf-both"), msg
    # What that command needs is still there, and it knows the run is over (it goes
    # straight to the teardown instead of asking a head to stop).
    state = json.loads((tmp_path / "home" / "clusters" / "tf-both" / "launched.json").read_text())
    assert state["destroy_failed"] is True
    log = (tmp_path / "home" / "clusters" / "tf-both" / "terraform" / "terraform.log").read_text()
    assert log.count("terraform destroy") == tfexec.DESTROY_ATTEMPTS


def _refused() -> None:
    """A teardown that fails."""
    raise TargetError("terraform destroy failed: refused; may still exist: x; remove with: …")


@pytest.mark.parametrize(
    "cause",
    [TargetError("cluster c did not come up: its head exited", exit_code=3), KeyboardInterrupt()],
)
def test_a_failed_teardown_is_reported_with_what_ended_it(cause: BaseException) -> None:
    """Every early end (a failed apply, `up` not coming up, no signed head, the watcher,
    Ctrl-C, deploy's run) tears down through one helper: a failure of ours keeps its
    message and exit code with the teardown's added; after an interrupt the teardown's
    failure is the news."""
    with pytest.raises(TargetError) as err:
        tear_down_after(cause, _refused)
    if isinstance(cause, TargetError):
        assert str(err.value) == (
            "cluster c did not come up: its head exited; and the teardown failed: "
            "terraform destroy failed: refused; may still exist: x; remove with: …"
        )
        assert err.value.exit_code == 3 and err.value.__cause__ is cause
    else:
        assert str(err.value).startswith("terraform destroy failed: refused")
