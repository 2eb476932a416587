"""The Terraform adapter (syndeo/launcher/targets/tfexec.py) against the real terraform binary,
on small provider-free modules: init / apply / output / destroy with state kept in
the cluster's own directory, Terraform's own error text as one line, an interrupt
forwarded so Terraform stops gracefully and keeps its state, and destroy of what
the state holds.
"""

from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path

import pytest

from syndeo.launcher.targets import tfexec
from syndeo.launcher.targets.tfexec import Terraform, TerraformError, Workspace

MODULE = """
variable "n" {
  type = number
  validation {
    condition     = var.n >= 1
    error_message = "n: at least 1."
  }
}
variable "marker" {
  type = string
}
variable "sleep" {
  type    = number
  default = 0
}
resource "terraform_data" "thing" {
  count = var.n
  input = "${var.marker}-${count.index}"
  provisioner "local-exec" {
    command = "sleep ${var.sleep}; echo created > ${var.marker}-${count.index}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "rm -f ${self.input}"
  }
}
output "things" {
  value = [for t in terraform_data.thing : t.output]
}
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    d = tmp_path / "module"
    d.mkdir()
    (d / "main.tf").write_text(MODULE)
    return d


def _tf(module: Path, cluster: Path, **tfvars: object) -> Terraform:
    tf = Terraform(Workspace(module, cluster / "terraform"))
    tf.write_vars(tfvars)
    return tf


def test_lifecycle_state_in_the_cluster_dir(module: Path, tmp_path: Path) -> None:
    marker = tmp_path / "m"
    tf = _tf(module, tmp_path / "c1", n=2, marker=str(marker))
    tf.init()
    tf.apply()
    assert tf.output() == {"things": [f"{marker}-0", f"{marker}-1"]}
    assert (tmp_path / "m-0").is_file() and (tmp_path / "m-1").is_file()
    # State and provider data live with the cluster, never in the module directory.
    assert tf.ws.state.is_file()
    assert sorted(p.name for p in module.iterdir()) == ["main.tf"]
    assert tf.ws.tfvars.stat().st_mode & 0o777 == 0o600
    assert tf.resources() == ["terraform_data.thing[0]", "terraform_data.thing[1]"]
    # A second cluster from the same module has its own state.
    other = _tf(module, tmp_path / "c2", n=1, marker=str(tmp_path / "o"))
    other.init()
    other.apply()
    tf.destroy()
    assert not (tmp_path / "m-0").exists() and (tmp_path / "o-0").exists()
    assert tf.resources() == []
    other.destroy()
    assert "Destroy complete" in tf.ws.log.read_text()


def test_destroy_without_state_is_a_no_op(module: Path, tmp_path: Path) -> None:
    tf = _tf(module, tmp_path / "c", n=1, marker=str(tmp_path / "m"))
    tf.destroy()  # nothing was ever applied: nothing to do, no terraform run
    assert not tf.ws.log.exists()


def test_errors_are_one_line_with_terraforms_own_text(module: Path, tmp_path: Path) -> None:
    tf = _tf(module, tmp_path / "c", n=0, marker=str(tmp_path / "m"))
    tf.init()
    with pytest.raises(TerraformError) as err:
        tf.apply()
    msg = str(err.value)
    assert "\n" not in msg
    assert "terraform apply failed" in msg and "n: at least 1." in msg, msg
    assert str(tf.ws.log) in msg
    assert tf.resources() == []


def test_interrupt_stops_gracefully_and_keeps_state(module: Path, tmp_path: Path) -> None:
    """A Ctrl-C reaches Terraform once (forwarded): it finishes what is in flight,
    writes its state, and destroy then removes exactly that."""
    marker = tmp_path / "m"
    tf = _tf(module, tmp_path / "c", n=3, marker=str(marker), sleep=3)
    tf.init()
    errors: list[BaseException] = []

    def apply() -> None:
        try:
            tf.apply()
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=apply)
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "Creating..." not in _log(tf):
        time.sleep(0.05)
    assert "Creating..." in _log(tf)
    tf.interrupt()
    worker.join(timeout=120)
    assert errors and isinstance(errors[0], TerraformError), errors
    assert "interrupt" in _log(tf).lower()
    tf.destroy()
    assert tf.resources() == []
    assert not list(tmp_path.glob("m-*"))


# A resource whose delete fails the first ``fails`` times (as a cloud's delete that
# loses a race with another, or one refused for good).
FLAKY = """
variable "count_file" {
  type = string
}
variable "fails" {
  type = number
}
resource "terraform_data" "flaky" {
  input = { file = var.count_file, fails = var.fails }
  provisioner "local-exec" {
    when    = destroy
    command = <<-EOT
      echo x >> ${self.input.file}
      if [ "$(wc -l < ${self.input.file})" -le ${self.input.fails} ]; then
        echo "Error: the delete lost a race" >&2
        exit 1
      fi
    EOT
  }
}
"""


@pytest.mark.parametrize("fails", [1, 5])
def test_a_failed_destroy_is_run_again_before_it_is_reported(
    fails: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A destroy that fails is run again (after a pause, here none) up to
    DESTROY_ATTEMPTS times; only then is it an error, and the state still names what
    is left."""
    monkeypatch.setattr(tfexec, "DESTROY_RETRY_S", 0.0)
    d = tmp_path / "module"
    d.mkdir()
    (d / "main.tf").write_text(FLAKY)
    seen: list[str] = []
    tf = Terraform(Workspace(d, tmp_path / "c" / "terraform"), echo=seen.append)
    count = tmp_path / "deletes"
    tf.write_vars({"count_file": str(count), "fails": fails})
    tf.init()
    tf.apply()
    if fails < tfexec.DESTROY_ATTEMPTS:
        tf.destroy()
        assert tf.resources() == []
        runs = fails + 1
    else:
        with pytest.raises(TerraformError) as err:
            tf.destroy()
        assert "the delete lost a race" in str(err.value), err.value
        assert tf.resources() == ["terraform_data.flaky"]
        runs = tfexec.DESTROY_ATTEMPTS
    assert _log(tf).count("terraform destroy") == runs
    assert len(count.read_text().splitlines()) == runs
    again = [line for line in seen if "destroy again" in line]
    assert len(again) == runs - 1, seen


