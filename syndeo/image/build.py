"""Build, cache and check the Syndeo Apptainer image (a SIF plus a JSON manifest).

``build()`` stages a self-contained build context (wheelhouse, lock, install script,
definition, optional extra CA) in a directory the unprivileged build user owns, then
runs the Packer local build (``packer/local``), which runs ``python -m syndeo.image sif``:
``apptainer build --fakeroot`` and the manifest.  Without Packer the same step runs
directly.  Apptainer cannot run as root on our machines (CAP_SYS_RESOURCE is missing),
so as root the build runs as ``SYNDEO_BUILD_USER`` (default ``syndeo-ci``).

The manifest sits next to the SIF (``<sif>.manifest.json``) and records the SIF's
sha256 and the digest of every build input: a rebuild with unchanged inputs is a no-op.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import syndeo
from syndeo.core.errors import ImageError
from syndeo.core.resources import user_dir
from syndeo.image.inputs import (
    REPO,
    Base,
    cache_dir,
    check_base,
    definition_path,
    hashed_pins,
    inputs_digest,
    packer_dir,
    pip_argv,
    source_tree,
    wheel_of_this_syndeo,
    wheelhouse_argv,
)
from syndeo.image.manifest import ImageManifest, load_manifest, manifest_path, sha256_file
from syndeo.image.steps import Step, as_user, build_user, console, failure_cause, steps

# gzip: readable by every squashfuse/kernel.  lz4: builds much faster and starts faster
# (measured: re-squash 29 s, `import ray` ~0.7 s less per start) but the SIF is ~36 %
# larger and some older sites cannot mount it.
Compression = Literal["gzip", "lz4"]


def _copy_sources(repo: Path, dest: Path) -> Path:
    """A clean copy to build the wheel from: building in the checkout would reuse its
    ``build/`` dir, where modules deleted since still linger and get packaged."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (repo / name).exists():
            shutil.copy2(repo / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".terraform", "*.tfstate*")
    # The package's links to terraform/ and packer/ stay links (the build maps the root's
    # directories into the wheel in their place), so those are copied too.
    shutil.copytree(repo / "syndeo", dest / "syndeo", ignore=ignore, symlinks=True)
    for name in ("terraform", "packer"):
        shutil.copytree(repo / name, dest / name, ignore=ignore)
    return dest


def _stage(
    stage: Path,
    definition: Path,
    lock: Path,
    wheels: Path,
    syndeo_wheel_dir: Path,
    extra_ca: Path | None,
) -> Path:
    """Copy everything apptainer reads into ``stage`` (the build user may not be able to
    traverse the checkout or root's cache)."""
    ctx = stage / "context"
    shutil.copytree(wheels, ctx / "wheelhouse")
    for whl in syndeo_wheel_dir.glob("syndeo-*.whl"):
        shutil.copy2(whl, ctx / "wheelhouse")
    shutil.copy2(lock, ctx / "requirements.lock")
    shutil.copy2(lock.parent / "install-env.sh", ctx / "install-env.sh")
    (ctx / "syndeo-version").write_text(syndeo.__version__)
    (ctx / "extra-ca.crt").write_bytes(extra_ca.read_bytes() if extra_ca else b"")
    shutil.copy2(definition, stage / definition.name)
    return ctx


@dataclass(frozen=True)
class _Request:
    """What one ``build()`` call builds, checked, with the digest of its inputs."""

    base: Base
    definition: Path
    repo: Path
    extra_ca: Path | None
    build_args: dict[str, str]
    compression: Compression
    inputs_sha256: str
    use_packer: bool
    syndeo_wheel: Path | None = None  # None: built from the source tree ``repo``


