"""Reading Terraform files for the offline checks (python-hcl2 8.x keeps the quotes of
string literals and labels; these helpers strip them)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import hcl2

from syndeo.core import clouds
from syndeo.image.inputs import REPO

TERRAFORM = REPO / "terraform"
CLOUDS = clouds.CLOUDS
TF_ENV = {
    **os.environ,
    "CHECKPOINT_DISABLE": "1",
    "TF_IN_AUTOMATION": "1",
    "TF_CLI_CONFIG_FILE": "/dev/null",  # the machine's env points at a missing file
    "TF_INPUT": "0",
}


def unquote(value: Any) -> Any:
    """``'"x"'`` -> ``'x'``; lists and maps element-wise; expressions stay ``${...}``."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [unquote(v) for v in value]
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items() if not k.startswith("__")}
    return value


def load(path: Path) -> dict[str, Any]:
    """Parsed file (cached: python-hcl2 takes ~0.2 s a file; callers must not mutate)."""
    stat = path.stat()
    return _load(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=512)
def _load(path: str, _mtime: int, _size: int) -> dict[str, Any]:
    with open(path) as f:
        return dict(hcl2.load(f))


def tf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.tf") if ".terraform" not in p.parts)


def resources(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(type, name, body) of every resource block in one file."""
    for block in load(path).get("resource", []):
        for rtype, named in block.items():
            for name, body in named.items():
                yield unquote(rtype), unquote(name), body


def variables(module: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in tf_files(module):
        if f.parent != module:
            continue
        for block in load(f).get("variable", []):
            for name, body in block.items():
                out[unquote(name)] = body
    return out


def outputs(module: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in tf_files(module):
        if f.parent != module:
            continue
        for block in load(f).get("output", []):
            for name, body in block.items():
                out[unquote(name)] = body
    return out


def terraform() -> str:
    exe = shutil.which("terraform")
    assert exe, "terraform is not on PATH (it is part of this machine image; see README)"
    return exe


def run_tf(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [terraform(), *args],
        cwd=cwd,
        env=env or TF_ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


NODE_MODULE = TERRAFORM / "modules" / "node"
NODE_OUTPUTS = ("env", "env_files", "user_data", "scratch_dirs", "machines")
# The node module's variables besides its one object of node settings.
NODE_MODULE_OWN = ("launch_key", "target_env")


def node_module_call(source: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A ``module`` block calling the node module with flat ``inputs``: the node
    settings go into its ``node`` object, launch_key and target_env stay variables."""
    node = {k: v for k, v in inputs.items() if k not in NODE_MODULE_OWN}
    return {
        "source": source,
        "node": node,
        **{k: v for k, v in inputs.items() if k in NODE_MODULE_OWN},
    }


def render_node_module(
    root: Path, inputs: dict[str, Any], names: tuple[str, ...] = NODE_OUTPUTS
) -> dict[str, Any]:
    """Apply a root that calls terraform/modules/node with ``inputs`` (flat: see
    :func:`node_module_call`); its outputs ``names``."""
    shutil.copytree(NODE_MODULE, root / "node", dirs_exist_ok=True)
    (root / "main.tf.json").write_text(
        json.dumps(
            {
                "module": {"n": node_module_call("./node", inputs)},
                # Sensitive: the node module's renderings hold the launch key (a root
                # must say so); `terraform output -json` still gives the values.
                "output": {k: {"value": f"${{module.n.{k}}}", "sensitive": True} for k in names},
            }
        )
    )
    env = {**TF_ENV, "TF_DATA_DIR": str(root / ".terraform")}
    for args in (("init", "-backend=false"), ("apply", "-auto-approve", "-no-color")):
        out = run_tf(*args, cwd=root, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
    out = run_tf("output", "-json", cwd=root, env=env)
    assert out.returncode == 0, out.stderr
    return {k: v["value"] for k, v in json.loads(out.stdout).items()}


def node_module_inputs(module: str, tfvars: dict[str, Any]) -> dict[str, Any]:
    """What terraform/<module> passes to the node module for ``tfvars``, flat: the node
    settings as written (``tfvars["node"]``), the launch key, and what the module adds
    itself that needs no provider: its target and, on a cloud, its image_path (the
    default, unless the tfvars set it) and spot_notices.  target_env (a cloud's region,
    account) is left to the caller."""
    inputs: dict[str, Any] = {**tfvars["node"], "target": module}
    inputs["launch_key"] = tfvars.get("launch_key")
    if module in CLOUDS:
        default = unquote(variables(TERRAFORM / module)["image_path"].get("default"))
        inputs["image_path"] = tfvars.get("image_path", default)
        inputs["spot_notices"] = module if tfvars.get("spot") else None
    return inputs


def tf_generate() -> ModuleType:
    """scripts/tf_generate.py as a module (what it would write, without writing it)."""
    spec = importlib.util.spec_from_file_location(
        "tf_generate", REPO / "scripts" / "tf_generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tf_generate", module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module
