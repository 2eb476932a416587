"""Bad input to ``deploy --target aws``: one line, a non-zero exit, and nothing created
in the (emulated) cloud -- found by asking AWS before Terraform runs."""

from __future__ import annotations

import pytest

from tests.aws.conftest import AwsUser
from tests.aws.leaks import everything

pytestmark = [pytest.mark.aws]


def _refused(aws_user: AwsUser, *args: str, env: dict[str, str] | None = None) -> str:
    argv = aws_user.argv("deploy", *args)
    if env is not None:  # a shell with other variables than the emulator's
        i = argv.index("-i") + 1
        argv = [
            *argv[:i],
            *(f"{k}={v}" for k, v in env.items()),
            *[a for a in argv[i:] if not a.startswith("AWS_")],
        ]
    import subprocess

    res = subprocess.run(
        argv, capture_output=True, text=True, cwd=aws_user.root, timeout=120, check=False
    )
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("syndeo: error: aws: "), res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert everything(aws_user.state) == []
    # Nothing for `down` to find either: the launch never started.
    assert not list((aws_user.home / "clusters").glob("*/launched.json"))
    return lines[0]


def test_an_image_that_does_not_exist(aws_user: AwsUser) -> None:
    args = aws_user.machine("--nodes", "2")
    args[args.index("--image") + 1] = "ami-0123456789abcdef0"
    line = _refused(aws_user, *args)
    assert "image ami-0123456789abcdef0 does not exist in us-east-1" in line
    assert "copy-image" in line  # and how to get it there


def test_an_instance_type_the_region_does_not_offer(aws_user: AwsUser) -> None:
    args = aws_user.machine("--nodes", "2")
    args[args.index("--instance-type") + 1] = "c7i.9000xlarge"
    line = _refused(aws_user, *args)
    assert "instance type c7i.9000xlarge is not offered in us-east-1" in line


def test_no_credentials(aws_user: AwsUser) -> None:
    env = {
        k: v
        for k, v in aws_user.env.items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    # No instance metadata to fall back on here (this machine is no EC2 instance).
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    line = _refused(aws_user, *aws_user.machine("--nodes", "2"), env=env)
    assert "no AWS credentials found" in line


def test_credentials_aws_refuses(aws_user: AwsUser) -> None:
    env = {**aws_user.env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    line = _refused(aws_user, *aws_user.machine("--nodes", "2"), env=env)
    assert "the credentials found are not accepted" in line
