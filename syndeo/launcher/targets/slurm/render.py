"""Render the sbatch script from typed settings (Jinja2 template ``templates/job.sbatch.j2``).

The per-node command comes from :func:`syndeo.launcher.command.node_command`, the same
function every target uses.  Values only known on the node at run time (rank, IP,
scratch, attempt) are passed to it as placeholders and rendered as shell variable
references, so the container launch line is exactly what the other targets run.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

from syndeo import __version__
from syndeo.core import gpus
from syndeo.launcher import command
from syndeo.launcher.targets.slurm.settings import JobShape, SlurmSettings, check_job_dir
from syndeo.rendezvous import gstoken

# Set per node by the script; everything else is the same on every node.
RUNTIME_VARS = ("SYNDEO_RANK", "SYNDEO_NODE_IP", "SYNDEO_SCRATCH", "SYNDEO_ATTEMPT")
_SENTINEL = "@@{}@@"
_SENTINEL_RE = re.compile(r"@@([A-Z_][A-Z0-9_]*)@@")


class SlurmJob(BaseModel):
    """Everything the template needs; built by the target from the deploy config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_id: str
    settings: SlurmSettings
    shape: JobShape
    node_env: dict[str, str]  # static SYNDEO_* variables (same on every node)
    # Secrets the job reads from a 0600 file beside its script (secrets_path: the launch
    # key, credentials made for it): node_env names them as @@NAME@@ references, so the
    # script never holds their values, nor sbatch's environment (Slurm may store it).
    secret_env: dict[str, str] = Field(default={}, repr=False)
    # The launcher's own variables sbatch must not pass on (--export=ALL passes all):
    # its credentials, when the job gets credentials made for it in secret_env.
    unset_env: list[str] = []
    image: Path | None = None
    job_dir: Path  # shared: script, log, rank-0 exit status
    binds: list[Path] = []
    # Node groups: one job per group; the first group's job holds rank 0 (the head).
    group: str | None = None
    rank_base: int = 0  # the rank of this job's first task
    head_job: bool = True
    # The rendezvous attempt of the job's first run (the launcher's; see ClusterSpec.attempt):
    # the node's attempt is this plus Slurm's requeue count.
    attempt_base: int = 0


def shell_word(value: str) -> str:
    """Quote ``value`` for bash; ``@@NAME@@`` placeholders become ``${NAME}`` references."""
    if not _SENTINEL_RE.search(value):
        return shlex.quote(value)
    out = []
    pos = 0
    for m in _SENTINEL_RE.finditer(value):
        out.append(_dq(value[pos : m.start()]))
        out.append("${" + m.group(1) + "}")
        pos = m.end()
    out.append(_dq(value[pos:]))
    return '"' + "".join(out) + '"'


def _dq(text: str) -> str:
    # Inside double quotes only these four are special.
    for ch in ("\\", '"', "$", "`"):
        text = text.replace(ch, "\\" + ch)
    return text


# In the job dir: where a workload saves what it needs to continue after a time limit
# or a preemption (kept across requeues), the one part of it a node's container may write.
CHECKPOINT_DIR = "checkpoint"


def task_scratch(settings: SlurmSettings) -> Path:
    """One task's scratch dir, with Slurm's per-task values as ``@@NAME@@`` references."""
    return settings.scratch_dir / "sy-@@SLURM_JOB_ID@@-@@SLURM_PROCID@@"


def node_command_line(job: SlurmJob) -> tuple[str, list[tuple[str, str]]]:
    """(the shell line that runs ``syndeo node``, extra exports the launch method needs)."""
    env = {**job.node_env, **{k: _SENTINEL.format(k) for k in RUNTIME_VARS}}
    # The container sees its own task's scratch (never the base, where other jobs' and
    # users' are), the checkpoint dir (the workload's to write) and, read-only, the files
    # the launcher leaves for the nodes -- never the job dir itself: it holds the secrets
    # file and what the launcher reads back (exit codes).
    binds = [task_scratch(job.settings), job.job_dir / CHECKPOINT_DIR, *job.binds]
    token = job.node_env.get(gstoken.FILE_VAR)
    read_only = [Path(token).parent] if token else []
    argv, proc_env = command.node_command(job.image, env, binds, read_only=read_only)
    if job.image is None and job.settings.python:
        argv = [job.settings.python, *argv[1:]]
    extra = [
        (k, shell_word(v))
        for k, v in sorted(proc_env.items())
        if _exported_by_launcher(k, v, env) and k.isidentifier()
    ]
    return " ".join(shell_word(a) for a in argv), extra


