"""OSS's addressing in front of ``moto_server``: an HTTP proxy on 127.0.0.1 that takes
requests for ``http://<bucket>.<endpoint host>:<port>/<key>`` (a client sends them to it
whole, as to any proxy: no name is ever resolved) and forwards them, Host header and
all, to the S3 server on 127.0.0.1, which reads the bucket from the Host (moto's
virtual-hosted mode).  A path-style request (Host = the endpoint itself) is refused
with OSS's own answer, 403 SecondLevelDomainForbidden, so a client that fell back to
path-style addressing fails here as it would on OSS.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# A name that is never resolved (requests reach it only through this proxy).
ENDPOINT_HOST = "oss-test-1.aliyuncs.test"
HOP_BY_HOP = {"proxy-connection", "connection", "keep-alive", "transfer-encoding"}
REFUSAL = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SecondLevelDomainForbidden</Code>'
    b"<Message>Please use virtual hosted style to access.</Message></Error>"
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    target_port: int
    seen_hosts: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        host = self.headers.get("Host", "")
        self.server.seen_hosts.append(host)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if host.split(":")[0] == ENDPOINT_HOST:
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(REFUSAL)))
            self.end_headers()
            self.wfile.write(REFUSAL)
            return
        parts = urlsplit(self.path)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.target_port, timeout=30)
        try:
            conn.request(self.command, path or "/", body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
        finally:
            conn.close()
        self.send_response(reply.status)
        for k, v in reply.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class VirtualHosts:
    """A running proxy: ``endpoint`` for the client, ``proxy`` for its HTTP_PROXY."""

    def __init__(self, server: _Server, s3_port: int) -> None:
        self._server = server
        self.proxy = f"http://127.0.0.1:{server.server_address[1]}"
        self.endpoint = f"http://{ENDPOINT_HOST}:{s3_port}"
        self.seen_hosts = server.seen_hosts

    def env(self) -> dict[str, str]:
        """What a node needs to reach the store through this proxy (no AWS names)."""
        return {
            "SYNDEO_OSS_ENDPOINT": self.endpoint,
            "ALIBABA_CLOUD_REGION": "test-1",
            "ALIBABA_CLOUD_ACCESS_KEY_ID": "testing",
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "testing",
            "HTTP_PROXY": self.proxy,
            "http_proxy": self.proxy,
        }


@contextmanager
def virtual_hosted(s3_port: int) -> Iterator[VirtualHosts]:
    """The proxy in front of the S3 server listening on 127.0.0.1:``s3_port``."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.target_port, server.seen_hosts = s3_port, []
    thread = threading.Thread(target=server.serve_forever, name="oss-proxy", daemon=True)
    thread.start()
    try:
        yield VirtualHosts(server, s3_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
