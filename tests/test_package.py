"""Syndeo as a user gets it: a wheel and sdist built from a clean copy of the repository,
installed into a fresh virtualenv outside it, used from the user's own project directory.

The wheel carries what the commands read (terraform/, packer/ from the repository's root,
as syndeo/data/...; the Slurm templates and price catalog inside the package), found
through the installed package, and nothing is written into it while they run.  Built and
installed once per module (the install is most of the time: Ray and its dependencies,
from the pip configuration scripts/setup uses).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, assert_nothing_left, reap

pytestmark = pytest.mark.slow
MAPPED = ("terraform", "packer")  # at the root of the repository, syndeo/data/... in the wheel

PROGRAM = """\
import ray, typer
from helper import greeting

ray.init()

@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def where():
    import time
    time.sleep(0.5)
    return ray.get_runtime_context().get_node_id()

print("NODES", len(set(ray.get([where.remote() for _ in range(4)]))))
print("GREETING", greeting(), typer.__name__)
"""

# The same program through the Python API, as a script of the user's project.
API_SCRIPT = """\
import syndeo

with syndeo.up(target="local", nodes=2, cluster_id="pkg-api", join_timeout_s=240) as c:
    job = c.submit("python prog.py", workdir=".", requirements="requirements.txt")
    print(job.result(timeout=300).output)
