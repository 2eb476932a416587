"""`syndeo build --syndeo-wheel`: an installed syndeo has no source tree to build the
image's syndeo wheel from, so it is given the wheel it was installed from.  The wheel is
checked (a syndeo wheel, of the version that runs), staged where the definition installs
from, and counted in the image's inputs."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from syndeo.core.errors import ImageError
from syndeo.image import build, inputs, manifest

VERSION = importlib.metadata.version("syndeo")


def _wheel(where: Path, version: str = VERSION, content: bytes = b"wheel") -> Path:
    path = where / f"syndeo-{version}-py3-none-any.whl"
    path.write_bytes(content)
    return path


def test_a_wheel_of_another_version_is_refused(tmp_path: Path) -> None:
    other = _wheel(tmp_path, "0.0.1")
    with pytest.raises(ImageError, match=f"is syndeo 0.0.1, but this is syndeo {VERSION}"):
        build.build("debootstrap", tmp_path / "x.sif", syndeo_wheel=other)


@pytest.mark.parametrize("name", ["ray-2.60.0-py3-none-any.whl", "syndeo.tar.gz", "missing"])
def test_what_is_not_a_syndeo_wheel_is_refused(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    if name != "missing":
        path.write_bytes(b"x")
    with pytest.raises(ImageError, match=r"not a syndeo wheel|not found") as err:
        build.build("debootstrap", tmp_path / "x.sif", syndeo_wheel=path)
    assert "\n" not in str(err.value)


def test_without_a_source_tree_the_error_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="--syndeo-wheel") as err:
        build.build("debootstrap", tmp_path / "x.sif", repo=tmp_path)
    assert "\n" not in str(err.value)


def test_the_wheel_is_counted_in_the_image_inputs(tmp_path: Path) -> None:
    definition = inputs.definition_path("debootstrap")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _wheel(tmp_path / "a")
    other = _wheel(tmp_path / "b", content=b"2")
    digests = {
        inputs.inputs_digest(definition, inputs.REPO, None, {}),
        inputs.inputs_digest(definition, inputs.REPO, None, {}, one),
        inputs.inputs_digest(definition, inputs.REPO, None, {}, other),
    }
    assert len(digests) == 3
    # Where the wheel lies does not count, only its name and bytes.
    moved = _wheel(tmp_path)
    assert inputs.inputs_digest(definition, inputs.REPO, None, {}, one) == inputs.inputs_digest(
        definition, inputs.REPO, None, {}, moved
    )


@pytest.mark.apptainer
@pytest.mark.slow
def test_the_image_gets_the_wheel_given(sif: Path, run_user: str | None, tmp_path: Path) -> None:
    """A real build from the test image (a definition that only records which syndeo
    wheel was staged for it): the given wheel is the one, and a second build with it is
    a no-op."""
    quick = tmp_path / "quick.def"
    quick.write_text(
        f"Bootstrap: localimage\nFrom: {sif}\n\n%files\n    {{{{ CONTEXT }}}} /opt/syndeo-build\n\n"
        "%post\n    ls /opt/syndeo-build/wheelhouse | grep '^syndeo-' > /opt/syndeo-wheel\n"
        "    rm -rf /opt/syndeo-build\n"
    )
    wheel = _wheel(tmp_path, content=b"the wheel a user installed")
    # Where the user the containers run as can read the SIF (tmp_path is root's alone).
    where = Path(tempfile.mkdtemp(prefix="syndeo-test-from-wheel-", dir="/var/tmp"))
    try:
        where.chmod(0o755)
        out = where / "from-wheel.sif"
        made = build.build(
            "debootstrap", out, definition=quick, use_packer=False, syndeo_wheel=wheel
        )
        argv = ["apptainer", "exec", "--containall", "--cleanenv", str(out)]
        argv += ["cat", "/opt/syndeo-wheel"]
        if run_user:
            argv = ["runuser", "-u", run_user, "--", *argv]
        staged = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
        assert staged.stdout.split() == [wheel.name]
        assert made.inputs_sha256 == inputs.inputs_digest(quick, inputs.REPO, None, {}, wheel)
        again = build.build(
            "debootstrap", out, definition=quick, use_packer=False, syndeo_wheel=wheel
        )
        assert again.built_at == made.built_at and manifest.verify_sif(out) == again
    finally:
        shutil.rmtree(where, ignore_errors=True)
