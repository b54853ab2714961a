"""The kubelet's prober, run inside the emulated node's network namespace (where the
bridge is) by the Flower venv's Python (which has grpcio).

Requests on stdin, one JSON object per line, answered concurrently (one thread each),
in any order, one JSON line per request on stdout:

    {"id": 1, "type": "grpc", "host": "10.x.y.z", "port": 8081, "service": "", "timeout": 1}
    {"id": 2, "type": "http", "host": "10.x.y.z", "port": 8000, "path": "/health",
     "scheme": "HTTPS", "timeout": 1}
    {"id": 3, "type": "tcp", "host": "10.x.y.z", "port": 8000, "timeout": 1}
    -> {"id": 1, "ok": true, "detail": "SERVING"}

As the kubelet: a gRPC probe succeeds iff grpc.health.v1.Health/Check answers SERVING
within the timeout; an HTTP(S) GET succeeds iff the status is 200-399; HTTPS does not
verify the certificate; a TCP probe succeeds iff a connection opens (it is closed at once).
"""

import http.client
import json
import socket
import ssl
import sys
import threading

_out = threading.Lock()


def _grpc(req):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"{req['host']}:{req['port']}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=req.get("service", "")), timeout=req["timeout"]
        )
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return status == "SERVING", status


def _http(req):
    if req.get("scheme", "HTTP").upper() == "HTTPS":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(req["host"], req["port"], timeout=req["timeout"], context=ctx)
    else:
        conn = http.client.HTTPConnection(req["host"], req["port"], timeout=req["timeout"])
    try:
        conn.request("GET", req.get("path") or "/", headers={"User-Agent": "kube-probe/1.34", "Accept": "*/*"})
        resp = conn.getresponse()
        resp.read(10240)
        return 200 <= resp.status < 400, f"HTTP {resp.status}"
    finally:
        conn.close()


def _tcp(req):
    with socket.create_connection((req["host"], req["port"]), timeout=req["timeout"]):
        return True, "connected"


def _answer(req):
    try:
        ok, detail = {"grpc": _grpc, "tcp": _tcp}.get(req["type"], _http)(req)
    except Exception as exc:  # a failed probe, not a failed prober
        code = getattr(exc, "code", None)
        if callable(code):  # a gRPC error: its status says timed out (DEADLINE_EXCEEDED) or refused (UNAVAILABLE)
            ok, detail = False, f"{type(exc).__name__}: {code().name}: {exc.details()}"
        else:
            ok, detail = False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    with _out:
        sys.stdout.write(json.dumps({"id": req["id"], "ok": ok, "detail": detail[:300]}) + "\n")
        sys.stdout.flush()


def main():
    import grpc  # noqa: F401  (fail at start, not at the first probe)

    sys.stdout.write(json.dumps({"id": 0, "ok": True, "detail": "ready"}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        threading.Thread(target=_answer, args=(json.loads(line),), daemon=True).start()


if __name__ == "__main__":
    main()
