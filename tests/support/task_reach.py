"""What a task can reach: run *inside* a task of a real cluster (standard library only, so
a test copies this file into the program's work dir beside the program that imports it).

``secrets_seen(names)``: every process the task can see (``/proc/<pid>``), its environ
and command line, searched for each secret's name in both forms a process may hold it
in -- ``NAME=value`` (an environment) and ``"NAME":"value"`` (JSON, as Apptainer's init
shim keeps the container's environment in its ``ENGINE_CONFIG``) -- and, where the test
knows them, for the secret values themselves.

``access(paths)``: for each path, what the task may do there: "absent" (not in its view of
the file system), "denied", "readable" or "writable".
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def _sources(pid: str) -> list[tuple[str, bytes]]:
    out = []
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                out.append((what, fh.read()))
        except OSError:
            continue  # gone, or not ours to read (a process that is not dumpable)
    return out


def secrets_seen(names: Sequence[str], values: Sequence[str] = ()) -> list[str]:
    """``pid/what: name`` for each secret found in a process this task can read."""
    found = []
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for what, data in _sources(pid):
            for name in names:
                if f"{name}=".encode() in data or f'"{name}":'.encode() in data:
                    found.append(f"{pid}/{what}: {name}{' (this task)' if pid == me else ''}")
            for i, value in enumerate(v for v in values if v):
                if value.encode() in data:
                    found.append(f"{pid}/{what}: the value of secret #{i}")
    return found


def access(paths: Sequence[str]) -> dict[str, str]:
    out = {}
    for path in paths:
        if not os.path.lexists(path):
            out[path] = "absent"
        elif os.access(path, os.W_OK):
            out[path] = "writable"
        elif os.access(path, os.R_OK):
            out[path] = "readable"
        else:
            out[path] = "denied"
    return out


# Every secret a node may be given, by name: the launch key, and the store credentials
# a launcher passes (made for the cluster, or forwarded).
SECRET_NAMES = [
    "SYNDEO_LAUNCH_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "SYNDEO_GCS_TOKEN",
    "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
]


def reach_spec(paths: Sequence[str], values: Sequence[str] = ()) -> dict[str, object]:
    """What a test writes to reach.json beside the probe: names, values and paths."""
    return {"names": SECRET_NAMES, "values": list(values), "paths": list(paths)}
