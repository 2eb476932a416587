"""syndeo.core.securedir as one user sees it (no second user needed; the cross-user
cases are tests/node/test_scratch_ownership.py, as root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syndeo.core.errors import InsecurePath
from syndeo.core.securedir import secure_dir


def test_secure_dir_creates_private_levels_and_accepts_them_again(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    path = secure_dir(base / "a" / "b" / "c", base=base)
    for level in (base / "a", base / "a" / "b", path):
        assert level.is_dir() and (level.stat().st_mode & 0o777) == 0o700
    assert secure_dir(path, base=base) == path  # ours and private: accepted
    (base / "link").symlink_to(path)
    with pytest.raises(InsecurePath, match="symlink"):
        secure_dir(base / "link" / "d", base=base)
