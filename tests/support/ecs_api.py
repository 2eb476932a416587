"""A fake of Alibaba Cloud's ECS RPC API on 127.0.0.1, for ``check --target alibaba``.

It verifies each request's signature (version 1.0, HMAC-SHA1 with the secret it knows)
and refuses a request with a wrong one (400 SignatureDoesNotMatch) or an unknown
AccessKeyId (404 InvalidAccessKeyId.NotFound), as the service does, and answers
DescribeRegions, DescribeAvailableResource and DescribeImages from its state in the
shapes syndeo/launcher/targets/alibabacheck.py documents, and DescribeInstances (by
region and tag, a page at a time) in those AlibabaTarget.list_machines documents.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

KEY_ID, SECRET = "LTAI-test-key", "test-secret"


@dataclass
class EcsState:
    regions: list[str] = field(default_factory=lambda: ["cn-hangzhou", "eu-central-1"])
    # (region, instance type, spot) -> zones that have it in stock
    stock: dict[tuple[str, str, bool], list[str]] = field(default_factory=dict)
    images: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> tags
    vcpus: dict[str, int] = field(default_factory=dict)  # instance type -> vCPUs
    attributes: dict[str, str] = field(default_factory=dict)  # account attribute -> value
    # (region, Instance) for DescribeInstances: each Instance as that reply has it
    instances: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


def _encode(value: str) -> str:
    return quote(value, safe="~")


def _signature(params: dict[str, str], secret: str) -> str:
    canonical = "&".join(
        f"{_encode(k)}={_encode(v)}" for k, v in sorted(params.items()) if k != "Signature"
    )
    to_sign = f"GET&{_encode('/')}&{_encode(canonical)}"
    digest = hmac.new(f"{secret}&".encode(), to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: EcsState


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, code: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
        if params.get("AccessKeyId") != KEY_ID:
            self._reply(404, {"Code": "InvalidAccessKeyId.NotFound", "Message": "no such key"})
            return
        if params.get("Signature") != _signature(params, SECRET):
            self._reply(400, {"Code": "SignatureDoesNotMatch", "Message": "bad signature"})
            return
        action = params.get("Action", "")
        self.server.state.actions.append(action)
        answer = getattr(self, f"_{action}", None)
        if answer is None:
            self._reply(400, {"Code": "InvalidAction.NotFound", "Message": action})
            return
        answer(params)

    def _DescribeRegions(self, params: dict[str, str]) -> None:
        regions = [{"RegionId": r} for r in self.server.state.regions]
        self._reply(200, {"Regions": {"Region": regions}})

    def _DescribeAvailableResource(self, params: dict[str, str]) -> None:
        itype, spot = params["InstanceType"], params["SpotStrategy"] != "NoSpot"
        zones = self.server.state.stock.get((params["RegionId"], itype, spot), [])
        supported = {"Value": itype, "Status": "Available", "StatusCategory": "WithStock"}
        resources = {
            "AvailableResource": [{"SupportedResources": {"SupportedResource": [supported]}}]
        }
        found = [
            {"ZoneId": z, "StatusCategory": "WithStock", "AvailableResources": resources}
            for z in zones
        ]
        self._reply(200, {"AvailableZones": {"AvailableZone": found}})

    def _DescribeInstanceTypes(self, params: dict[str, str]) -> None:
        known = self.server.state.vcpus
        found = [
            {"InstanceTypeId": t, "CpuCoreCount": known[t]}
            for t in _numbered(params, "InstanceTypes")
            if t in known
        ]
        self._reply(200, {"InstanceTypes": {"InstanceType": found}})

    def _DescribeAccountAttributes(self, params: dict[str, str]) -> None:
        attrs = self.server.state.attributes
        items = [
            {"AttributeName": n, "AttributeValues": {"ValueItem": [{"Value": attrs[n]}]}}
            for n in _numbered(params, "AttributeName")
            if n in attrs
        ]
        self._reply(200, {"AccountAttributeItems": {"AccountAttributeItem": items}})

    def _DescribeImages(self, params: dict[str, str]) -> None:
        tags = self.server.state.images.get(params["ImageId"])
        images = (
            []
            if tags is None
            else [
                {
                    "ImageId": params["ImageId"],
                    "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in tags.items()]},
                }
            ]
        )
        self._reply(200, {"Images": {"Image": images}, "TotalCount": len(images)})

    def _DescribeInstances(self, params: dict[str, str]) -> None:
        key, value = params.get("Tag.1.Key"), params.get("Tag.1.Value")
        found = [
            i
            for region, i in self.server.state.instances
            if region == params["RegionId"]
            and {"TagKey": key, "TagValue": value} in i.get("Tags", {}).get("Tag", [])
        ]
        size, page = int(params.get("PageSize", "10")), int(params.get("PageNumber", "1"))
        shown = found[(page - 1) * size : page * size]
        self._reply(
            200,
            {"Instances": {"Instance": shown}, "TotalCount": len(found), "PageNumber": page},
        )


def _numbered(params: dict[str, str], name: str) -> list[str]:
    """``Name.1``, ``Name.2``, ... in order (the RPC API's repeated parameters)."""
    found = [(int(k.rsplit(".", 1)[1]), v) for k, v in params.items() if k.startswith(f"{name}.")]
    return [v for _, v in sorted(found)]


class FakeEcs:
    """``with FakeEcs() as ecs:`` -- ``ecs.url`` for SYNDEO_ALIBABA_ECS_URL."""

    def __init__(self) -> None:
        self.state = EcsState()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeEcs:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
