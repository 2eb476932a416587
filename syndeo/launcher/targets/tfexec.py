"""One adapter over the ``terraform`` binary: init, apply, output, destroy.

Command lines come from python-terraform (the design card's package), but we run
the process ourselves because its runner cannot do what a launcher needs on
Terraform 1.x: pass an environment of our own (``TF_DATA_DIR`` per cluster), stream
progress to a log while keeping the error text, forward Ctrl-C/SIGTERM to Terraform
so that it stops gracefully and saves its state, and not leak ``-synchronous`` as a
flag.  Its call forms that do not work on 1.x (positional dirs, ``-force``,
``-auto-approve=false``) are avoided; facts: shared notes ``iac-offline.md``.

State lives in the cluster's own directory (``-state``, ``TF_DATA_DIR``), so two
clusters from one module never share state and ``invoke down`` finds it later.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syndeo.core.errors import TargetError

# Terraform exits on its own after a graceful stop; this bounds the wait for it.
INTERRUPT_GRACE_S = 120.0
# A destroy that fails is run again before anything is reported left over: a cloud's
# deletes race each other (a rule another delete just took with it, an interface that
# still holds a security group) and a new run, after its refresh, usually finishes.
DESTROY_ATTEMPTS = 3
DESTROY_RETRY_S = 5.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PLUGIN_CACHE = re.compile(r"^\s*plugin_cache_dir\s*=", re.M)
# State is local to the cluster dir (-state), never in a backend of the module's.
INIT_OPTIONS: dict[str, Any] = {"backend": False}


class TerraformError(TargetError):
    """A terraform command failed; the message carries Terraform's own error text."""