def _log(tf: Terraform) -> str:
    return tf.ws.log.read_text(errors="replace") if tf.ws.log.exists() else ""


def test_clusters_share_one_provider_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each cluster has its own .terraform, but the provider (hashicorp/aws: ~675 MB)
    is installed once, in ~/.syndeo/terraform-plugins, and linked from each; a cache the
    user configured in the CLI config is left to Terraform."""
    mirror = Path("/opt/tf-plugins")
    assert (mirror / "registry.terraform.io" / "hashicorp" / "aws").is_dir(), (
        "the hashicorp/aws mirror is part of this machine image"
    )
    import shutil

    from syndeo.launcher.targets.terraform import terraform_root

    root = tmp_path / "deploy"  # the AWS root (the provider and its lock file only)
    root.mkdir()
    src = terraform_root() / "aws" / "deploy"
    shutil.copy(src / "versions.tf", root / "versions.tf")
    shutil.copy(src / ".terraform.lock.hcl", root / ".terraform.lock.hcl")
    (root / "variables.tf").write_text(
        'variable "region" { default = "us-east-1" }\nvariable "api_max_retries" { default = 1 }\n'
    )
    # A packed mirror (the provider as the registry ships it, a zip): Terraform unpacks
    # it into the cache as it would a download.  (An unpacked mirror would be linked
    # from where it is, and would show nothing about the cache.)
    unpacked = mirror / "registry.terraform.io" / "hashicorp" / "aws" / "5.100.0" / "linux_amd64"
    packed = tmp_path / "mirror" / "registry.terraform.io" / "hashicorp" / "aws"
    packed.mkdir(parents=True)
    zip_path = packed / "terraform-provider-aws_5.100.0_linux_amd64.zip"
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_STORED) as zf:
        for f in unpacked.iterdir():
            zf.write(f, f.name)
    rc = tmp_path / "terraformrc"
    rc.write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{tmp_path / "mirror"}"\n'
        "  }\n}\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(rc))
    monkeypatch.delenv("TF_PLUGIN_CACHE_DIR", raising=False)
    cache = home / ".syndeo" / "terraform-plugins"
    binaries = []
    for name in ("c1", "c2"):
        tf = Terraform(Workspace(root, tmp_path / name / "terraform"))
        tf.init()
        found = list(tf.ws.data_dir.glob("providers/registry.terraform.io/hashicorp/aws/*/*"))
        assert len(found) == 1, found
        binaries.append(found[0])
    for linked in binaries:
        assert linked.is_symlink() and linked.resolve().is_relative_to(cache.resolve()), linked
    assert cache.stat().st_mode & 0o777 == 0o700
    # A plugin_cache_dir of the user's own: Terraform's business, ours is not set.
    rc.write_text(rc.read_text() + f'plugin_cache_dir = "{tmp_path / "theirs"}"\n')
    tf = Terraform(Workspace(root, tmp_path / "c3" / "terraform"))
    assert "TF_PLUGIN_CACHE_DIR" not in tf.env
