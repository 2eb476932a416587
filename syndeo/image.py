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
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

import syndeo
from syndeo.errors import ImageError

REPO = Path(__file__).resolve().parents[1]
Base = Literal["debootstrap", "docker"]
# gzip: readable by every squashfuse/kernel.  lz4: builds much faster and starts faster
# (measured: re-squash 29 s, `import ray` ~0.7 s less per start) but the SIF is ~36 %
# larger and some older sites cannot mount it.
Compression = Literal["gzip", "lz4"]
SIF_MAGIC = b"SIF_MAGIC"  # bytes 32..41 of every SIF (after the launch script line)
# The image's Python (bookworm / python:3.11-slim-bookworm); the wheelhouse must match.
IMAGE_PYTHON = "3.11"
IMAGE_GLIBC_MINOR = 36
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
console = Console(stderr=True)


class ImageManifest(BaseModel):
    sif: str
    sha256: str
    size_bytes: int
    inputs_sha256: str
    base: str
    builder: str
    built_at: str
    build_seconds: float
    versions: dict[str, str]
    compression: str = "gzip"


def manifest_path(sif: Path) -> Path:
    return sif.with_name(sif.name + ".manifest.json")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_sif(sif: Path) -> Path:
    """Cheap sanity check before launching: exists, readable, has the SIF header."""
    sif = sif.expanduser().resolve()
    if not sif.exists():
        raise ImageError(f"container image not found: {sif} (build it with `invoke build`)")
    if not sif.is_file():
        raise ImageError(f"container image is not a file: {sif}")
    try:
        with sif.open("rb") as fh:
            head = fh.read(64)
    except OSError as err:
        raise ImageError(f"cannot read container image {sif}: {err.strerror}") from err
    if SIF_MAGIC not in head:
        raise ImageError(f"not a SIF image (corrupt or wrong file): {sif}")
    return sif


