"""What a client without the cluster's token gets on each port a node opened.

Every TCP port the node's processes listen on is probed twice, without and with
``Authorization: Bearer <token>``: first as HTTP/1.1, and if the port does not
speak HTTP/1.1, as gRPC (an unknown method: an authenticating server refuses the
call before it looks the method up, so ``UNAUTHENTICATED`` without the token and
anything else with it shows the port checks tokens).
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass

import grpc
import psutil

# Read-only methods of Ray's gRPC services (one per service a node runs); a server
# answers UNIMPLEMENTED for methods it does not serve, so each port is tried with
# all of them until one is served.
PROBE_METHODS = (
    "/ray.rpc.NodeInfoGcsService/GetClusterId",
    "/ray.rpc.NodeManagerService/GetResourceLoad",
    "/ray.rpc.CoreWorkerService/NumPendingTasks",
    "/ray.rpc.RayletDriver/ClusterInfo",
    "/ray.rpc.LogService/ListLogs",
    "/ray.rpc.ReporterService/ReportOCMetrics",
    "/ray.rpc.events.EventAggregatorService/AddEvents",
    # The raylet's object manager port has no read-only method, and an empty Pull
    # with a valid token could trip a check in the raylet: probed without a token only.
    "/ray.rpc.ObjectManagerService/Pull",
)
NO_TOKEN_ONLY = {"/ray.rpc.ObjectManagerService/Pull"}
NOT_PROBED = "not probed with the token"


@dataclass
class Answer:
    port: int
    ip: str
    owner: str
    protocol: str  # "http", "grpc" or "none"
    without_token: str
    with_token: str


def listening_ports(procs: list[psutil.Process]) -> dict[tuple[str, int], str]:
    """(ip, port) -> process name, for every TCP listener of ``procs``."""
    out: dict[tuple[str, int], str] = {}
    for p in procs:
        try:
            conns = p.net_connections(kind="tcp")
            name = " ".join(p.cmdline()[:3])[-80:]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN and c.laddr:
                out[(c.laddr.ip, c.laddr.port)] = name
    return out


def _http(ip: str, port: int, token: str | None) -> str | None:
    conn = http.client.HTTPConnection(ip, port, timeout=5)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", "/api/version", headers=headers)
        resp = conn.getresponse()
        body = resp.read(200)
        # A Prometheus exporter answers every path with metrics text.
        kind = " metrics" if body.startswith((b"# HELP", b"# TYPE")) else ""
        return f"{resp.status}{kind}"
    except (http.client.HTTPException, ConnectionError, TimeoutError, OSError):
        return None  # not HTTP/1.1 (an HTTP/2-only gRPC server drops the request)
    finally:
        conn.close()


def _grpc(ip: str, port: int, token: str | None) -> str:
    """The first answer other than UNIMPLEMENTED, as ``method=CODE``."""
    metadata = [("authorization", f"Bearer {token}")] if token else []
    answer = "UNIMPLEMENTED"
    with grpc.insecure_channel(f"{ip}:{port}") as channel:
        for method in PROBE_METHODS:
            if token and method in NO_TOKEN_ONLY:
                return NOT_PROBED
            try:
                channel.unary_unary(method)(b"", timeout=10, metadata=metadata)
                code = "OK"
            except grpc.RpcError as err:
                code = str(err.code().name)  # type: ignore[attr-defined]
            if code != "UNIMPLEMENTED":
                return f"{method.rsplit('/', 1)[1]}={code}"
    return answer


def probe(ip: str, port: int, owner: str, token: str) -> Answer:
    ip = ip.removeprefix("::ffff:")
    if ip in ("0.0.0.0", "::"):
        ip = "127.0.0.1"
    without = _http(ip, port, None)
    if without is not None:
        return Answer(port, ip, owner, "http", without, _http(ip, port, token) or "none")
    return Answer(port, ip, owner, "grpc", _grpc(ip, port, None), _grpc(ip, port, token))
