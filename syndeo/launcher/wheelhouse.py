"""The Python packages a workload needs beyond the image's: resolved on the launcher into
a wheelhouse for the nodes' Python and platform, so that no node ever reaches a package
index (HPC compute nodes and private subnets usually cannot).

``--requirements FILE`` (default: ``requirements.txt`` in the work dir, when there is
one): binary wheels only, resolved with the image's own pins as constraints (a pin that
conflicts with them, Ray's above all, is refused), then stripped of what the image has
already.  The file lists packages and nothing else: an option line (an index, links, an
included file, ``--no-binary``, ``-e``...), a URL or a path is refused
(:func:`check_lines`) before anything is resolved, since the file may come from a work
dir that others (the cluster's tasks, collaborators) can write, and pip would follow it:
send this machine's requests elsewhere, or build a source package here, which runs its
setup.py.  An index is pip's own configuration on this machine (pip.conf,
PIP_INDEX_URL...).  pip runs in Python's isolated mode (``-I``) in an empty private
directory, so a ``pip/`` or ``sitecustomize.py`` in the directory the launcher runs in
is not imported.

The archive goes into the rendezvous by its sha256.  ``deploy``: every node installs it
(syndeo/node/wheelhouse.py) before it starts Ray, so the workload and every task import
it.  ``submit``: streamed into the store at any size, and every node of the ``up``
cluster installs it from there into a directory of its own that the job's PYTHONPATH
names (syndeo/node/wheelhouse.py: Installer; syndeo/node/job_agent.py).  Errors are one
line, before anything starts: a requirement the image's pins contradict is refused
before pip runs (:func:`check_pins`).

Resolved once: the archive is cached under $SYNDEO_HOME/wheelhouses by the digest of
what decides it (the file's text, the nodes' Python and platform, the image's pins), so
the same requirements file is not downloaded again on the next run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from syndeo.core.errors import ConfigError
from syndeo.core.resources import data_dir
from syndeo.launcher.state import home, private_dirs
from syndeo.rendezvous.base import MAX_WHEELHOUSE

# The nodes' platforms, by architecture (``uname -m``; a group's ``arch``): the image
# (Debian bookworm) and the hosts bare nodes run on.
ARCHS = ("x86_64", "aarch64")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


# How long pip may take to download a requirements file's wheels; how often a download's
# progress is said.
PIP_TIMEOUT_S = 900.0
SAY_EVERY_S = 2.0
Say = Callable[[str], None]


def platforms(arch: str) -> tuple[str, ...]:
    """pip's platform tags for nodes of ``arch``."""
    return tuple(p.replace("x86_64", arch) for p in PLATFORMS)


def image_lock() -> Path:
    """The image's pins, as the package carries them."""
    return data_dir("packer") / "apptainer" / "requirements.lock"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_pins() -> dict[str, str]:
    """Project name -> ``name==version`` of what every node has already."""
    lines = image_lock().read_text().splitlines()
    pins = [ln.split("#")[0].strip() for ln in lines]
    return {_norm(p.split("==")[0]): p for p in pins if "==" in p}


# A line of the file: a package by name (extras, versions, a marker), nothing else.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_CLAUSE = r"(?:===|~=|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_SPEC = rf"{_CLAUSE}(?:\s*,\s*{_CLAUSE})*"
_EXTRAS = rf"\[\s*(?:{_NAME}(?:\s*,\s*{_NAME})*)?\s*\]"
_REQUIREMENT = re.compile(rf"{_NAME}\s*(?:{_EXTRAS})?\s*(?:{_SPEC}|\(\s*{_SPEC}\s*\))?\s*(?:;.*)?")
# A name pip would take for a file in the directory it runs in.
_ARCHIVES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz")
_ARCHIVES_TOO = (".tlz", ".tar.lz", ".tar.lzma")
# pip joins a line ending in a backslash to the next; "#" after a blank starts a comment.
_COMMENT = re.compile(r"(^|\s+)#.*$")
# What to do instead of an option line, by what the option does.
_INSTEAD = {
    ("-i", "--index-url", "--extra-index-url", "--no-index", "-f", "--find-links"): (
        "indexes and links are pip's own configuration on this machine (pip.conf, "
        "PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS), not the file's: remove the line"
    ),
    ("--trusted-host", "--cert", "--client-cert"): (
        "pip's connections are set in its own configuration on this machine: remove the line"
    ),
    ("-r", "--requirement", "-c", "--constraint"): (
        "no other file is read: list its packages in this one"
    ),
    ("--no-binary", "--only-binary", "--prefer-binary"): (
        "the nodes take binary wheels only and this machine builds no package: remove the line"
    ),
    ("-e", "--editable"): (
        "a local or editable package is never built here: build its wheel, put it on an "
        "index pip reaches, and name the package"
    ),
}
_OPTIONS = (
    "options are not read: the file lists packages (name, extras, versions, a marker, "
    "--hash=...) and nothing else"
)
_DIRECT = (
    "a URL or a path is not read (pip would fetch it from anywhere and build a source "
    "package here, running its setup.py): put its wheel on an index pip reaches and name "
    "the package"
)