def verify_sif(sif: Path) -> ImageManifest | None:
    """Full check: header, descriptors (``apptainer sif list``) and, if a manifest is
    present, the recorded sha256.  Returns the manifest when there is one."""
    sif = check_sif(sif)
    try:
        proc = subprocess.run(
            ["apptainer", "sif", "list", str(sif)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as err:
        raise ImageError("apptainer is not installed (scripts/setup.d/apptainer.sh)") from err
    if proc.returncode != 0 or "Squashfs" not in proc.stdout:
        why = (proc.stderr.strip().splitlines() or ["no root filesystem partition"])[-1]
        raise ImageError(f"corrupt SIF image {sif}: {why}")
    # Rows look like "3 |1 |NONE |36864-277618688 |FS (Squashfs/...)": a descriptor that
    # ends past the end of the file means a truncated copy (interrupted download/rsync).
    ends = [int(m.group(1)) for m in re.finditer(r"\|\s*\d+-(\d+)\s*\|", proc.stdout)]
    size = sif.stat().st_size
    if not ends or max(ends) > size:
        raise ImageError(
            f"corrupt SIF image {sif}: truncated "
            f"({size} bytes, its partitions need {max(ends, default=0)})"
        )
    manifest = load_manifest(sif)
    if manifest is not None and sha256_file(sif) != manifest.sha256:
        raise ImageError(f"corrupt SIF image {sif}: sha256 differs from {manifest_path(sif)}")
    return manifest


def load_manifest(sif: Path) -> ImageManifest | None:
    path = manifest_path(sif)
    if not path.exists():
        return None
    try:
        return ImageManifest.model_validate_json(path.read_text())
    except (ValidationError, OSError) as err:
        raise ImageError(f"unreadable image manifest {path}: {err}") from err


def image_digest(sif: Path) -> str:
    """``sha256:<hex>`` of a SIF, for results manifests (trusts an up-to-date manifest)."""
    sif = check_sif(sif)
    manifest = load_manifest(sif)
    if manifest is not None and manifest.size_bytes == sif.stat().st_size:
        return f"sha256:{manifest.sha256}"
    return f"sha256:{sha256_file(sif)}"


# --- build inputs -------------------------------------------------------------------


def definition_path(base: Base, repo: Path = REPO) -> Path:
    path = repo / "packer" / "apptainer" / f"syndeo-{base}.def"
    if not path.exists():
        raise ImageError(f"image definition not found: {path} (build from a Syndeo checkout)")
    return path


def _source_files(repo: Path) -> list[Path]:
    """What goes into the syndeo wheel (changes to these must rebuild the image)."""
    pkg = [
        p
        for p in (repo / "syndeo").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return sorted([repo / "pyproject.toml", *pkg])


def inputs_digest(
    definition: Path, repo: Path, extra_ca: Path | None, build_args: dict[str, str]
) -> str:
    apptainer_dir = repo / "packer" / "apptainer"
    files = [definition, apptainer_dir / "install-env.sh", apptainer_dir / "requirements.lock"]
    files += _source_files(repo)
    if extra_ca is not None:
        files.append(extra_ca)
    digest = hashlib.sha256(json.dumps(sorted(build_args.items())).encode())
    for path in files:
        digest.update(str(path.relative_to(repo) if path.is_relative_to(repo) else path).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "syndeo"


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def wheelhouse_argv(lock: Path, dest: Path) -> list[str]:
    """pip download of the exact lock for the image's Python and glibc, binary wheels only
    (no compiler in the image; also independent of the host's Python version)."""
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(5, IMAGE_GLIBC_MINOR + 1)]
    platforms += ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]
    argv = _pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(dest))
    argv += ["--python-version", IMAGE_PYTHON, "--implementation", "cp", "-r", str(lock)]
    for platform in platforms:
        argv += ["--platform", platform]
    return argv


# --- running steps with progress ------------------------------------------------------


class _Step:
    """Runs one external command, streaming its output to a log and the progress line."""

    def __init__(self, progress: Progress, log: IO[str], log_path: Path) -> None:
        self.progress, self.log, self.log_path = progress, log, log_path
        self.task = progress.add_task("starting", total=None)

    def run(self, phase: str, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        console.log(f"[bold]{phase}[/bold]")
        self.log.write(f"\n### {phase}: {' '.join(argv)}\n")
        tail: list[str] = []
        try:
            proc = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                errors="replace", env=env, start_new_session=True,
            )  # fmt: skip
        except FileNotFoundError as err:
            raise ImageError(f"{phase} failed: {argv[0]} is not installed") from err
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.log.write(line)
                if line.strip():
                    tail = [*tail[-40:], line.strip()]
                    self.progress.update(self.task, description=f"{phase}: {line.strip()[:70]}")
            proc.wait()
        except BaseException:
            # Ctrl-C, TERM or any error: the build's whole process group goes with us;
            # TERM first so apptainer can remove its multi-GB temp rootfs.
            _stop_group(proc)
            raise
        self.log.flush()
        if proc.returncode != 0:
            raise ImageError(
                f"{phase} failed (exit {proc.returncode}): {_cause(tail)}; log: {self.log_path}"
            )


def _stop_group(proc: subprocess.Popen[str], grace_s: float = 20.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _cause(tail: list[str]) -> str:
    for marker in ("FATAL", "ERROR", "Error", "error"):
        for line in reversed(tail):
            if marker in line:
                return line[:300]
    return tail[-1][:300] if tail else "no output"


@contextmanager
def _steps(log_path: Path) -> Iterator[_Step]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    # TERM (CI timeout, `kill`) must also stop the build's process group: turn it into
    # an exception so _Step.run's cleanup runs (only possible from the main thread).
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        with log_path.open("w") as log, Progress(*columns, console=console, transient=True) as bar:
            yield _Step(bar, log, log_path)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise ImageError(f"image build interrupted by signal {signum}", exit_code=128 + signum)


# --- the build ------------------------------------------------------------------------


def build_user() -> str | None:
    """Who runs apptainer: None = the current (non-root) user."""
    if os.geteuid() != 0:
        return None
    user = os.environ.get("SYNDEO_BUILD_USER", "syndeo-ci")
    if subprocess.run(["id", "-u", user], capture_output=True, check=False).returncode != 0:
        raise ImageError(
            f"apptainer cannot run as root here and build user {user!r} does not exist: "
            "run scripts/setup.d/apptainer.sh or set SYNDEO_BUILD_USER"
        )
    return user


def as_user(user: str | None, argv: Sequence[str]) -> list[str]:
    """argv run as ``user`` with a clean PATH (debootstrap needs /usr/sbin) and its HOME."""
    if user is None:
        return ["env", f"PATH={SBIN_PATH}", *argv]
    home = os.path.expanduser(f"~{user}")
    return ["runuser", "-u", user, "--", "env", f"HOME={home}", f"PATH={SBIN_PATH}", *argv]


def _copy_sources(repo: Path, dest: Path) -> Path:
    """A clean copy to build the wheel from: building in the checkout would reuse its
    ``build/`` dir, where modules deleted since still linger and get packaged."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (repo / name).exists():
            shutil.copy2(repo / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(repo / "syndeo", dest / "syndeo", ignore=ignore)
    return dest


def _stage(
    stage: Path, definition: Path, lock: Path, wheels: Path, syndeo_wheel_dir: Path,
    extra_ca: Path | None,
) -> Path:  # fmt: skip
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
) -> ImageManifest:
    """Build (or reuse) the image; returns its manifest.  ``definition`` overrides the
    one for ``base`` (tests use it; the install script and lock stay the checkout's)."""
    if definition is None:
        definition = definition_path(base, repo)
    elif not definition.is_file():
        raise ImageError(f"image definition not found: {definition}")
    output = (output or repo / ".syndeo" / "image" / f"syndeo-{base}.sif").resolve()
    if extra_ca is not None and not extra_ca.is_file():
        raise ImageError(f"extra CA bundle not found: {extra_ca}")
    args = dict(build_args or {})
    # gzip adds nothing, so digests of default builds do not depend on this option.
    keyed = args if compression == "gzip" else {**args, " compression": compression}
    wanted = inputs_digest(definition, repo, extra_ca, keyed)
    if not force and output.exists():
        current = load_manifest(output)
        if current is not None and current.inputs_sha256 == wanted:
            if sha256_file(output) == current.sha256:
                console.log(f"image up to date: {output} (sha256 {current.sha256[:12]})")
                return current
            console.log(f"{output} differs from its manifest: rebuilding")

    user = build_user()
    lock = repo / "packer" / "apptainer" / "requirements.lock"
    lock_hash = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    wheels = cache_dir() / "wheelhouse" / lock_hash
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = output.with_name(output.name + ".build.log")
    packer = shutil.which("packer") if use_packer else None
    stage = Path(tempfile.mkdtemp(prefix="syndeo-image-", dir="/var/tmp"))
    try:
        with _steps(log_path) as step:
            if not (wheels / ".complete").exists():
                step.run("wheelhouse (pip download)", wheelhouse_argv(lock, wheels))
                (wheels / ".complete").touch()
            wheel_dir = stage / "syndeo-wheel"
            src = _copy_sources(repo, stage / "src")
            step.run(
                "syndeo wheel",
                _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(src)),
            )
            shutil.rmtree(src)
            ctx = _stage(stage, definition, lock, wheels, wheel_dir, extra_ca)
            shutil.rmtree(wheel_dir)
            # Apptainer's temp rootfs (~1 GB) lives in the stage, so any exit removes it.
            (stage / "tmp").mkdir()
            if user is not None:
                subprocess.run(["chown", "-R", f"{user}:", str(stage)], check=True)
            staged_sif = stage / output.name
            sif_argv = [
                sys.executable, "-m", "syndeo.image", "sif",
                "--definition", str(stage / definition.name), "--context", str(ctx),
                "--output", str(staged_sif), "--inputs-sha256", wanted, "--base", base,
                "--tmpdir", str(stage / "tmp"), "--compression", compression,
            ]  # fmt: skip
            for key, value in sorted(args.items()):
                sif_argv += ["--build-arg", f"{key}={value}"]
            if packer:
                step.run("packer build (apptainer)", _packer_argv(packer, repo, sif_argv),
                         env={**os.environ, "CHECKPOINT_DISABLE": "1"})  # fmt: skip
            else:
                why = "disabled" if not use_packer else "not found"
                console.log(f"packer {why}: building with apptainer directly")
                step.run("apptainer build", sif_argv)
        for made in (staged_sif, manifest_path(staged_sif)):
            shutil.move(made, output.parent / made.name)
        os.chmod(output, 0o644)
        if user is not None:  # the build user must not be able to swap the image later
            os.chown(output, os.getuid(), os.getgid())
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    manifest = load_manifest(output)
    if manifest is None:
        raise ImageError(f"build produced no manifest next to {output}")
    manifest = manifest.model_copy(update={"sif": str(output)})
    manifest_path(output).write_text(manifest.model_dump_json(indent=2) + "\n")
    console.log(f"built {output}: {manifest.size_bytes / 2**20:.0f} MiB in "
                f"{manifest.build_seconds:.0f} s, sha256 {manifest.sha256[:12]}")  # fmt: skip
    return manifest


def _packer_argv(packer: str, repo: Path, sif_argv: list[str]) -> list[str]:
    return [packer, "build", "-color=false", "-var", f"sif_command={json.dumps(sif_argv)}",
            str(repo / "packer" / "local")]  # fmt: skip


# --- the step Packer runs: apptainer build + manifest ---------------------------------


def build_sif(
    definition: Path, context: Path, output: Path, inputs_sha256: str, base: str,
    build_args: dict[str, str], tmpdir: Path | None = None, compression: str = "gzip",
) -> ImageManifest:  # fmt: skip
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
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            tail = [*tail[-40:], line.strip()]
    if proc.returncode != 0 or not output.exists():
        raise ImageError(f"apptainer build of {definition.name} failed: {_cause(tail)}")
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
        raise ImageError(f"built image does not start: {_cause(proc.stderr.splitlines())}")
    versions: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    apptainer = subprocess.run(["apptainer", "--version"], capture_output=True, text=True)
    versions["apptainer"] = apptainer.stdout.split()[-1]
    return versions


def _builder() -> str:
    # PACKER_BUILD_NAME is set for shell-local provisioners.
    return "packer" if os.environ.get("PACKER_BUILD_NAME") else "apptainer"


def write_lock(requirements_in: Path, lock: Path) -> int:
    """Resolve ``requirements.in`` to a full pinned lock (``pip install --report``)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip = _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report")
        subprocess.run([*pip, str(report), "-r", str(requirements_in)], check=True)
        installs = json.loads(report.read_text())["install"]
    pins = sorted(f"{i['metadata']['name'].lower()}=={i['metadata']['version']}" for i in installs)
    header = "# Generated from requirements.in by `python -m syndeo.image lock`; do not edit.\n"
    lock.write_text(header + "\n".join(pins) + "\n")
    return len(pins)


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
            here = REPO / "packer" / "apptainer"
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


if __name__ == "__main__":
    sys.exit(main())
