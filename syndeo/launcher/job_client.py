"""Jobs on a long-lived (``up``) cluster, carried by the rendezvous: no inbound port.

``submit`` packs the working directory (``.gitignore``-style excludes, a size cap, a
content digest so an unchanged directory is uploaded once), records the job and rings
the head's doorbell; the head's job agent (:mod:`syndeo.node.job_agent`) claims it, runs it
through Ray's Job API on the head itself and streams its output back.  ``logs``,
``jobs``, ``cancel`` and ``fetch`` read and write the same records.  Every job record and
cancel request is signed with the cluster's launch key (kept 0600 in the cluster's state
by ``up``): the head runs only what this launcher signed, and the listing shows only
that, whatever else someone who can write the prefix puts there.

What comes back to be shown -- a job's output, its state's words -- is the job's or
the store's, not this launcher's: it is shown as plain text (:class:`PlainText`), without
the terminal's control sequences, which could otherwise set the clipboard (OSC 52),
retitle the window, move the cursor to rewrite lines already shown, or answer back.
"""

from __future__ import annotations

import codecs
import contextlib
import getpass
import hashlib
import io
import os
import re
import secrets
import socket
import stat
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pathspec

from syndeo.core.archive import MAX_MEMBERS, UnsafeArchive, safe_extract
from syndeo.core.errors import BlobTooLarge, ConfigError, TargetError
from syndeo.core.sealed import sealed_size
from syndeo.launcher import wheelhouse
from syndeo.launcher.spec import Launched, launched_key
from syndeo.launcher.state import (
    WATCH_POKE,
    cluster_dir,
    home,
    load_launched,
    private_dirs,
    store_env,
)
from syndeo.rendezvous import (
    JobPhase,
    JobSpec,
    JobState,
    PayloadRefused,
    Rendezvous,
    open_rendezvous,
)
from syndeo.rendezvous.base import (
    JOB_ID_RE,
    MAX_JOB_ARCHIVE,
    MAX_OUTPUTS,
    TERMINAL,
    WHEELHOUSE_PURPOSE,
)

