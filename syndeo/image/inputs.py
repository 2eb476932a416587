"""What an image is built from, and the digest that says whether it must be rebuilt."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Literal

from syndeo.core.errors import ImageError
from syndeo.core.resources import data_dir

# The source tree whose syndeo wheel goes into the image (a checkout; an installed syndeo
# has none, see source_tree).  The definition, install script and lock are the package's
# own (packer_dir).
REPO = Path(__file__).resolve().parents[2]
Base = Literal["debootstrap", "docker"]
# The image's Python (bookworm / python:3.11-slim-bookworm); the wheelhouse must match.
IMAGE_PYTHON = "3.11"
IMAGE_GLIBC_MINOR = 36


def packer_dir() -> Path:
    """The package's ``packer/``: the image definitions, install script and lock."""
    return data_dir("packer")


def source_tree(repo: Path = REPO) -> Path:
    """``repo`` if it is a syndeo source tree (the image's syndeo wheel is built from it),
    else one line saying what a build needs."""
    if not (repo / "pyproject.toml").is_file() or not (repo / "syndeo").is_dir():
        raise ImageError(
            f"no syndeo source tree at {repo} to build the image's syndeo wheel from: "
            "pass the wheel you installed syndeo from (`syndeo build --syndeo-wheel "
            "syndeo-VERSION-py3-none-any.whl`), or build in a checkout"
        )
    return repo


def wheel_of_this_syndeo(wheel: Path) -> Path:
    """``wheel`` if it is a syndeo wheel of the version that runs here (the image's nodes
    must speak the launcher's protocol), else one line saying what is wrong."""
    import importlib.metadata

    wheel = wheel.expanduser().resolve()
    if not wheel.is_file():
        raise ImageError(f"syndeo wheel not found: {wheel}")
    parts = wheel.name.split("-")
    if wheel.suffix != ".whl" or len(parts) < 5 or parts[0] != "syndeo":
        raise ImageError(f"{wheel.name} is not a syndeo wheel (syndeo-VERSION-...-any.whl)")
    have = importlib.metadata.version("syndeo")
    if parts[1] != have:
        raise ImageError(
            f"{wheel.name} is syndeo {parts[1]}, but this is syndeo {have}: the image's "
            "nodes must run the launcher's version (pass the wheel you installed)"
        )
    return wheel


def definition_path(base: Base) -> Path:
    path = packer_dir() / "apptainer" / f"syndeo-{base}.def"
    if not path.exists():
        raise ImageError(f"image definition not found: {path}")
    return path


# What debootstrap verifies the mirror's Release file against.  Apptainer runs it with no
# --keyring (its debootstrap source takes none), so debootstrap's own default for
# bookworm applies: this file.  Where it is missing, debootstrap says "Cannot check
# Release signature" and installs unverified packages from a plain-HTTP mirror.
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def check_base(base: Base, build_args: dict[str, str], keyring: Path = DEBIAN_KEYRING) -> None:
    """ImageError (one line) unless the base image is verifiable: a debootstrap base
    needs the Debian archive keyring on this host, a docker base a digest."""
    if base == "debootstrap" and not keyring.is_file():
        raise ImageError(
            f"{keyring} is missing: debootstrap could not verify the Debian mirror's "
            "signatures (install the debian-archive-keyring package)"
        )
    if base == "docker" and not _DIGEST.search(build_args.get("BASE", "")):
        raise ImageError(
            "the docker base must be pinned by digest: --base-image "
            "python:3.11-slim-bookworm@sha256:<64 hex> (find it with `docker buildx "
            "imagetools inspect python:3.11-slim-bookworm` or `skopeo inspect "
            "docker://python:3.11-slim-bookworm`); a tag can change under the same name"
        )


def _source_files(repo: Path) -> list[Path]:
    """What goes into the syndeo wheel (changes to these must rebuild the image): the
    package and the root directories the build maps into it (the package's links to
    them are not followed: the files count once, under their own names)."""
    pkg = [
        p
        for top in ("syndeo", "terraform", "packer")
        for p in (repo / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return sorted([repo / "pyproject.toml", *pkg])


def inputs_digest(
    definition: Path,
    repo: Path,
    extra_ca: Path | None,
    build_args: dict[str, str],
    syndeo_wheel: Path | None = None,
) -> str:
    """The digest of everything an image is built from: the definition, install script
    and lock, the syndeo sources (or the given syndeo wheel), the extra CA, the build
    arguments."""
    apptainer_dir = packer_dir() / "apptainer"
    files = [definition, apptainer_dir / "install-env.sh", apptainer_dir / "requirements.lock"]
    files += [syndeo_wheel] if syndeo_wheel is not None else _source_files(repo)
    if extra_ca is not None:
        files.append(extra_ca)
    digest = hashlib.sha256(json.dumps(sorted(build_args.items())).encode())
    for path in files:
        digest.update(_name(path, repo).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _name(path: Path, repo: Path) -> str:
    """A file's name in the digest: the same wherever the checkout or package lies."""
    packer = packer_dir()
    if path.is_relative_to(packer):
        return f"packer/{path.relative_to(packer)}"
    if path.suffix == ".whl":
        return f"wheel/{path.name}"
    return str(path.relative_to(repo) if path.is_relative_to(repo) else path)


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "syndeo"


def pip_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def wheelhouse_argv(lock: Path, dest: Path, *, require_hashes: bool | None = None) -> list[str]:
    """pip download of the exact lock for the image's Python and glibc, binary wheels only
    (no compiler in the image; also independent of the host's Python version).  When the
    lock carries hashes (``python -m syndeo.image lock`` writes them) every file must
    have the sha256 the lock names (``--require-hashes``): a mirror, proxy or index that
    serves another file for a pinned version fails the download."""
    if require_hashes is None:
        require_hashes = lock_has_hashes(lock)
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(5, IMAGE_GLIBC_MINOR + 1)]
    platforms += ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]
    argv = pip_argv("download", "--no-deps", "--only-binary=:all:", "--dest", str(dest))
    if require_hashes:
        argv.append("--require-hashes")
    argv += ["--python-version", IMAGE_PYTHON, "--implementation", "cp", "-r", str(lock)]
    for platform in platforms:
        argv += ["--platform", platform]
    return argv


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def hashed_pins(pins: list[str], wheels: Path) -> list[str]:
    """``name==version --hash=sha256:…`` for each pin, from the wheel of it in ``wheels``
    (downloaded for the image's platform: the one file the image installs)."""
    found: dict[str, str] = {}
    for whl in sorted(wheels.glob("*.whl")):
        name, version = whl.name.split("-")[:2]
        found[f"{_normalized(name)}=={version}"] = hashlib.sha256(whl.read_bytes()).hexdigest()
    lines = []
    for pin in pins:
        name, version = pin.split("==", 1)
        key = f"{_normalized(name)}=={version}"
        if key not in found:
            raise ImageError(f"no wheel of {pin} in {wheels} to take its hash from")
        lines.append(f"{pin} --hash=sha256:{found[key]}")
    return lines


def lock_has_hashes(lock: Path) -> bool:
    return "--hash=sha256:" in lock.read_text()


def lock_pins(lock: Path) -> list[str]:
    """The ``name==version`` lines of a lock, without hashes or comments."""
    pins = []
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pins.append(line.split()[0])
    return pins