_NOT_A_PACKAGE = (
    "not a package: write `name`, `name[extra]>=1.2` or `name==1.2; python_version>='3.11'`"
)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each of the file's lines as pip reads them: joined
    where a line ends in a backslash, comments removed, blank ones left out."""
    out: list[tuple[int, str]] = []
    start, parts = 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        start = start or number
        if raw.endswith("\\") and not _COMMENT.search(raw):
            parts.append(raw[:-1])
            continue
        line = _COMMENT.sub("", "".join([*parts, raw])).strip()
        if line:
            out.append((start, line))
        start, parts = 0, []
    if parts and (line := _COMMENT.sub("", "".join(parts)).strip()):
        out.append((start, line))
    return out


def _refused(line: str) -> str | None:
    """Why pip must not read ``line`` (one logical line of the file); None: a package."""
    if line.startswith("-"):
        option = re.split(r"[\s=]", line, maxsplit=1)[0]
        if not option.startswith("--"):
            option = option[:2]  # "-ihttps://..." is -i
        return next((why for names, why in _INSTEAD.items() if option in names), _OPTIONS)
    # As pip splits it: the options start at the first word that starts with "-".
    words = line.split(" ")
    cut = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
    requirement = " ".join(words[:cut]).strip()
    if not _hashes_only(" ".join(words[cut:])):
        return _OPTIONS
    name = re.match(_NAME, requirement)
    if name is not None and name.group().lower().endswith(_ARCHIVES + _ARCHIVES_TOO):
        return _DIRECT
    if not _REQUIREMENT.fullmatch(requirement):
        return _DIRECT if re.search(r"[@/\\:]", requirement) else _NOT_A_PACKAGE
    return None


def _hashes_only(options: str) -> bool:
    """Whether a package's options (as pip reads them) are ``--hash`` alone."""
    try:
        words = shlex.split(options)
    except ValueError:
        return False
    while words:
        word = words.pop(0)
        if word == "--hash" and words and not words[0].startswith("-"):
            words.pop(0)
        elif not word.startswith("--hash="):
            return False
    return True


def check_lines(requirements: Path, text: str) -> None:
    """Refuse (one line naming the first offending line and what to do) a requirements
    file that holds anything but packages by name: an option line, an option other than
    ``--hash`` on a package's line, a URL or a path.  Such lines would make pip on this
    machine ask other servers, read other files, or build a source package, which runs
    its code here; the file may come from a work dir others can write."""
    for number, line in _logical_lines(text):
        why = _refused(line)
        if why is not None:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise ConfigError(f"--requirements {requirements} line {number}: {shown!r}: {why}")


