"""Wheels per architecture: a group of aarch64 machines (``arch = "aarch64"``, or an AWS
Arm instance type) gets aarch64 wheels; a package with no wheel for one of the
cluster's architectures is refused in one line naming it.  No network: pip reads a
links directory of this test's (its own configuration on the launcher)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.core.groups import GroupConfig, build_layout, implied_arch
from syndeo.launcher import wheelhouse
from tests.support.wheels import wheel


@pytest.mark.parametrize(
    ("instance_type", "arch"),
    [
        ("m7g.large", "aarch64"),
        ("c6gn.xlarge", "aarch64"),
        ("t4g.micro", "aarch64"),
        ("a1.medium", "aarch64"),
        ("g5g.xlarge", "aarch64"),
        ("g4dn.xlarge", "x86_64"),
        ("m5.large", "x86_64"),
        ("c7i.2xlarge", "x86_64"),
        ("", "x86_64"),
    ],
)
def test_an_aws_instance_type_implies_the_architecture(instance_type: str, arch: str) -> None:
    assert implied_arch({"instance_type": instance_type} if instance_type else {}) == arch


def test_a_group_has_the_arch_it_says_or_its_instance_type_implies() -> None:
    groups = [
        GroupConfig(name="arm", aws={"instance_type": "c7g.large"}),
        GroupConfig(name="pi", arch="aarch64"),
        GroupConfig(name="cpu"),
    ]
    layout = build_layout(groups, head="own", cpus=1, gpus=0, memory_mb=None, container=None)
    assert {g.name: g.arch for g in layout.groups} == {
        "head": "x86_64",
        "arm": "aarch64",
        "pi": "aarch64",
        "cpu": "x86_64",
    }
    with pytest.raises(ValueError, match="arch"):
        GroupConfig(name="bad", arch="sparc")  # type: ignore[arg-type]


def test_wheels_are_resolved_per_architecture(
    tmp_path: Path, syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    name, data = wheel("purepkg")
    (links / name).write_bytes(data)
    _, native = wheel("nativepkg")
    (links / "nativepkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(native)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    pure = tmp_path / "pure.txt"
    pure.write_text("purepkg\n")
    x86 = wheelhouse.resolve_file(pure, "3.11", "x86_64")
    arm = wheelhouse.resolve_file(pure, "3.11", "aarch64")
    assert x86 is not None and arm is not None and x86 != arm  # one per architecture
    assert wheelhouse.cache_key(pure, "3.11", "aarch64") != wheelhouse.cache_key(pure, "3.11")
    both = tmp_path / "native.txt"
    both.write_text("nativepkg\n")
    assert wheelhouse.resolve_file(both, "3.11", "x86_64") is not None
    with pytest.raises(ConfigError) as exc:
        wheelhouse.resolve_file(both, "3.11", "aarch64")
    assert str(exc.value) == (
        f"--requirements {both}: no wheel of nativepkg for the nodes (CPython 3.11, Linux "
        "aarch64): binary wheels only, since nodes never build or reach an index"
    )