def _one_line_error(text: str) -> str:
    """Terraform's 'Error: …' summary and detail, folded onto one line."""
    lines = [_ANSI.sub("", ln).strip(" │╷╵\t") for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("Error: "):
            detail = []
            for more in lines[i + 1 : i + 25]:
                if more.startswith(("Error: ", "Warning: ")):
                    break
                more = more.lstrip("├─│ ")  # the box Terraform draws around a value
                if more and not more.startswith(("on ", "with ")) and not re.match(r"^\d+:", more):
                    detail.append(more)
            return " ".join([line.removeprefix("Error: ").rstrip("."), *detail])[:800]
    tail = [ln for ln in lines if ln]
    return " | ".join(tail[-3:])[:800] or "no output"


@dataclass(frozen=True)
class Workspace:
    """Where one cluster's Terraform run keeps its files (all in the cluster dir)."""

    module_dir: Path
    cluster_dir: Path

    @property
    def state(self) -> Path:
        return self.cluster_dir / "terraform.tfstate"

    @property
    def tfvars(self) -> Path:
        return self.cluster_dir / "terraform.tfvars.json"

    @property
    def data_dir(self) -> Path:
        return self.cluster_dir / ".terraform"

    @property
    def log(self) -> Path:
        return self.cluster_dir / "terraform.log"

    @property
    def source_dir(self) -> Path:
        """Where the launch copies the module Terraform runs (``working_copy``)."""
        return self.cluster_dir / "source"

    def forget(self) -> None:
        """Remove everything but the log (after a clean destroy)."""
        import shutil

        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.module_dir.is_relative_to(self.source_dir):
            shutil.rmtree(self.source_dir, ignore_errors=True)
        for path in (self.tfvars, self.state, *self.cluster_dir.glob("terraform.tfstate*")):
            path.unlink(missing_ok=True)


class Terraform:
    """The four commands a Terraform-backed target needs, on one :class:`Workspace`."""

    def __init__(
        self,
        ws: Workspace,
        env: Mapping[str, str] | None = None,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        try:
            from python_terraform import Terraform as _Cmd  # only when a VM target is used
        except ImportError:
            raise TerraformError(
                "the ssh/aws/gcp/azure targets need python-terraform: pip install 'syndeo[iac]'"
            ) from None

        self.ws = ws
        binary = shutil.which("terraform")
        if binary is None:
            raise TerraformError(
                "terraform is not on PATH: install Terraform >= 1.9 (https://developer.hashicorp.com/terraform/install)"
            )
        self._cmd = _Cmd(working_dir=str(ws.module_dir), terraform_bin_path=binary)
        self.env = {
            **os.environ,
            **(env or {}),
            "TF_DATA_DIR": str(ws.data_dir),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",  # no calls home
        }
        # A CLI config file that does not exist makes every command warn.
        cli_cfg = self.env.get("TF_CLI_CONFIG_FILE")
        cli_text = ""
        if cli_cfg:
            try:
                if not Path(cli_cfg).exists():
                    self.env["TF_CLI_CONFIG_FILE"] = os.devnull
                else:
                    cli_text = Path(cli_cfg).read_text(errors="replace")
            except OSError as exc:  # set machine-wide to a file only root can read
                raise TerraformError(
                    f"TF_CLI_CONFIG_FILE={cli_cfg} cannot be read ({exc.strerror}): unset it "
                    "or point it at a Terraform CLI config you can read"
                ) from None
        else:
            with contextlib.suppress(OSError):
                cli_text = (Path.home() / ".terraformrc").read_text(errors="replace")
        # One provider download for all clusters (the AWS provider is ~675 MB): each
        # cluster's .terraform links into the cache instead of holding a copy.  A cache
        # the user set up (TF_PLUGIN_CACHE_DIR, or plugin_cache_dir in the CLI config,
        # which the variable would override) is left as it is.
        self._own_cache: Path | None = None
        if not self.env.get("TF_PLUGIN_CACHE_DIR") and not _PLUGIN_CACHE.search(cli_text):
            self._own_cache = Path.home() / ".syndeo" / "terraform-plugins"
            self.env["TF_PLUGIN_CACHE_DIR"] = str(self._own_cache)
        self.echo = echo
        self.proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ command lines
    def argv(self, verb: str, **options: Any) -> list[str]:
        from python_terraform import IsFlagged

        opts: dict[str, Any] = {"no_color": IsFlagged}
        if verb != "output":  # `output` takes no -input (and fails on it)
            opts["input"] = False
        if verb in ("apply", "destroy", "output", "plan"):
            opts["state"] = str(self.ws.state)
        if verb in ("apply", "destroy", "plan"):
            opts["var_file"] = str(self.ws.tfvars)
            opts["lock"] = True
        if verb in ("apply", "destroy"):
            opts["auto_approve"] = IsFlagged
        if verb == "output":
            opts["json"] = IsFlagged
        opts.update(options)
        argv: list[str] = self._cmd.generate_cmd_string(verb, **opts)
        return argv

    def commands(self) -> list[str]:
        """The commands a launch runs, for ``--dry-run`` (environment shown first)."""
        prefix = f"TF_DATA_DIR={self.ws.data_dir} TF_IN_AUTOMATION=1"
        return [
            f"{prefix} {' '.join(self.argv('init', **INIT_OPTIONS))}",
            f"{prefix} {' '.join(self.argv('apply'))}",
            f"# teardown: {prefix} {' '.join(self.argv('destroy'))}",
        ]

    # ------------------------------------------------------------------ running
    def _run(self, argv: list[str], what: str) -> str:
        self.ws.cluster_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self._own_cache is not None:  # Terraform does not create it (nor a dry run)
            self._own_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.ws.log, "ab") as log:
            log.write(f"\n$ {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    argv,
                    cwd=self.ws.module_dir,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    # Own session: a terminal's Ctrl-C reaches only us; we forward it
                    # once, so Terraform stops gracefully instead of being hit twice.
                    start_new_session=True,
                )
            except OSError as exc:
                raise TerraformError(f"cannot run terraform: {exc}") from exc
            out: list[str] = []
            try:
                assert self.proc.stdout is not None
                for raw in iter(self.proc.stdout.readline, b""):
                    log.write(raw)
                    log.flush()  # the log is what a user tails while it runs
                    line = raw.decode(errors="replace").rstrip("\n")
                    out.append(line)
                    if self.echo is not None and _worth_echoing(line):
                        self.echo(f"terraform: {line.strip()}")
                rc = self.proc.wait()
            except BaseException:
                self.interrupt()
                raise
            finally:
                self.proc = None
        text = "\n".join(out)
        if rc != 0:
            raise TerraformError(
                f"terraform {what} failed in {self.ws.module_dir.name}: {_one_line_error(text)} "
                f"(full log: {self.ws.log})"
            )
        return text

    def interrupt(self) -> None:
        """Forward an interrupt to a running command and wait until it has saved state."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def write_vars(self, tfvars: Mapping[str, Any]) -> None:
        self.ws.cluster_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # 0600: variables may name hosts, keys and endpoints.
        fd = os.open(self.ws.tfvars, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a file that exists keeps its mode through O_CREAT
        with os.fdopen(fd, "w") as fh:
            json.dump(tfvars, fh, indent=2, sort_keys=True)

    def init(self) -> None:
        self._run(self.argv("init", **INIT_OPTIONS), "init")

    def apply(self, replace: list[str] | None = None) -> None:
        """``replace``: resource addresses to re-create even if Terraform sees no change
        (a machine whose node was lost; one already gone is simply created)."""
        self._run(self.argv("apply", **({"replace": replace} if replace else {})), "apply")

    def destroy(self) -> None:
        if not self.ws.state.exists():
            return  # nothing was ever created
        for attempt in range(1, DESTROY_ATTEMPTS + 1):
            try:
                self._run(self.argv("destroy"), "destroy")
                return
            except TerraformError as exc:
                if attempt == DESTROY_ATTEMPTS:
                    raise
                if self.echo is not None:
                    self.echo(f"terraform: {exc}; destroy again ({attempt + 1}/{DESTROY_ATTEMPTS})")
                time.sleep(DESTROY_RETRY_S)

    def output(self) -> dict[str, Any]:
        text = self._run(self.argv("output"), "output")
        try:
            raw = json.loads(text[text.index("{") :])
        except ValueError as exc:
            raise TerraformError(f"terraform output is not JSON: {text[:200]}") from exc
        return {name: item.get("value") for name, item in raw.items()}

    def ids(self, resource_type: str) -> list[str]:
        """Cloud ids of the state's resources of one type (what Terraform will destroy)."""
        try:
            state = json.loads(self.ws.state.read_text())
        except (OSError, ValueError):
            return []
        return [
            str(inst.get("attributes", {}).get("id"))
            for res in state.get("resources", [])
            if res.get("type") == resource_type
            for inst in res.get("instances", [])
        ]

    def resources(self) -> list[str]:
        """Addresses of what the state still holds (for 'what may still run')."""
        try:
            state = json.loads(self.ws.state.read_text())
        except (OSError, ValueError):
            return []
        out = []
        for res in state.get("resources", []):
            if res.get("mode") == "data":
                continue  # read from the cloud, never created: nothing to remove
            addr = ".".join(p for p in (res.get("module"), res.get("type"), res.get("name")) if p)
            for inst in res.get("instances", []):
                key = inst.get("index_key")
                out.append(addr + (f"[{json.dumps(key)}]" if key is not None else ""))
        return out


def _worth_echoing(line: str) -> bool:
    # Per-resource progress and errors; not the plan's long attribute listing.
    s = line.strip()
    return bool(
        re.search(r": (Creating|Creation complete|Destroying|Destruction complete|Still)", s)
        or s.startswith(("Error", "Apply complete", "Destroy complete"))
        or "(local-exec): syndeo:" in s
    )
