"""A Ray program of the user's own, for the targets' end-to-end tests of ``deploy --run``
with a work dir: its own module and a package from its requirements.txt that
the image lacks (typer), imported by the driver and by tasks spread over the nodes, and
what each side saw."""

from __future__ import annotations

from pathlib import Path

PROGRAM = """\
import os, ray, mylib
ray.init()

@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def where():
    import time, mylib, typer
    time.sleep(1)
    node = ray.get_runtime_context().get_node_id()
    return node, mylib.__file__, os.getcwd(), typer.__file__

found = ray.get([where.remote() for _ in range(6)])
print("NODES", len({node for node, _, _, _ in found}))
print("DRIVER", os.getcwd(), mylib.__file__)
print("FILES", *sorted(os.listdir(".")))
for _, path, cwd, typer_file in found:
    print("TASK", path, cwd, typer_file)
print(mylib.GREETING)
"""


def spread(nodes: int, timeout_s: int = 240) -> str:
    """A program that needs ``nodes`` one-CPU nodes at once (a STRICT_SPREAD placement
    group of one-CPU bundles), so that on a smaller cluster Ray's autoscaler asks for
    more; a task in each bundle, then ``nodes used N``."""
    return f"""\
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as In

ray.init()
pg = placement_group([{{"CPU": 1}}] * {nodes}, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout={timeout_s})

@ray.remote(num_cpus=1)
def task():
    return ray.get_runtime_context().get_node_id()

where = [task.options(scheduling_strategy=In(pg, placement_group_bundle_index=i)).remote()
         for i in range({nodes})]
print("nodes used", len(set(ray.get(where))), flush=True)
ray.util.remove_placement_group(pg)
"""


def write_project(proj: Path) -> Path:
    """The program, its module, and a file its .syndeoignore keeps behind."""
    (proj / "mylib").mkdir(parents=True)
    (proj / "mylib" / "__init__.py").write_text("GREETING = 'hello from mylib'\n")
    (proj / "prog.py").write_text(PROGRAM)
    (proj / "big.dat").write_bytes(b"\0" * 4096)
    (proj / ".syndeoignore").write_text("*.dat\n")
    (proj / "requirements.txt").write_text("typer\n")  # not in the image
    return proj


def check_packed_run(stdout: str, proj: Path, nodes: int) -> None:
    """The program ran in the head's unpacked copy of ``proj`` (the ignore rules applied)
    and its tasks on at least ``nodes`` nodes, each in Ray's copy of it."""
    lines = stdout.splitlines()
    assert "hello from mylib" in lines, stdout[-2000:]
    assert int(next(ln for ln in lines if ln.startswith("NODES")).split()[1]) >= nodes
    driver = next(ln for ln in lines if ln.startswith("DRIVER")).split()
    tasks = [ln.split() for ln in lines if ln.startswith("TASK")]
    # The head's unpacked copy, and Ray's copies of it: never the launcher's directory.
    assert driver[1].endswith("/work") and driver[2] == driver[1] + "/mylib/__init__.py"
    assert len(tasks) == 6 and all(t[1].startswith(t[2] + "/") for t in tasks)
    # typer from the wheels each node installed before its Ray started.
    assert all("/pylib/typer/" in t[3] for t in tasks), tasks
    assert not any(str(proj) in ln for ln in lines), lines
    files = next(ln for ln in lines if ln.startswith("FILES")).split()[1:]
    assert files == [".syndeoignore", "mylib", "prog.py", "requirements.txt"]  # no *.dat