"""


@dataclass(frozen=True)
class Built:
    src: Path  # the clean copy the build ran in
    wheel: Path
    sdist: Path


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    assert proc.returncode == 0, f"{argv[:4]}: {(proc.stdout + proc.stderr)[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``python -m build`` on the committed tree (git archive of HEAD): the sdist, then the
    wheel from the sdist, as a release makes them.  The backend is this venv's (scripts/
    setup installs what [build-system] requires): no package index is asked."""
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="tar")
    dist = tmp / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)])
    [wheel] = dist.glob("syndeo-*.whl")
    [sdist] = dist.glob("syndeo-*.tar.gz")
    return Built(src, wheel, sdist)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the clone with the wheel installed as a user of the
    clouds installs it (the cloud targets' extras): its bin/."""
    where = tmp_path_factory.mktemp("user") / "venv"
    _run([sys.executable, "-m", "venv", str(where)])
    # No byte-compiling of the ~7,000 modules installed (a third of the install's CPU time
    # here): Python compiles what a command imports, the first time it imports it.
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    _run([*pip, f"{built.wheel}[cloud,iac]"])
    return where / "bin"


def _tracked(src: Path, top: str) -> dict[str, tuple[bytes, bool]]:
    """The files of ``top`` in the clean copy (a git archive holds only tracked files),
    and whether each is executable (Terraform runs some: terraform/ssh/on-host.sh)."""
    return {
        str(p.relative_to(src / top)): (p.read_bytes(), os.access(p, os.X_OK))
        for p in sorted((src / top).rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_the_wheel_and_sdist_carry_the_root_directories_as_they_are(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as whl:
        names = set(whl.namelist())
        for top in MAPPED:
            prefix = f"syndeo/data/{top}/"
            inside = {
                n[len(prefix) :]: (whl.read(n), bool(whl.getinfo(n).external_attr >> 16 & 0o111))
                for n in names
                if n.startswith(prefix)
            }
            assert inside == _tracked(built.src, top), f"{top}/ in the wheel differs"
        # The package's own data files travel too (what check, compare and Slurm read).
        for name in (
            "syndeo/launcher/targets/slurm/templates/job.sbatch.j2",
            "syndeo/data/prices/aws.csv",
            "syndeo/compare/templates/compare.md.j2",
            "syndeo/py.typed",
        ):
            assert name in names, name
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        version = tomllib.loads((built.src / "pyproject.toml").read_text())["project"]["version"]
        assert f"\nVersion: {version}\n" in whl.read(meta).decode()
    with tarfile.open(built.sdist) as sdist:
        tops = {n.split("/", 2)[1] for n in sdist.getnames() if n.count("/") >= 2}
    assert {"syndeo", "terraform", "packer", "slurm"} <= tops, tops


def _snapshot(pkg: Path) -> dict[str, tuple[int, int]]:
    """Every file of the installed package but byte code, with its size and mtime."""
    return {
        str(p.relative_to(pkg)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in pkg.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _user(tmp: Path, venv: Path) -> dict[str, str]:
    """The user's environment: the venv's commands first, no cloud login, their own home."""
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_", "ALIBABA_", "ALICLOUD_", "SYNDEO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.pop("PYTHONPATH", None)
    env.update(
        PATH=f"{venv}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv.parent),
        HOME=str(tmp / "home"),
        SYNDEO_HOME=str(tmp / "home" / ".syndeo"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def _project(tmp: Path) -> Path:
    """The user's own project: a program, a module of it, a package from requirements.txt
    (typer: in neither the wheel's dependencies nor the venv)."""
    proj = tmp / "myproject"
    proj.mkdir()
    (tmp / "home").mkdir()
    (proj / "prog.py").write_text(PROGRAM)
    (proj / "helper.py").write_text("def greeting() -> str:\n    return 'hello-from-helper'\n")
    (proj / "requirements.txt").write_text("typer\n")
    return proj


def _in(proj: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """A command run from the user's project directory, in the user's environment."""
    return subprocess.run(
        argv,
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
        check=False,
    )


def _installed(proj: Path, env: dict[str, str], venv: Path) -> Path:
    """Where the venv's python imports syndeo from: the installed package, not the clone."""
    where = _in(proj, env, str(venv / "python"), "-c", "import syndeo; print(syndeo.__file__)")
    site = Path(where.stdout.strip()).parent
    assert site.is_relative_to(venv.parent), where
    return site


@pytest.mark.cluster
def test_a_user_project_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    proj = _project(tmp_path)
    env = _user(tmp_path, venv)

    def syndeo(*args: str) -> subprocess.CompletedProcess[str]:
        return _in(proj, env, str(venv / "syndeo"), *args)

    site = _installed(proj, env, venv)
    before = _snapshot(site)
    ran = syndeo("deploy", "--target", "local", "--nodes", "2", "--run", "python prog.py")
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    assert "NODES 2" in ran.stdout and "GREETING hello-from-helper typer" in ran.stdout

    aws = ["--instance-type", "c7i.2xlarge", "--region", "us-east-1", "--image", "ami-0abc"]
    dry = syndeo("deploy", "--target", "aws", "--nodes", "2", *aws, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert f"from {site / 'data' / 'terraform' / 'aws' / 'deploy'}" in dry.stdout

    # No Slurm here: the check may fail for that, never for a file the package lacks.
    check = syndeo("check", "--target", "slurm")
    said = check.stdout + check.stderr
    assert "Traceback" not in said, said[-3000:]
    for missing in ("missing from the syndeo package", "not found at", "No such file"):
        assert missing not in said, said[-3000:]

    assert _snapshot(site) == before, "a command wrote into the installed package"


@pytest.mark.cluster
def test_the_python_api_runs_a_user_project_from_the_installed_wheel(
    venv: Path, tmp_path: Path
) -> None:
    """``with syndeo.up(...)``, ``submit``, ``result()`` in a script of the user's project,
    with the installed wheel: the program's output comes back, and leaving the block
    stopped everything the cluster started."""
    proj = _project(tmp_path)
    (proj / "run_api.py").write_text(API_SCRIPT)
    env = _user(tmp_path, venv)
    site = _installed(proj, env, venv)
    before = _snapshot(site)
    try:
        ran = _in(proj, env, str(venv / "python"), "run_api.py")
        assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
        assert "NODES 2" in ran.stdout and "GREETING hello-from-helper typer" in ran.stdout
        assert_nothing_left("pkg-api")
        gone = _in(proj, env, str(venv / "syndeo"), "status", "--cluster-id", "pkg-api")
        assert gone.returncode != 0 and "pkg-api" in gone.stderr, gone.stdout + gone.stderr
    finally:
        reap("pkg-api")
    assert _snapshot(site) == before, "the API wrote into the installed package"


def test_pipx_installs_the_wheel_as_a_command_of_its_own(built: Built, tmp_path: Path) -> None:
    """``pipx install`` of the wheel: ``syndeo`` in a venv of its own, on the user's PATH,
    finding its files in the package."""
    tmp_path.joinpath("home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNDEO_", "PYTHONPATH"))}
    env.update(
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"),
        SYNDEO_HOME=str(tmp_path / "home" / ".syndeo"),
    )
    pipx = [sys.executable, "-m", "pipx"]
    got = _in(tmp_path, env, *pipx, "install", str(built.wheel))
    assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
    syndeo = tmp_path / "bin" / "syndeo"
    version = tomllib.loads((built.src / "pyproject.toml").read_text())["project"]["version"]
    said = _in(tmp_path / "home", env, str(syndeo), "--version")
    assert said.returncode == 0 and version in said.stdout, said.stdout + said.stderr
    check = _in(tmp_path / "home", env, str(syndeo), "check", "--target", "slurm")
    out = check.stdout + check.stderr
    assert "Traceback" not in out and "missing from the syndeo package" not in out, out[-3000:]
    assert (tmp_path / "pipx" / "venvs" / "syndeo").is_dir()