def check_pins(requirements: Path, text: str, pins: dict[str, str], python: str) -> None:
    """Refuse, in one line naming both versions, a requirement that the image's pin of the
    same project does not satisfy (``ray==2.40`` against the image's ``ray==2.60.0``):
    the nodes run the image's Ray and runtime, whatever the wheelhouse holds.  Extras of
    a pinned project (``ray[tune]``) pass: the image's own copy stays and only what it
    lacks is shipped.  Called before pip runs, so nothing is downloaded for it."""
    from packaging.requirements import InvalidRequirement, Requirement

    for number, line in _logical_lines(text):
        words = line.split(" ")
        cut = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
        try:
            req = Requirement(" ".join(words[:cut]))
        except InvalidRequirement:
            continue  # pip says what is wrong with it
        pinned = pins.get(_norm(req.name))
        if pinned is None or not req.specifier:
            continue
        # Markers as the nodes read them (their Python, not this one's).
        if req.marker is not None and not req.marker.evaluate({"python_version": python}):
            continue
        version = pinned.split("==", 1)[1]
        if not req.specifier.contains(version, prereleases=True):
            raise ConfigError(
                f"--requirements {requirements} line {number}: `{req.name}{req.specifier}` "
                f"contradicts the image's `{pinned}` (the nodes run the image's own "
                f"{req.name}): loosen the pin, or build an image with it "
                "(packer/apptainer/requirements.in)"
            )


