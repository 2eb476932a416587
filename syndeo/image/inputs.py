"""What an image is built from, and the digest that says whether it must be rebuilt."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Literal

from syndeo.core.errors import ImageError

# The checkout the image is built from (a build needs one: the definition and lock live
# outside the package).
REPO = Path(__file__).resolve().parents[2]
Base = Literal["debootstrap", "docker"]
# The image's Python (bookworm / python:3.11-slim-bookworm); the wheelhouse must match.
IMAGE_PYTHON = "3.11"
IMAGE_GLIBC_MINOR = 36


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


def pip_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def wheelhouse_argv(lock: Path, dest: Path) -> list[str]:
    """pip download of the exact lock for the image's Python and glibc, binary wheels only
    (no compiler in the image; also independent of the host's Python version)."""
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(5, IMAGE_GLIBC_MINOR + 1)]
    platforms += ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]
    argv = pip_argv("download", "--no-deps", "--only-binary=:all:", "--dest", str(dest))
    argv += ["--python-version", IMAGE_PYTHON, "--implementation", "cp", "-r", str(lock)]
    for platform in platforms:
        argv += ["--platform", platform]
    return argv
