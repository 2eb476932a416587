"""An EC2 instance metadata service (IMDSv2) for one emulated instance.

It listens on 169.254.169.254:80 inside the instance's own network namespace (the
listening socket is made there; the serving thread stays in the emulator), so a
node reaches it exactly as on EC2, and nothing outside that namespace can.

What it serves is what Syndeo's nodes and the AWS SDKs read:

- ``PUT /latest/api/token`` (``X-aws-ec2-metadata-token-ttl-seconds``: 1..21600) gives
  a session token; with ``http_tokens = "required"`` every GET without a valid one
  is refused with 401, as on EC2.  The reply to the PUT leaves with the IP TTL set to
  the instance's ``http_put_response_hop_limit`` (what EC2's hop limit is).
- ``meta-data/instance-id``, ``local-ipv4``, ``placement/availability-zone``,
  ``placement/region``, ``iam/info``, ``iam/security-credentials/[<role>]``,
  ``spot/instance-action`` (404 until a notice is set) and
  ``dynamic/instance-identity/document``.

Credentials are those of the role of the instance's profile, issued by the
emulated STS for this instance (``credentials`` callback): no launcher key ever
reaches the machine.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ADDRESS = "169.254.169.254"
PORT = 80
CLONE_NEWNET = 0x40000000
MAX_TOKEN_TTL_S = 21600


@dataclass
class Instance:
    """What the metadata service knows of its instance (set by the emulator)."""

    instance_id: str
    private_ip: str
    zone: str
    region: str
    http_tokens: str  # "required" (IMDSv2 only) or "optional"
    hop_limit: int
    profile_arn: str | None
    profile_id: str | None
    role_name: str | None
    spot_action: dict[str, str] | None = None  # set to serve a spot interruption notice
    tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry (monotonic)


Credentials = Callable[[Instance], dict[str, str]]
# Brings the instance's profile and role up to date (EC2 associates a profile with the
# instance, and may change it, independently of the instance's own life).
Refresh = Callable[[Instance], None]


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def listen_in(netns_path: Path) -> socket.socket:
    """A TCP socket listening on 169.254.169.254:80 inside ``netns_path``.

    The namespace is entered by a short-lived thread of its own (network namespaces
    are per thread), which makes the socket and ends: a socket belongs to the
    namespace it was made in, wherever it is used later."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        try:
            _setns(str(netns_path))
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((ADDRESS, PORT))
            sock.listen(16)
            made.append(sock)
        except BaseException as exc:
            failed.append(exc)

    t = threading.Thread(target=make, name="imds-netns")
    t.start()
    t.join()
    if failed:
        raise failed[0]
    return made[0]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    instance: Instance
    credentials: Credentials
    refresh: Refresh


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the emulator logs
        return

    def _reply(self, code: int, body: str, ctype: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        inst = self.server.instance
        if self.path != "/latest/api/token":
            self._reply(404, "Not Found")
            return
        try:
            ttl = int(self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", ""))
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= MAX_TOKEN_TTL_S:
            self._reply(400, "Bad Request")
            return
        token = secrets.token_urlsafe(32)
        inst.tokens[token] = time.monotonic() + ttl
        # EC2's hop limit: the token reply dies after that many hops.
        self.connection.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, inst.hop_limit)
        self._reply(200, token)

    def do_GET(self) -> None:
        inst = self.server.instance
        token = self.headers.get("X-aws-ec2-metadata-token")
        valid = token is not None and inst.tokens.get(token, 0.0) > time.monotonic()
        if (token is not None and not valid) or (token is None and inst.http_tokens == "required"):
            self._reply(401, "Unauthorized")
            return
        body = self._answer(inst, self.path.split("?", 1)[0])
        if body is None:
            self._reply(404, "Not Found")
        else:
            self._reply(200, body)

    def _answer(self, inst: Instance, path: str) -> str | None:
        meta = "/latest/meta-data/"
        creds = meta + "iam/security-credentials/"
        if path == "/latest/dynamic/instance-identity/document":
            return json.dumps(
                {
                    "instanceId": inst.instance_id,
                    "privateIp": inst.private_ip,
                    "availabilityZone": inst.zone,
                    "region": inst.region,
                }
            )
        simple = {
            meta + "instance-id": inst.instance_id,
            meta + "local-ipv4": inst.private_ip,
            meta + "placement/availability-zone": inst.zone,
            meta + "placement/region": inst.region,
        }
        if path in simple:
            return simple[path]
        if path == meta + "spot/instance-action":
            return json.dumps(inst.spot_action) if inst.spot_action else None
        if path.startswith(meta + "iam/"):
            self.server.refresh(inst)
        if inst.role_name is None:
            return None  # no instance profile: no iam/ tree, as on EC2
        if path == meta + "iam/info":
            return json.dumps(
                {
                    "Code": "Success",
                    "LastUpdated": _iso(time.time()),
                    "InstanceProfileArn": inst.profile_arn,
                    "InstanceProfileId": inst.profile_id,
                }
            )
        if path in (creds, creds.rstrip("/")):
            return inst.role_name
        if path == creds + inst.role_name:
            issued = self.server.credentials(inst)
            return json.dumps(
                {"Code": "Success", "LastUpdated": _iso(time.time()), "Type": "AWS-HMAC", **issued}
            )
        return None


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def serve(
    sock: socket.socket, instance: Instance, credentials: Credentials, refresh: Refresh
) -> _Server:
    """Serve ``instance``'s metadata on ``sock`` (from :func:`listen_in`) in a thread."""
    server = _Server((ADDRESS, PORT), _Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.instance = instance
    server.credentials = credentials
    server.refresh = refresh
    threading.Thread(
        target=server.serve_forever, name=f"imds-{instance.instance_id}", daemon=True
    ).start()
    return server
