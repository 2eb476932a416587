"""invoke front end in the repository: the user verbs of ``syndeo`` and the project's own
tasks (docs, test beds, its benchmarks).

invoke deploy --target local --nodes 3        # cluster up, benchmark, results, teardown
invoke deploy --run "python train.py"         # your own Ray program instead
invoke up / invoke down                        # a long-lived cluster
"""

from __future__ import annotations

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from benchmarks.tasks import bench_bringup, bench_rendezvous
from syndeo.cli import image_tasks, slurm_tasks
from syndeo.cli.verb_tasks import number, verb_tasks
from testbeds import tasks as testbed_tasks


@task(
    help={
        "port": "port on 127.0.0.1 to serve the site on (default 8000)",
        "out": "build the site into this directory instead of serving it",
    },
    auto_shortflags=False,
)
def docs(c: Context, port: int = 8000, out: str | None = None) -> None:
    """Serve this documentation site (docs/, mkdocs.yml) locally, rebuilt on every change."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent
    mkdocs = [sys.executable, "-m", "mkdocs"]
    if out is not None:
        cmd = [*mkdocs, "build", "--strict", "--site-dir", str(Path(out).resolve())]
    else:
        address = f"127.0.0.1:{number(int, '--port', port)}"
        cmd = [*mkdocs, "serve", "--strict", "--dev-addr", address]
    try:
        rc = subprocess.call(cmd, cwd=root)
    except KeyboardInterrupt:
        rc = 0
    if rc != 0:
        raise Exit(f"syndeo: error: mkdocs exited with status {rc}", code=rc)


# Every user verb (deploy, up, submit, bench, build, ...), made from its one declaration in
# syndeo/cli/commands.py: the same verbs and options as the `syndeo` command.
_verbs = verb_tasks()
ns = Collection(*_verbs.values(), bench_bringup, bench_rendezvous)
ns.add_task(docs)
ns.add_collection(Collection("image", _verbs["build"], image_tasks.verify))
_slurm = Collection("slurm")
_slurm.add_task(slurm_tasks.slurm_cancel, name="cancel")  # type: ignore[arg-type]
# the local test cluster (testbeds/): up, down, and status (its nodes, then your jobs)
_slurm.add_task(testbed_tasks.slurm_up, name="up")
_slurm.add_task(testbed_tasks.slurm_down, name="down")  # type: ignore[arg-type]
_slurm.add_task(testbed_tasks.slurm_status, name="status")  # type: ignore[arg-type]
ns.add_collection(_slurm)
_aws_emulator = Collection("aws-emulator")
_aws_emulator.add_task(testbed_tasks.emulator_up, name="up")
_aws_emulator.add_task(testbed_tasks.emulator_down, name="down")  # type: ignore[arg-type]
ns.add_collection(_aws_emulator)