def _exported_by_launcher(key: str, value: str, env: Mapping[str, str]) -> bool:
    """True for variables the launch method adds (e.g. APPTAINERENV_*), not inherited ones."""
    if env.get(key) == value:
        return False  # already exported by the script under the same name
    return os.environ.get(key) != value


def _gpu_args(job: SlurmJob) -> list[str]:
    g = job.shape.gpus_per_node
    if not g:
        return []
    s = job.settings
    count = f"{s.gpu_type}:{g}" if s.gpu_type else str(g)  # typed: gpu:a100:2
    if s.gpu_request == "gres":
        return [f"--gres={s.gres_name}:{count}"]
    return [f"--{s.gpu_request}={count}"]  # one task per node: per node = per task


def templates() -> Environment:
    """The job script's Jinja2 template: undefined names are errors."""
    return Environment(
        loader=PackageLoader("syndeo.launcher.targets.slurm", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # a shell script, not HTML; values are shell-quoted explicitly
    )


def script_name(job: SlurmJob) -> str:
    """The file name of the job's script in its job dir (a copy for the user)."""
    if job.group is None:
        return "job.sbatch" if job.head_job else f"job-r{job.rank_base}.sbatch"
    return f"job-{job.group}-r{job.rank_base}.sbatch"


def secrets_path(job: SlurmJob) -> Path:
    """Where the job reads its secrets (``secret_env``): a 0600 file beside its script,
    not sbatch's environment, which a site may store with the job for good
    (``AccountingStoreFlags=job_env``)."""
    return job.job_dir / (script_name(job) + ".secrets")


def secrets_text(job: SlurmJob) -> str:
    """``secret_env`` as the script reads it: NAME=value lines."""
    for k, v in job.secret_env.items():
        if not k.isidentifier() or "\n" in v or "\r" in v:
            raise ValueError(f"secret {k!r} cannot be passed in a file of lines")
    return "".join(f"{k}={v}\n" for k, v in sorted(job.secret_env.items()))


def render(job: SlurmJob) -> str:
    # The configured job dir was checked with the settings; this one may come from
    # SYNDEO_HOME.  Checked here too, so no job dir reaches an #SBATCH line unchecked.
    check_job_dir(job.job_dir)
    line, task_env = node_command_line(job)
    gpu = _gpu_args(job)
    srun_extra = "".join(f" {a}" for a in gpu)
    if job.settings.tolerate_node_loss:
        srun_extra += " --no-kill"
    srun_extra += "".join(f" {shlex.quote(a)}" for a in job.settings.extra_srun)
    static_env = [(k, shell_word(v)) for k, v in sorted(job.node_env.items())]
    gpu_vendor = gpus.vendor(job.node_env.get("SYNDEO_GPU_VENDOR") or None)
    return (
        templates()
        .get_template("job.sbatch.j2")
        .render(
            version=__version__,
            cluster_id=job.cluster_id,
            s=job.settings,
            shape=job.shape,
            gpu_args=gpu,
            job_dir=job.job_dir,
            job_dir_q=shell_word(str(job.job_dir)),
            # One shell word with Slurm's per-task values spliced in as references.
            scratch_word=shell_word(str(task_scratch(job.settings))),
            checkpoint_dir=CHECKPOINT_DIR,
            static_env=static_env,
            task_env=task_env,
            node_argv=line,
            srun_extra=srun_extra,
            group=job.group,
            rank_base=job.rank_base,
            head_job=job.head_job,
            attempt_base=job.attempt_base,
            # What a GPU job's container must be given by name (its vendor's variables).
            gpu_vars=gpu_vendor.passed if job.image is not None and job.shape.gpus_per_node else (),
            gpu_flag=gpu_vendor.apptainer_flag,
            image=job.image is not None,
            # No limit, no warning.
            warn_s=job.settings.signal_before if job.settings.time_limit_s() else None,
            secrets=shell_word(str(secrets_path(job))) if job.secret_env else "",
            secret_names="|".join(sorted(job.secret_env)),
        )
    )


def default_python() -> str:
    return sys.executable