def build(
    base: Base = "debootstrap",
    output: Path | None = None,
    *,
    force: bool = False,
    extra_ca: Path | None = None,
    build_args: dict[str, str] | None = None,
    compression: Compression = "gzip",
    use_packer: bool = True,
    repo: Path = REPO,
    definition: Path | None = None,
    syndeo_wheel: Path | None = None,
) -> ImageManifest:
    """Build (or reuse) the image; returns its manifest.  ``definition`` overrides the
    one for ``base`` (tests use it; the install script and lock stay the package's).
    ``syndeo_wheel``: the syndeo the image gets, where there is no source tree to build
    it from (an installed syndeo); the SIF then goes to ``~/.syndeo/image`` by default."""
    if syndeo_wheel is not None:
        syndeo_wheel = wheel_of_this_syndeo(syndeo_wheel)
        default_dir = user_dir() / "image"
    else:
        repo = source_tree(repo)
        default_dir = repo / ".syndeo" / "image"
    definition = _definition(base, definition)
    output = (output or default_dir / f"syndeo-{base}.sif").resolve()
    if extra_ca is not None and not extra_ca.is_file():
        raise ImageError(f"extra CA bundle not found: {extra_ca}")
    args = dict(build_args or {})
    check_base(base, args)  # before anything is downloaded or built
    wanted = inputs_digest(
        definition, repo, extra_ca, digested_args(args, compression), syndeo_wheel
    )
    current = None if force else _up_to_date(output, wanted)
    if current is not None:
        return current
    if syndeo_wheel is None:
        _check_wheel_backend(repo)  # before anything is downloaded or built
    req = _Request(
        base, definition, repo, extra_ca, args, compression, wanted, use_packer, syndeo_wheel
    )
    _build_to(req, output)
    return _manifest_of_built(output)


def digested_args(build_args: dict[str, str], compression: Compression) -> dict[str, str]:
    """The build args as the image's inputs digest counts them: with the compression,
    which changes the SIF; gzip adds nothing, so default builds keep their digests."""
    if compression == "gzip":
        return build_args
    return {**build_args, " compression": compression}


def _definition(base: Base, definition: Path | None) -> Path:
    """The package's definition for ``base``, or the given one if it exists."""
    if definition is None:
        return definition_path(base)
    if not definition.is_file():
        raise ImageError(f"image definition not found: {definition}")
    return definition


def _up_to_date(output: Path, wanted: str) -> ImageManifest | None:
    """The manifest of ``output`` if it was built from these inputs and is unchanged."""
    if not output.exists():
        return None
    current = load_manifest(output)
    if current is None or current.inputs_sha256 != wanted:
        return None
    if sha256_file(output) != current.sha256:
        console.log(f"{output} differs from its manifest: rebuilding")
        return None
    console.log(f"image up to date: {output} (sha256 {current.sha256[:12]})")
    return current


def _build_to(req: _Request, output: Path) -> None:
    """Build the SIF and its manifest in a fresh stage, then move both to ``output``."""
    user = build_user()
    lock = packer_dir() / "apptainer" / "requirements.lock"
    lock_hash = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    wheels = cache_dir() / "wheelhouse" / lock_hash
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = output.with_name(output.name + ".build.log")
    packer = shutil.which("packer") if req.use_packer else None
    stage = Path(tempfile.mkdtemp(prefix="syndeo-image-", dir="/var/tmp"))
    try:
        staged_sif = stage / output.name
        with steps(log_path) as step:
            ctx = _build_context(step, req, lock, wheels, stage)
            # Apptainer's temp rootfs (~1 GB) lives in the stage, so any exit removes it.
            (stage / "tmp").mkdir()
            if user is not None:
                subprocess.run(["chown", "-R", f"{user}:", str(stage)], check=True)
            _build_sif_step(step, req, packer, _sif_argv(req, stage, ctx, staged_sif))
        _install(staged_sif, output, user)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _check_wheel_backend(repo: Path) -> None:
    """The syndeo wheel is built with this venv's build backend (no build isolation: the
    build may have no package index), so it must be what pyproject.toml's [build-system]
    asks for; else one line saying what to upgrade, not the backend's own traceback."""
    requires = tomllib.loads((repo / "pyproject.toml").read_text())["build-system"]["requires"]
    for need in requires:
        name, _, minimum = need.replace(" ", "").partition(">=")
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "none"
        if have == "none" or _release(have) < _release(minimum):
            raise ImageError(
                f"building the syndeo wheel needs {need} in this Python ({sys.executable}), "
                f"which has {name} {have}: run `{sys.executable} -m pip install "
                f"'{need}'` (scripts/setup does)"
            )


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version (``1.27.0`` -> (1, 27, 0)); enough to compare a
    backend's version with a ``>=`` floor."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:3])


