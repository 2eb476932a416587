"""The Python packages a workload needs beyond the image's: resolved on the launcher into
a wheelhouse for the nodes' Python and platform, so that no node ever reaches a package
index (HPC compute nodes and private subnets usually cannot).

``--requirements FILE`` (default: ``requirements.txt`` in the work dir, when there is
one): binary wheels only, resolved with the image's own pins as constraints (a pin that
conflicts with them, Ray's above all, is refused), then stripped of what the image has
already.  The archive goes into the rendezvous by its sha256.  ``deploy``: every node
installs it (syndeo/node/wheelhouse.py) before it starts Ray, so the workload and every
task import it.  ``submit``: the head's job agent installs it and hands it to Ray as the
job's own ``py_modules`` (syndeo/node/job_agent.py).  Errors are one line, before
anything starts.

Resolved once: the archive is cached under $SYNDEO_HOME/wheelhouses by the digest of
what decides it (the file's text, the nodes' Python and platform, the image's pins), so
the same requirements file is not downloaded again on the next run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import syndeo
from syndeo.core.errors import ConfigError
from syndeo.launcher.state import home, private_dirs
from syndeo.rendezvous.base import MAX_WHEELHOUSE

# The nodes' platform: the image (Debian bookworm, x86-64) and the hosts bare nodes run on.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# The image's pins (a source checkout has them; an installed syndeo pins only Ray).
LOCK = Path(syndeo.__file__).resolve().parent.parent / "packer" / "apptainer" / "requirements.lock"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_pins() -> dict[str, str]:
    """Project name -> ``name==version`` of what every node has already."""
    if LOCK.is_file():
        lines = LOCK.read_text().splitlines()
    else:
        from importlib.metadata import version

        lines = [f"ray=={version('ray')}"]
    pins = [ln.split("#")[0].strip() for ln in lines]
    return {_norm(p.split("==")[0]): p for p in pins if "==" in p}


def _download(requirements: Path, python: str, dest: Path, constraints: Path) -> None:
    abi = "cp" + python.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
    argv += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    argv += ["--abi", abi, *(f"--platform={p}" for p in PLATFORMS)]
    argv += ["-d", str(dest), "-r", str(requirements), "-c", str(constraints)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise ConfigError(_why(requirements, python, proc.stderr))


def _why(requirements: Path, python: str, stderr: str) -> str:
    """pip's refusal as one line naming the requirement and what to do."""
    where = f"--requirements {requirements}"
    missing = re.findall(r"No matching distribution found for (\S+)", stderr)
    if "ResolutionImpossible" in stderr or "conflict" in stderr.lower():
        return (
            f"{where}: conflicts with the image's own packages (Ray and the node runtime are "
            "pinned there: see packer/apptainer/requirements.lock); loosen the pins"
        )
    if missing:
        return (
            f"{where}: no wheel of {missing[0]} for the nodes (CPython {python}, Linux "
            "x86-64): binary wheels only, since nodes never build or reach an index"
        )
    last = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or ["pip failed"]
    return f"{where}: {last[0].removeprefix('ERROR: ')}"


def _tar(wheels: list[Path]) -> bytes:
    """The wheels as a reproducible .tar.gz (same wheels, same bytes: same digest); level 1:
    wheels are compressed already, the archive rules (safe_extract) read gzip."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(wheels, key=lambda p: p.name):
            info = tarfile.TarInfo(path.name)
            info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    data = buf.getvalue()
    return data[:4] + b"\0\0\0\0" + data[8:]  # gzip's own timestamp (bytes 4..8)


def requirements_file(requirements: Path | None, workdir: Path | None) -> Path | None:
    """The file ``--requirements`` names, else ``requirements.txt`` in the work dir if
    there is one (as for ``deploy --run`` so for ``submit``); None: no packages."""
    if requirements is None and workdir is not None and (workdir / "requirements.txt").is_file():
        return workdir / "requirements.txt"
    return requirements


def node_python(image: Path | None) -> str:
    """The nodes' Python, major.minor: the image's, or (bare nodes) this one's."""
    from syndeo.image.manifest import load_manifest

    found = load_manifest(image) if image is not None else None
    version = found.versions.get("python", "") if found is not None else ""
    return ".".join(version.split(".")[:2]) or f"{sys.version_info[0]}.{sys.version_info[1]}"


def cache_key(requirements: Path, python: str) -> str:
    """What decides the wheelhouse: the file's text, the nodes' Python and platform, the
    image's pins.  (A file it includes with ``-r`` is not read: change the top one, or
    remove $SYNDEO_HOME/wheelhouses, to resolve again.)"""
    decided = {
        "requirements": requirements.read_text(),
        "python": python,
        "platforms": PLATFORMS,
        "pins": sorted(image_pins().values()),
    }
    return hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()


def resolve(requirements: Path, python: str) -> bytes | None:
    """The wheelhouse of ``requirements`` for CPython ``python`` (``3.11``) nodes, without
    what they have already; None if nothing is left to install.  From the launcher's
    cache when this file was resolved before for the same nodes and image."""
    if not requirements.is_file():
        raise ConfigError(f"--requirements {requirements}: no such file")
    cached = home() / "wheelhouses" / cache_key(requirements, python)
    if cached.with_suffix(".none").exists():
        return None
    if cached.with_suffix(".tar.gz").is_file():
        return cached.with_suffix(".tar.gz").read_bytes()
    data = _resolve(requirements, python)
    _remember(cached.with_suffix(".none" if data is None else ".tar.gz"), data or b"")
    return data


def _remember(path: Path, data: bytes) -> None:
    """Into the cache whole or not at all (a second launcher may be reading it)."""
    private_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)


def _resolve(requirements: Path, python: str) -> bytes | None:
    pins = image_pins()
    with tempfile.TemporaryDirectory(prefix="syndeo-wheels-") as tmp:
        constraints = Path(tmp) / "image-pins.txt"
        constraints.write_text("\n".join(sorted(pins.values())) + "\n")
        dest = Path(tmp) / "wheels"
        _download(requirements, python, dest, constraints)
        wheels = [w for w in dest.glob("*.whl") if _norm(w.name.split("-")[0]) not in pins]
        if not wheels:
            return None
        data = _tar(wheels)
    if len(data) > MAX_WHEELHOUSE:
        raise ConfigError(
            f"--requirements {requirements}: {len(data) // 2**20} MiB of wheels, more than "
            f"{MAX_WHEELHOUSE // 2**20} MiB: put large packages in the image "
            "(packer/apptainer/requirements.in)"
        )
    return data