def _download(
    requirements: Path, listed: Path, python: str, arch: str, tmp: Path, say: Say
) -> Path:
    """pip downloads the wheels of ``listed`` (the checked text of ``requirements``) into
    a directory below ``tmp``, a private directory of this run; that directory.  What
    pip downloads (name, bytes, rate) goes to ``say`` as it goes."""
    abi = "cp" + python.replace(".", "")
    dest, cwd = tmp / "wheels", tmp / "cwd"
    cwd.mkdir(mode=0o700)
    # -I: neither the directory the launcher runs in (a work dir others can write,
    # perhaps) nor PYTHONPATH is on pip's sys.path, and pip runs in an empty one.  Not
    # pip's --isolated: pip's own configuration (pip.conf, PIP_INDEX_URL) is this user's,
    # and says where packages come from.
    argv = [sys.executable, "-I", "-m", "pip", "download", "--disable-pip-version-check"]
    argv += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    argv += ["--abi", abi, *(f"--platform={p}" for p in platforms(arch))]
    argv += ["-d", str(dest), "-r", str(listed), "-c", str(tmp / "image-pins.txt")]
    argv += ["--progress-bar", "raw"] if _pip_says_progress() else []
    with (tmp / "pip.err").open("w+") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd)
        timer = threading.Timer(PIP_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            watch = _Downloads(say)
            for line in proc.stdout or []:
                watch.line(line)
            proc.wait()
        finally:
            timer.cancel()
        err.seek(0)
        stderr = err.read()
    if proc.returncode != 0:
        if proc.returncode == -signal.SIGKILL:
            stderr = f"pip took over {PIP_TIMEOUT_S:.0f} s: stopped"
        raise ConfigError(_why(requirements, python, arch, stderr))
    return dest


def _pip_says_progress() -> bool:
    """Whether this Python's pip prints its downloads' progress as lines (``--progress-bar
    raw``, pip 24.1 on); an older one downloads without saying more than each file."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(x) for x in version("pip").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (24, 1)


class _Downloads:
    """pip's lines as it downloads (``Downloading NAME (SIZE)``, then ``Progress DONE of
    TOTAL`` with ``--progress-bar raw``): each file said as it starts, its bytes and rate
    at most every :data:`SAY_EVERY_S` and when it is done."""

    def __init__(self, say: Say) -> None:
        self.say, self.name, self.began, self.last = say, "", 0.0, 0.0

    def line(self, line: str) -> None:
        line = line.strip()
        if line.startswith("Downloading "):
            where, _, size = line.removeprefix("Downloading ").partition(" (")
            self.name = where.rsplit("/", 1)[-1]  # a file name, or a URL's last part
            self.began = self.last = time.monotonic()
            self.say(f"downloading {self.name}" + (f" ({size}" if size else ""))
            return
        found = re.fullmatch(r"Progress (\d+) of (\d+)", line)
        if found is None or not self.name:
            return
        done, total = int(found.group(1)), int(found.group(2))
        now = time.monotonic()
        if done != total and now - self.last < SAY_EVERY_S:
            return
        self.last = now
        rate = done / 2**20 / max(now - self.began, 1e-3)
        of = f" of {total / 2**20:.1f}" if total else ""
        self.say(f"downloading {self.name}: {done / 2**20:.1f}{of} MiB, {rate:.1f} MiB/s")


def _why(requirements: Path, python: str, arch: str, stderr: str) -> str:
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
            f"{arch}): binary wheels only, since nodes never build or reach an index"
        )
    last = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or ["pip failed"]
    return f"{where}: {last[0].removeprefix('ERROR: ')}"


def _tar(wheels: list[Path], out: Path) -> None:
    """The wheels as a reproducible .tar.gz in ``out`` (same wheels, same bytes: same
    digest: no name and no time in gzip's header); level 1: wheels are compressed
    already, the archive rules (safe_extract) read gzip."""
    with (
        out.open("wb") as fh,
        gzip.GzipFile(filename="", mode="wb", fileobj=fh, compresslevel=1, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(wheels, key=lambda p: p.name):
            info = tarfile.TarInfo(path.name)
            info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
            with path.open("rb") as wheel:
                tar.addfile(info, wheel)


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


def cache_key(requirements: Path, python: str, arch: str = "x86_64") -> str:
    """What decides the wheelhouse: the file's text, the nodes' Python and platform, the
    image's pins (the file includes no other: :func:`check_lines`)."""
    return _key(requirements.read_text(encoding="utf-8", errors="replace"), python, arch)


def _key(text: str, python: str, arch: str) -> str:
    decided = {
        "requirements": text,
        "python": python,
        "platforms": platforms(arch),
        "pins": sorted(image_pins().values()),
    }
    return hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()


def resolve(requirements: Path, python: str) -> bytes | None:
    """The wheelhouse of ``requirements`` for CPython ``python`` (``3.11``) nodes, without
    what they have already, in memory (``deploy``: at most ``MAX_WHEELHOUSE``); None if
    nothing is left to install."""
    path = resolve_file(requirements, python)
    if path is None:
        return None
    if path.stat().st_size > MAX_WHEELHOUSE:
        raise ConfigError(
            f"--requirements {requirements}: {path.stat().st_size // 2**20} MiB of wheels, "
            f"more than {MAX_WHEELHOUSE // 2**20} MiB for `deploy`: put large packages in "
            "the image (packer/apptainer/requirements.in), or `up` and `submit` the program"
        )
    return path.read_bytes()


def resolve_file(
    requirements: Path, python: str, arch: str = "x86_64", say: Say = lambda _m: None
) -> Path | None:
    """The wheelhouse file of ``requirements`` for CPython ``python`` nodes, in the
    launcher's cache (resolved now unless this file was resolved before for the same
    nodes and image; what pip downloads then goes to ``say``); None if nothing is left
    to install."""
    if not requirements.is_file():
        raise ConfigError(f"--requirements {requirements}: no such file")
    # Read once: what was checked is what pip reads and what the cache is keyed by.
    text = requirements.read_text(encoding="utf-8", errors="replace")
    check_lines(requirements, text)
    check_pins(requirements, text, image_pins(), python)
    cached = home() / "wheelhouses" / _key(text, python, arch)
    if cached.with_suffix(".none").exists():
        return None
    if cached.with_suffix(".tar.gz").is_file():
        return cached.with_suffix(".tar.gz")
    private_dirs(cached.parent)
    # Into the cache whole or not at all (a second launcher may be reading it).
    tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
    try:
        found = _resolve(requirements, text, python, arch, tmp, say)
        tmp.replace(cached.with_suffix(".tar.gz" if found else ".none"))
    finally:
        tmp.unlink(missing_ok=True)
    return cached.with_suffix(".tar.gz") if found else None


def _resolve(requirements: Path, text: str, python: str, arch: str, out: Path, say: Say) -> bool:
    """Download the wheels and pack them into ``out``; False (an empty ``out``): the image
    has them all."""
    pins = image_pins()
    with tempfile.TemporaryDirectory(prefix="syndeo-wheels-") as tmp:
        (Path(tmp) / "image-pins.txt").write_text("\n".join(sorted(pins.values())) + "\n")
        listed = Path(tmp) / "requirements.txt"
        listed.write_text(text, encoding="utf-8")
        dest = _download(requirements, listed, python, arch, Path(tmp), say)
        wheels = [w for w in dest.glob("*.whl") if _norm(w.name.split("-")[0]) not in pins]
        out.write_bytes(b"")
        if not wheels:
            return False
        _tar(wheels, out)
    return True