def _build_context(step: Step, req: _Request, lock: Path, wheels: Path, stage: Path) -> Path:
    """The wheelhouse (cached per lock) and the syndeo wheel, staged for apptainer."""
    if not (wheels / ".complete").exists():
        step.run("wheelhouse (pip download)", wheelhouse_argv(lock, wheels))
        (wheels / ".complete").touch()
    wheel_dir = stage / "syndeo-wheel"
    if req.syndeo_wheel is not None:
        wheel_dir.mkdir()
        shutil.copy2(req.syndeo_wheel, wheel_dir)
    else:
        src = _copy_sources(req.repo, stage / "src")
        wheel_argv = pip_argv(
            "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(src)
        )
        step.run("syndeo wheel", wheel_argv)
        shutil.rmtree(src)
    ctx = _stage(stage, req.definition, lock, wheels, wheel_dir, req.extra_ca)
    shutil.rmtree(wheel_dir)
    return ctx


def _sif_argv(req: _Request, stage: Path, ctx: Path, staged_sif: Path) -> list[str]:
    """The ``python -m syndeo.image sif`` command that builds the staged SIF."""
    argv = [sys.executable, "-m", "syndeo.image", "sif"]
    argv += ["--definition", str(stage / req.definition.name), "--context", str(ctx)]
    argv += ["--output", str(staged_sif), "--inputs-sha256", req.inputs_sha256]
    argv += ["--base", req.base, "--tmpdir", str(stage / "tmp"), "--compression", req.compression]
    for key, value in sorted(req.build_args.items()):
        argv += ["--build-arg", f"{key}={value}"]
    return argv


def _build_sif_step(step: Step, req: _Request, packer: str | None, sif_argv: list[str]) -> None:
    """Run the sif step through the Packer local build, or directly without Packer."""
    if packer:
        env = {**os.environ, "CHECKPOINT_DISABLE": "1"}
        step.run("packer build (apptainer)", _packer_argv(packer, sif_argv), env=env)
    else:
        why = "disabled" if not req.use_packer else "not found"
        console.log(f"packer {why}: building with apptainer directly")
        step.run("apptainer build", sif_argv)


def _install(staged_sif: Path, output: Path, user: str | None) -> None:
    """Move the staged SIF and its manifest next to ``output``, world-readable."""
    for made in (staged_sif, manifest_path(staged_sif)):
        shutil.move(made, output.parent / made.name)
    os.chmod(output, 0o644)
    if user is not None:  # the build user must not be able to swap the image later
        os.chown(output, os.getuid(), os.getgid())


def _manifest_of_built(output: Path) -> ImageManifest:
    """The new image's manifest, rewritten to name where the SIF now is."""
    manifest = load_manifest(output)
    if manifest is None:
        raise ImageError(f"build produced no manifest next to {output}")
    manifest = manifest.model_copy(update={"sif": str(output)})
    manifest_path(output).write_text(manifest.model_dump_json(indent=2) + "\n")
    size_mib = manifest.size_bytes / 2**20
    console.log(
        f"built {output}: {size_mib:.0f} MiB in {manifest.build_seconds:.0f} s, "
        f"sha256 {manifest.sha256[:12]}"
    )
    return manifest


def _packer_argv(packer: str, sif_argv: list[str]) -> list[str]:
    return [
        packer,
        "build",
        "-color=false",
        "-var",
        f"sif_command={json.dumps(sif_argv)}",
        str(packer_dir() / "local"),
    ]


# --- the step Packer runs: apptainer build + manifest ---------------------------------


