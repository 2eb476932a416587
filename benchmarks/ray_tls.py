"""What Ray's own TLS would cost a cluster (issue 22 item 4): bring-up and throughput.

Not a syndeo feature yet: this measures Ray's switch before anyone builds on it.  Ray
(2.60) reads ``RAY_USE_TLS``, ``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY`` and
``RAY_TLS_CA_CERT`` from the environment: the C++ side as RayConfig entries
(``USE_TLS``, ``TLS_SERVER_CERT``, ... in src/ray/common/ray_config_def.h; servers in
``GrpcServer::Run``, src/ray/rpc/grpc_server.cc, require and verify a client
certificate signed by the CA; clients in src/ray/rpc/grpc_client.h), the Python side in
``load_certs_from_env`` / ``add_port_to_grpc_server`` (python/ray/_common/tls_utils.py)
for the agents, the client server and every driver.  Every process of the cluster, and
every client, needs all four; a server's certificate must name the address it is
reached at (an IP SAN: gRPC checks it).

Here one CA and one certificate for the local target's addresses are made with
``cryptography`` in a 0700 temp dir; the same local cluster (2 nodes, ``deploy`` with
a workload) runs with and without TLS, interleaved (plain, tls, tls, plain, ...).
Per run: ``all_joined_s`` from deploy.json, and from the workload (the driver on the
head, the work pinned to the other node): no-op tasks per second, sequential actor
calls per second, and MB/s of objects moved head -> node.  Written to
results/bench/ray-tls-local.json.

    .venv/bin/python -m benchmarks.ray_tls [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench" / "ray-tls-local.json"
NODE_IPS = ["127.0.0.1", "127.0.0.10", "127.0.0.11"]

WORKLOAD = r"""
import json, os, time
import ray

ray.init()
far = {"label_selector": {"syndeo-rank": "1"}}

@ray.remote(num_cpus=0)
def noop():
    return None

@ray.remote(num_cpus=0)
def size(*blobs):
    return sum(len(b) for b in blobs)

@ray.remote(num_cpus=0)
class Echo:
    def ping(self, x):
        return x

def rate(n, fn):
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)

ray.get([noop.options(**far).remote() for _ in range(50)])  # warm the remote workers
tasks = rate(1000, lambda: ray.get([noop.options(**far).remote() for _ in range(1000)]))
echo = Echo.options(**far).remote()
ray.get(echo.ping.remote(0))
calls = rate(500, lambda: [ray.get(echo.ping.remote(i)) for i in range(500)])
mb = 0.0
for _ in range(3):
    refs = [ray.put(os.urandom(1 << 20) * 16) for _ in range(4)]  # 4 x 16 MiB
    t0 = time.perf_counter()
    assert ray.get(size.options(**far).remote(*refs)) == 4 * 16 * (1 << 20)
    mb = max(mb, 64 / (time.perf_counter() - t0))
out = {"tasks_per_s": tasks, "actor_calls_per_s": calls, "transfer_mb_per_s": mb}
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
"""


def make_certs(where: Path) -> dict[str, str]:
    """A CA and one key/certificate (signed by it, IP SANs of the local target's
    addresses) in ``where``; the environment that turns Ray's TLS on with them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    later = now + datetime.timedelta(days=1)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "syndeo bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in NODE_IPS]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ray")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "node.crt": cert.public_bytes(serialization.Encoding.PEM),
        "node.key": pem_key(key),
    }
    for name, data in files.items():
        fd = os.open(where / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    return {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": str(where / "node.crt"),
        "RAY_TLS_SERVER_KEY": str(where / "node.key"),
        "RAY_TLS_CA_CERT": str(where / "ca.crt"),
    }


def one_run(work: Path, mode: str, i: int, tls_env: dict[str, str]) -> dict[str, Any]:
    cid = f"lp-tls-{mode}-{i}-{os.getpid()}"
    res = work / "res"
    env = {**os.environ, "SYNDEO_HOME": str(work / "home")}
    if mode == "tls":
        env.update(tls_env)
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo", "deploy", "--target", "local", "--nodes", "2",
         "--cluster-id", cid, "--run", f"python {work / 'workload.py'}",
         "--results-dir", str(res), "--join-timeout", "240"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run {i} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads((res / cid / "deploy.json").read_text())
    result = json.loads((res / cid / "result.json").read_text())
    return {"mode": mode, "all_joined_s": summary["timings_s"]["all_joined_s"], **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="syndeo-tls-") as tmp:
        work = Path(tmp)
        (work / "workload.py").write_text(WORKLOAD)
        certs = work / "certs"
        certs.mkdir(mode=0o700)
        tls_env = make_certs(certs)
        order = ["plain", "tls", "tls", "plain"] * ((args.repeats + 1) // 2)
        counts = {"plain": 0, "tls": 0}
        for mode in order:
            if counts[mode] >= args.repeats:
                continue
            counts[mode] += 1
            run = one_run(work, mode, counts[mode], tls_env)
            print(json.dumps(run), flush=True)
            runs.append(run)
    keys = ["all_joined_s", "tasks_per_s", "actor_calls_per_s", "transfer_mb_per_s"]
    medians = {
        mode: {k: statistics.median(r[k] for r in runs if r["mode"] == mode) for k in keys}
        for mode in ("plain", "tls")
    }
    doc = {
        "what": "local target, 2 nodes, Ray's TLS (RAY_USE_TLS) off vs on; medians",
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_at_end": os.getloadavg(),
        "medians": medians,
        "tls_over_plain": {k: medians["tls"][k] / medians["plain"][k] for k in keys},
        "runs": runs,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["tls_over_plain"], indent=2))


if __name__ == "__main__":
    main()