# Never packed, whatever the ignore files say: version control, caches, environments.
ALWAYS_EXCLUDED = [".git/", "__pycache__/", "*.pyc", ".venv/", "venv/", ".syndeo/", "results/"]
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FOLLOW_POLL_S = 0.5
# A terminal's escape sequences (ECMA-48), whole: CSI (cursor, colours, erasing), the
# string ones (OSC: title, clipboard, hyperlinks; DCS, SOS, PM, APC) to their BEL or ST,
# and the short ones (ESC c resets the terminal), whose last character is none of those
# sequences' introducers ([ ] P X ^ _).
_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|[ -/]*[0-OQ-WYZ\\`-~])"
)
# What is left out of what is shown: those, and every other C0 control but newline and
# tab (a lone ESC among them), DEL, and the C1 controls (U+0080-U+009F: 8-bit CSI, OSC).
_CONTROLS = re.compile(_SEQUENCE.pattern + r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# How much of an escape sequence cut at a chunk's end waits for the next chunk.
_HELD_MAX = 4096


class Cluster(NamedTuple):
    """An ``up`` cluster as its job verbs reach it: its rendezvous and its launch key."""

    rdv: Rendezvous
    key: str
    # The image its nodes run (None: bare nodes), for the Python its wheels are for.
    image: Path | None = None
    # The architectures of its groups' machines, for the platform its wheels are for.
    archs: tuple[str, ...] = ("x86_64",)


def open_cluster(cluster_id: str | None) -> Cluster:
    """The cluster ``up`` started (the only one up when no id is given)."""
    launched = load_launched(cluster_id)
    os.environ.update(store_env(launched))
    attempt = launched.attempt_or(0)
    key = launched_key(launched)
    if key is None:
        raise TargetError(
            f"cluster {launched.cluster_id} was started without a launch key (an older "
            "syndeo), so its head runs no job: `syndeo down` it and `syndeo up` again"
        )
    spec = launched.saved_spec()
    rdv = newest_attempt(launched, attempt, key)
    groups = spec.layout.groups if spec.layout is not None else []
    archs = sorted({g.arch for g in groups}) or ["x86_64"]
    return Cluster(rdv, key, spec.image, tuple(archs))


def newest_attempt(launched: Launched, attempt: int, key: str | None) -> Rendezvous:
    """The rendezvous of the cluster's newest attempt: ``attempt`` (as saved) or a later
    one whose head record ``key`` signed.  A requeued Slurm job runs again as the next
    attempt on its own, and a job or a stop request must reach that head at once, not
    once the watcher has noted the requeue (its target poll: every 30 s)."""
    rdv = open_rendezvous(launched.rendezvous, launched.cluster_id, attempt, key)
    while key is not None:
        later = open_rendezvous(launched.rendezvous, launched.cluster_id, rdv.attempt + 1, key)
        if later.check_head(key).head is None:  # none, or planted: not this cluster's
            break
        rdv = later
    return rdv


# ---------------------------------------------------------------------- the work dir
def _excludes(root: Path, extra: list[str]) -> pathspec.GitIgnoreSpec:
    lines = list(ALWAYS_EXCLUDED)
    for name in (".gitignore", ".syndeoignore"):
        with contextlib.suppress(FileNotFoundError):
            lines += (root / name).read_text().splitlines()
    return pathspec.GitIgnoreSpec.from_lines([*lines, *extra])


def _files(root: Path, spec: pathspec.GitIgnoreSpec) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        # Prune excluded directories before descending (a 10 GB venv is never walked).
        dirnames[:] = sorted(
            d for d in dirnames if not spec.match_file(f"{(rel_dir / d).as_posix()}/")
        )
        for name in sorted(filenames):
            rel = rel_dir / name
            path = here / name
            if spec.match_file(rel.as_posix()) or not stat.S_ISREG(path.lstat().st_mode):
                continue  # symlinks and special files are not packed
            yield rel


def _own_dirs(root: Path) -> list[str]:
    """Patterns for the launcher's own state below ``root`` ($SYNDEO_HOME: launch keys,
    tfvars, TLS keys), which is never packed wherever the user keeps it."""
    state, root = home().resolve(), root.resolve()
    if state == root or state in root.parents:
        raise ConfigError(
            f"--workdir {root}: that is Syndeo's own state ({state}); name your project's directory"
        )
    if root in state.parents:
        return ["/" + state.relative_to(root).as_posix() + "/"]
    return []


def pack_workdir(root: Path, extra_excludes: list[str], max_bytes: int = MAX_JOB_ARCHIVE) -> bytes:
    """A reproducible .tar.gz of ``root`` (same files, same bytes: same digest)."""
    if not root.is_dir():
        raise ConfigError(f"--workdir {root}: not a directory")
    spec = _excludes(root, [*extra_excludes, *_own_dirs(root)])
    buf = io.BytesIO()
    total = 0
    # mtime 0 in the gzip header and in every member: the digest depends on content only.
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
        for count, rel in enumerate(_files(root, spec), start=1):
            if count > MAX_MEMBERS:
                raise ConfigError(
                    f"--workdir {root} holds more than {MAX_MEMBERS} files after excludes: "
                    "add patterns to .syndeoignore (or --exclude), or put data in a bucket "
                    "the job reads"
                )
            path = root / rel
            size = path.stat().st_size
            total += size
            if total > max_bytes:
                raise ConfigError(
                    f"--workdir {root} is larger than {max_bytes // (1024 * 1024)} MiB after "
                    "excludes: add patterns to .syndeoignore (or --exclude), or put data in a "
                    "bucket the job reads"
                )
            info = tarfile.TarInfo(rel.as_posix())
            info.size, info.mtime = size, 0
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    data = buf.getvalue()
    # gzip stores a timestamp at bytes 4..8: zero it for reproducibility.
    return data[:4] + b"\0\0\0\0" + data[8:]


def _env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not ENV_NAME_RE.match(name):
            raise ConfigError(f"--env {pair!r}: use NAME=VALUE (NAME: letters, digits, _)")
        env[name] = value
    return env


# ---------------------------------------------------------------------- the verbs
def check_request(command: list[str], env: list[str] | None) -> dict[str, str]:
    """A job's command and environment, checked before any cluster is looked for (a
    mistake in them is one line); its environment as a mapping."""
    if not command or not "".join(command).strip():
        raise ConfigError("nothing to run: give the command after `--`, e.g. -- python train.py")
    return _env(env or [])


def submit(
    command: list[str],
    *,
    cluster_id: str | None = None,
    workdir: Path | None = None,
    env: list[str] | None = None,
    excludes: list[str] | None = None,
    requirements: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[Cluster, JobSpec]:
    """Record a job for the cluster's head and ring its doorbell; the job's spec.  What it
    does with the job's packages (resolving, uploading: bytes and rate) goes to ``say``."""
    variables = check_request(command, env)
    cluster = open_cluster(cluster_id)
    rdv, key, image, archs = cluster
    root = (workdir or Path.cwd()).resolve()
    archive = pack_workdir(root, excludes or [])
    # Resolved here, before anything is sent: a bad file is one line and no job.
    req = wheelhouse.requirements_file(requirements, root)
    python = wheelhouse.node_python(image)
    wheels = {a: _resolved(req, python, a, say) for a in archs} if req else {}
    if rdv.read_head() is None:
        raise TargetError(f"cluster {rdv.cluster_id} has no head at {rdv.uri} (is it up?)")
    by_arch = {a: _store_wheels(rdv, w, say) for a, w in wheels.items() if w is not None}
    digest = hashlib.sha256(archive).hexdigest()
    rdv.put_workdir(digest, archive)  # a no-op when this exact directory is there already
    spec = JobSpec(
        job_id=f"j{int(time.time()) % 100000:05d}-{secrets.token_hex(3)}",
        cluster_id=rdv.cluster_id,
        attempt=rdv.attempt,
        command=command,
        env=variables,
        workdir_digest=digest,
        wheelhouse_digest=next(iter(by_arch.values()), None),
        wheelhouses=by_arch,
        submitted_at=time.time(),
        submitted_by=f"{getpass.getuser()}@{socket.gethostname()}",
    ).signed(key)
    rdv.submit_job(spec)
    with contextlib.suppress(OSError):  # a cluster without a watcher has no such dir
        (cluster_dir(rdv.cluster_id) / WATCH_POKE).touch()
    return cluster, spec


def _resolved(req: Path, python: str, arch: str, say: Callable[[str], None]) -> Path | None:
    began = time.monotonic()
    say(f"resolving {req} for the nodes (CPython {python}, {arch})")
    wheels = wheelhouse.resolve_file(req, python, arch, say)
    took = time.monotonic() - began
    if wheels is None:
        say(f"{req}: the image has every package already ({took:.1f} s)")
    else:
        say(f"{req}: {wheels.stat().st_size / 2**20:.1f} MiB of wheels ({took:.1f} s)")
    return wheels


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        while piece := fh.read(1 << 20):
            sha.update(piece)
    return sha.hexdigest()


def _store_wheels(rdv: Rendezvous, wheels: Path, say: Callable[[str], None]) -> str:
    """Store the wheelhouse file by its sha256 (once per cluster), streamed, after the
    limits that apply are checked; its digest."""
    size = wheels.stat().st_size
    digest = _file_digest(wheels)
    _check_limits(rdv, size, say)
    progress = _Progress(sealed_size(size, WHEELHOUSE_PURPOSE), say)
    if rdv.put_wheelhouse_file(digest, wheels, progress):
        progress.done()
    else:
        say(f"wheels {digest[:12]} are in the store already: nothing uploaded")
    return digest


def _check_limits(rdv: Rendezvous, size: int, say: Callable[[str], None]) -> None:
    """One line, before anything is uploaded, for wheels the store cannot take in one
    object or a node has no room for (about 3 times their packed size: the archive, its
    unpacked wheels, the installed tree), as the nodes last said."""
    mib = size / 2**20
    stored = sealed_size(size, WHEELHOUSE_PURPOSE)
    if rdv.max_object is not None and stored > rdv.max_object:
        raise ConfigError(
            f"the job's wheels are {mib:.0f} MiB, more than {rdv.uri} takes in one object "
            f"({rdv.max_object / 2**20:.0f} MiB): put large packages in the image "
            "(packer/apptainer/requirements.in)"
        )
    status = rdv.read_status()
    known = [r for r in map(rdv.read_ready, status.nodes_joined if status else []) if r]
    short = [r for r in known if r.free_bytes is not None and r.free_bytes < 3 * size]
    if short:
        free = short[0].free_bytes or 0
        raise ConfigError(
            f"the job's wheels are {mib:.0f} MiB and need about {3 * mib:.0f} MiB on each "
            f"node; rank {short[0].rank} has {free / 2**20:.0f} MiB free in its scratch"
        )
    if not any(r.free_bytes is not None for r in known):
        say("the nodes' free space is not known yet: each node checks it before it installs")


class _Progress:
    """Bytes sent and rate, said at most every 2 s and at the end."""

    def __init__(self, total: int, say: Callable[[str], None]) -> None:
        self.total, self.say, self.sent = total, say, 0
        self.began = self.last = time.monotonic()

    def __call__(self, n: int) -> None:
        self.sent += n
        if time.monotonic() - self.last >= 2.0:
            self.last = time.monotonic()
            self.say(f"uploading wheels: {self._figures()}")

    def _figures(self) -> str:
        took = max(time.monotonic() - self.began, 1e-3)
        return (
            f"{self.sent / 2**20:.1f} of {self.total / 2**20:.1f} MiB, "
            f"{self.sent / 2**20 / took:.1f} MiB/s"
        )

    def done(self) -> None:
        took = time.monotonic() - self.began
        self.say(f"wheels uploaded: {self._figures()}, {took:.1f} s")


def _job(cluster: Cluster, job_id: str) -> JobSpec:
    if not JOB_ID_RE.match(job_id):
        raise ConfigError(f"{job_id!r} is not a job id (see `syndeo jobs`)")
    rdv = cluster.rdv
    spec, _why = rdv.check_job_spec(job_id, cluster.key)
    if spec is None:
        raise ConfigError(f"no job {job_id} on cluster {rdv.cluster_id} (see `syndeo jobs`)")
    return spec


def list_jobs(cluster_id: str | None = None) -> tuple[Rendezvous, list[tuple[JobSpec, JobState]]]:
    rdv, key, _image, _archs = open_cluster(cluster_id)
    out = []
    for spec in rdv.list_jobs(key):
        state = rdv.read_job_state(spec.job_id) or JobState(
            job_id=spec.job_id, state=JobPhase.PENDING
        )
        out.append((spec, _shown(state) or state))
    return rdv, sorted(out, key=lambda pair: pair[0].submitted_at)


def plain(text: str) -> str:
    """``text`` without terminal control: escape sequences and control characters left
    out, but for newlines and tabs; a carriage return becomes a newline (a progress bar
    shows as one line per update, never as a line rewritten)."""
    return _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


class PlainText:
    """An ``emit`` that passes on the bytes of a job's output as :func:`plain` UTF-8
    text (anything not UTF-8 shown as U+FFFD).  Chunks are cut anywhere: a character or
    an escape sequence cut at a chunk's end waits for the next one; :meth:`close` passes
    on what is still held."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self.emit = emit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""

    def __call__(self, data: bytes) -> None:
        text = self._held + self._decoder.decode(data)
        cut = len(text)
        start = text.rfind("\x1b")
        if start >= 0 and len(text) - start <= _HELD_MAX and not _SEQUENCE.match(text, start):
            cut = start  # a sequence that may go on in the next chunk
        elif text.endswith("\r"):
            cut -= 1  # perhaps the first half of "\r\n"
        text, self._held = text[:cut], text[cut:]
        if text:
            self.emit(plain(text).encode())

    def close(self) -> None:
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        if text:
            self.emit(plain(text).encode())


def _shown(state: JobState | None) -> JobState | None:
    """A job's state as the store gave it, its words :func:`plain` (a state is not
    signed: whoever can write the prefix can write one)."""
    if state is None:
        return None
    words = {"job_id": state.job_id, "state": state.state, "message": state.message}
    return state.model_copy(update={k: plain(v) for k, v in words.items()})


def logs(
    job_id: str,
    emit: Callable[[bytes], None],
    *,
    cluster_id: str | None = None,
    follow: bool = False,
    cluster: Cluster | None = None,
) -> JobState | None:
    """Emit the job's output from the start, as :class:`PlainText`; with ``follow`` until
    it ends.  Its state, its words plain too."""
    cluster = cluster or open_cluster(cluster_id)
    _job(cluster, job_id)
    rdv = cluster.rdv
    seq, polls = 0, 0
    shown = PlainText(emit)
    try:
        while True:
            # The state first: output written before a terminal state is then all there.
            state = rdv.read_job_state(job_id)
            seq = rdv.read_job_output(job_id, seq, shown)
            if not follow or (state is not None and state.state in TERMINAL):
                return _shown(state)
            polls += 1
            if polls % 20 == 0 and rdv.read_done() is not None:
                # The cluster ended under the job (its head is gone): nothing more will come.
                raise TargetError(f"cluster {rdv.cluster_id} has ended; job {job_id} with it")
            time.sleep(FOLLOW_POLL_S)
    finally:
        shown.close()


def job_state(job_id: str, cluster: Cluster) -> JobState | None:
    """The job's state as its head last wrote it (None: not taken yet), its words plain."""
    _job(cluster, job_id)
    return _shown(cluster.rdv.read_job_state(job_id))


def cancel(job_id: str, cluster_id: str | None = None) -> JobState | None:
    cluster = open_cluster(cluster_id)
    _job(cluster, job_id)
    state = _shown(cluster.rdv.read_job_state(job_id))
    if state is not None and state.state in TERMINAL:
        return state
    cluster.rdv.request_cancel(job_id, cluster.key)
    return state


def fetch(job_id: str, dest: Path, cluster_id: str | None = None) -> list[Path]:
    """Unpack the files the job left in its ``outputs/`` into ``dest``; their paths."""
    cluster = open_cluster(cluster_id)
    _job(cluster, job_id)
    rdv = cluster.rdv
    state = rdv.read_job_state(job_id)
    if state is None or state.state not in TERMINAL:
        raise ConfigError(f"job {job_id} has not ended yet ({state.state if state else 'pending'})")
    try:
        data = rdv.get_job_outputs(job_id)
    except (BlobTooLarge, PayloadRefused) as exc:
        raise TargetError(f"the outputs of job {job_id} are not fetched: {exc}") from None
    if data is None:
        raise ConfigError(f"job {job_id} left no files in its outputs/ directory")
    private_dirs(dest)
    try:
        names = safe_extract(data, dest, MAX_OUTPUTS)
    except (UnsafeArchive, tarfile.TarError) as exc:
        raise TargetError(f"the outputs of job {job_id} cannot be unpacked: {exc}") from None
    return [dest / n for n in names]