def build_sif(
    definition: Path,
    context: Path,
    output: Path,
    inputs_sha256: str,
    base: str,
    build_args: dict[str, str],
    tmpdir: Path | None = None,
    compression: str = "gzip",
) -> ImageManifest:
    user = build_user()
    # Unused build args only warn: callers pass one set (CONTEXT, MIRROR, BASE) to either base.
    argv = ["apptainer", "build", "--fakeroot", "--force", "--warn-unused-build-args"]
    if tmpdir is not None:
        argv += ["--tmpdir", str(tmpdir)]
    if compression != "gzip":
        argv += ["--mksquashfs-args", f"-comp {compression}"]
    for key, value in {"CONTEXT": str(context), **build_args}.items():
        argv += ["--build-arg", f"{key}={value}"]
    started = time.monotonic()
    # Output streams straight through (Packer or our progress line shows it); the tail
    # is kept to name the cause.
    tail: list[str] = []
    with subprocess.Popen(
        as_user(user, [*argv, str(output), str(definition)]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            tail = [*tail[-40:], line.strip()]
    if proc.returncode != 0 or not output.exists():
        raise ImageError(f"apptainer build of {definition.name} failed: {failure_cause(tail)}")
    seconds = time.monotonic() - started
    manifest = ImageManifest(
        sif=str(output),
        sha256=sha256_file(output),
        size_bytes=output.stat().st_size,
        inputs_sha256=inputs_sha256,
        base=base,
        builder=_builder(),
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        build_seconds=round(seconds, 1),
        versions=_versions(user, output),
        compression=compression,
    )
    manifest_path(output).write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


_VERSIONS_PY = (
    "import json, platform, importlib.metadata as m;"
    "print(json.dumps({'python': platform.python_version(), **{p: m.version(p) for p in "
    "('syndeo', 'ray', 'gymnasium', 'mujoco', 'numpy', 'boto3', 'google-cloud-storage',"
    " 'azure-storage-blob')}}))"
)


def _versions(user: str | None, sif: Path) -> dict[str, str]:
    """Asks the image itself (this is also the smoke test that it starts)."""
    argv = ["apptainer", "exec", "--containall", "--cleanenv", str(sif), "python", "-c"]
    proc = subprocess.run(
        as_user(user, [*argv, _VERSIONS_PY]), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ImageError(f"built image does not start: {failure_cause(proc.stderr.splitlines())}")
    versions: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    apptainer = subprocess.run(["apptainer", "--version"], capture_output=True, text=True)
    versions["apptainer"] = apptainer.stdout.split()[-1]
    return versions


def _builder() -> str:
    # PACKER_BUILD_NAME is set for shell-local provisioners.
    return "packer" if os.environ.get("PACKER_BUILD_NAME") else "apptainer"


LOCK_HEADER = (
    "# Generated from requirements.in by `python -m syndeo.image lock`; do not edit.\n"
    "# Each pin carries the sha256 of its wheel for the image's platform (CPython 3.11,\n"
    "# manylinux, glibc 2.36): the wheelhouse download and the install in the image\n"
    "# both run with --require-hashes.\n"
)


def write_lock(requirements_in: Path, lock: Path) -> int:
    """Resolve ``requirements.in`` to a full pinned lock (``pip install --report``), then
    download each pin's wheel for the image's platform and record its sha256."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip = pip_argv("install", "--dry-run", "--ignore-installed", "--quiet", "--report")
        subprocess.run([*pip, str(report), "-r", str(requirements_in)], check=True)
        installs = json.loads(report.read_text())["install"]
        pins = sorted(
            f"{i['metadata']['name'].lower()}=={i['metadata']['version']}" for i in installs
        )
        plain = Path(tmp) / "pins.txt"
        plain.write_text("\n".join(pins) + "\n")
        wheels = Path(tmp) / "wheels"
        subprocess.run(wheelhouse_argv(plain, wheels, require_hashes=False), check=True)
        lines = hashed_pins(pins, wheels)
    lock.write_text(LOCK_HEADER + "\n".join(lines) + "\n")
    return len(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m syndeo.image")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sif = sub.add_parser("sif", help="apptainer build + manifest (run by the Packer build)")
    sif.add_argument("--definition", type=Path, required=True)
    sif.add_argument("--context", type=Path, required=True)
    sif.add_argument("--output", type=Path, required=True)
    sif.add_argument("--inputs-sha256", required=True)
    sif.add_argument("--base", required=True)
    sif.add_argument("--build-arg", action="append", default=[])
    sif.add_argument("--tmpdir", type=Path)
    sif.add_argument("--compression", choices=["gzip", "lz4"], default="gzip")
    sub.add_parser("lock", help="re-resolve packer/apptainer/requirements.lock")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "lock":
            # The checkout's lock, not the package's: a developer re-locks the source.
            here = source_tree() / "packer" / "apptainer"
            count = write_lock(here / "requirements.in", here / "requirements.lock")
            print(f"locked {count} packages")
            return 0
        pairs = dict(item.split("=", 1) for item in args.build_arg)
        build_sif(
            args.definition,
            args.context,
            args.output,
            args.inputs_sha256,
            args.base,
            pairs,
            args.tmpdir,
            args.compression,
        )
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return 0
