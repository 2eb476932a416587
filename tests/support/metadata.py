"""Fakes of GCP's, Azure's and Alibaba Cloud ECS's metadata services on 127.0.0.1, for
spot notices (and, on ECS, the RAM role's STS credentials).

They refuse what the real ones refuse -- a request without ``Metadata-Flavor: Google``
(GCP: 403) or ``Metadata: true`` (Azure: 400), an Azure request without an
``api-version`` (400), an ECS read without the session token of hardened mode
(``X-aliyun-ecs-metadata-token``, from ``PUT /latest/api/token``: 401) -- and log
every request's path and headers, so a test can assert what the client sent.  A
leading ``/r<N>`` path segment names an instance: one fake serves a whole local cluster (``SYNDEO_METADATA_URL=http://…/r{rank}``),
and a notice can be given to one node.

(EC2's IMDSv2 is ``testbeds/imds.py``, served on a 127.0.0.1 socket.)
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_INSTANCE = re.compile(r"^/(r\d+)(/.*)$")


@dataclass
class Notice:
    body: Any  # GCP: "TRUE"; Azure: the list of events
    once: bool  # served to one request, then gone (the node that saw it stops asking)


@dataclass
class State:
    cloud: str
    vm_name: str = "vm-fake"
    notices: dict[str, Notice] = field(default_factory=dict)  # instance ("" or rN) -> notice
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    incarnation: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = "ecs-token-0123456789"  # ECS: the session token PUT /latest/api/token gives
    role: str = "syndeo-c1-nodes"  # ECS: the instance's RAM role
    sts: dict[str, str] = field(default_factory=dict)  # ECS: that role's credentials


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: State


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, code: int, body: str, ctype: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if self.server.state.cloud == "gcp":
            self.send_header("Metadata-Flavor", "Google")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        st = self.server.state
        url = urlsplit(self.path)
        m = _INSTANCE.match(url.path)
        instance, path = (m.group(1), m.group(2)) if m else ("", url.path)
        with st.lock:
            st.requests.append((self.path, dict(self.headers.items())))
        if st.cloud == "gcp":
            self._gcp(instance, path)
        elif st.cloud == "alibaba":
            self._alibaba(instance, path)
        else:
            self._azure(instance, path, parse_qs(url.query))

    def do_PUT(self) -> None:
        st = self.server.state
        path = urlsplit(self.path).path
        m = _INSTANCE.match(path)
        path = m.group(2) if m else path
        with st.lock:
            st.requests.append((self.path, dict(self.headers.items())))
        ttl = self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds", "")
        if st.cloud != "alibaba" or path != "/latest/api/token":
            self._reply(404, "Not Found")
        elif not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            self._reply(400, "X-aliyun-ecs-metadata-token-ttl-seconds: 1 to 21600")
        else:
            self._reply(200, st.token)

    def _alibaba(self, instance: str, path: str) -> None:
        st = self.server.state
        if self.headers.get("X-aliyun-ecs-metadata-token") != st.token:
            self._reply(401, "Unauthorized: hardened mode needs X-aliyun-ecs-metadata-token")
            return
        if path == f"/latest/meta-data/ram/security-credentials/{st.role}" and st.sts:
            self._reply(200, json.dumps(st.sts), "application/json")
            return
        if path != "/latest/meta-data/instance/spot/termination-time":
            self._reply(404, "Not Found")
            return
        notice = self._take(instance)
        if notice is None:
            self._reply(404, "Not Found")
        else:
            self._reply(200, str(notice.body))

    def _take(self, instance: str) -> Notice | None:
        st = self.server.state
        with st.lock:
            notice = st.notices.get(instance)
            if notice is not None and notice.once:
                del st.notices[instance]
            return notice

    def _gcp(self, instance: str, path: str) -> None:
        if self.headers.get("Metadata-Flavor") != "Google":
            self._reply(403, "Missing Metadata-Flavor:Google header.")
            return
        if path != "/computeMetadata/v1/instance/preempted":
            self._reply(404, "Not Found")
            return
        notice = self._take(instance)
        self._reply(200, "TRUE" if notice is not None else "FALSE")

    def _azure(self, instance: str, path: str, query: dict[str, list[str]]) -> None:
        if self.headers.get("Metadata") != "true":
            self._reply(400, json.dumps({"error": "Required metadata header not specified"}))
            return
        if not query.get("api-version"):
            self._reply(400, json.dumps({"error": "Bad request. api-version was not specified"}))
            return
        st = self.server.state
        if path == "/metadata/instance/compute/name" and query.get("format") == ["text"]:
            self._reply(200, st.vm_name)
            return
        if path != "/metadata/scheduledevents":
            self._reply(404, "Not Found")
            return
        notice = self._take(instance)
        doc = {"DocumentIncarnation": st.incarnation, "Events": notice.body if notice else []}
        self._reply(200, json.dumps(doc), "application/json")


class FakeMetadata:
    """``with FakeMetadata("gcp") as fake:`` -- ``fake.url`` is its base URL."""

    def __init__(self, cloud: str) -> None:
        assert cloud in ("gcp", "azure", "alibaba")
        self.state = State(cloud)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeMetadata:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def preempt(self, body: Any = "TRUE", instance: str = "", once: bool = False) -> None:
        """Serve a notice from now on (GCP: ``TRUE``; Azure: ``body`` is the events;
        Alibaba: the termination time, UTC ISO)."""
        with self.state.lock:
            self.state.notices[instance] = Notice(body, once)
            self.state.incarnation += 1

    def requests(self) -> list[tuple[str, dict[str, str]]]:
        with self.state.lock:
            return list(self.state.requests)
