"""Small real packages for pip, made on the spot: a pure-Python wheel, a wheelhouse archive
of it, and a source package whose setup.py leaves a mark when anything builds it."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path


def wheel(name: str) -> tuple[str, bytes]:
    """The file name and bytes of a pure-Python wheel, version 1.0, of one module ``name``."""
    dist = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": b"IMPORTED = True\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return f"{name}-1.0-py3-none-any.whl", buf.getvalue()


def wheelhouse(name: str) -> bytes:
    """A wheelhouse archive (.tar.gz, as the launcher stores one) holding :func:`wheel`."""
    filename, data = wheel(name)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(filename)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def marking_sdist(where: Path, name: str, marker: Path) -> Path:
    """A source package ``name`` 1.0 in ``where`` whose setup.py writes ``marker``."""
    setup = (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('setup.py ran')\n"
        f"from setuptools import setup\nsetup(name={name!r}, version='1.0', py_modules=[])\n"
    )
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(f"{name}-1.0/setup.py")
        info.size = len(setup.encode())
        tar.addfile(info, io.BytesIO(setup.encode()))
    return path


def plant_pip(where: Path, marker: Path) -> None:
    """A ``pip`` package and a ``sitecustomize`` in ``where`` that write ``marker`` when
    imported: what a task could leave in a directory it can write."""
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text(__name__)\n"
    (where / "pip").mkdir(parents=True)
    (where / "pip" / "__init__.py").write_text(code)
    (where / "pip" / "__main__.py").write_text(code)
    (where / "sitecustomize.py").write_text(code)


def big_wheel(where: Path, name: str, mib: int) -> Path:
    """A wheel ``name`` 1.0 in ``where`` holding ``mib`` MiB of random bytes (nothing to
    compress: as large packed as installed), written chunk by chunk."""
    dist = f"{name}-1.0.dist-info"
    small = {
        f"{name}/__init__.py": b"import os\nBLOB = os.path.join(os.path.dirname(__file__), "
        b"'blob.bin')\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}-1.0-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for member, data in small.items():
            zf.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        sha = hashlib.sha256()
        with zf.open(f"{name}/blob.bin", "w", force_zip64=True) as out:
            for _ in range(mib):
                chunk = os.urandom(2**20)
                sha.update(chunk)
                out.write(chunk)
        digest = base64.urlsafe_b64encode(sha.digest()).rstrip(b"=")
        record.append(f"{name}/blob.bin,sha256={digest.decode()},{mib * 2**20}")
        zf.writestr(f"{dist}/RECORD", "\n".join([*record, f"{dist}/RECORD,,"]) + "\n")
    return path
