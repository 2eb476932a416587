"""invoke tasks for the emulated AWS; the project's tasks.py adds them as ``aws-emulator.*``.

sudo invoke aws-emulator.up --image .syndeo/image/syndeo-debootstrap.sif   # prints what to export
invoke deploy --target aws --nodes 3 --instance-type c7i.large --region us-east-1 --image ami-…
sudo invoke aws-emulator.down
"""

from __future__ import annotations

import shlex
from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.errors import SyndeoError
from syndeo.testbed import awsemu


@task(help={"image": "the node image (.sif) the emulated AMI stands for (`invoke build` makes it)"})
def emulator_up(c: Context, image: str = ".syndeo/image/syndeo-debootstrap.sif") -> None:
    """Start an emulated AWS on this machine (root): moto + one netns machine per instance."""
    try:
        state = awsemu.up(sif=Path(image))
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"emulated AWS up at {state.endpoint} (region {state.region}); export:")
    for k, v in state.env().items():
        print(f"export {k}={shlex.quote(v)}")
    print(f"# the baked image: --image {state.image_id}")


@task
def emulator_down(c: Context) -> None:
    """Power off every emulated instance and stop the emulated AWS (root)."""
    try:
        awsemu.down()
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print("emulated AWS down")
