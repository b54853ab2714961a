"""Runs inside a `.venv-flwr-<version>` venv (real Flower installed) and answers
requests on stdin, one JSON object per line:

    {"op": "parse", "program": "flower-superlink", "args": [...]}
    {"op": "node_config", "value": "k=1 ..."}
    {"op": "connection", "toml": "...", "name": "conn"}  (flwr >= 1.26 config.toml)
    {"op": "executor_config", "yaml": "...", "executor": "kubernetes"}  (flwr >= 1.41)
    {"op": "grpc_health", "address": "127.0.0.1:8081", "timeout": 5}

with one JSON line: {"ok": true, "result": ...} or {"ok": false, "error": "..."}.
Parsing uses Flower's own argparse parsers, the ones each program's main() calls.
"""

import contextlib
import importlib
import io
import json
import sys

# Where each program's parser lives, per Flower layout (the first importable wins).
PARSERS = {
    "flower-superlink": [
        ("flwr.superlink.cli.flower_superlink", "_parse_args_run_superlink"),  # 1.40+
        ("flwr.server.app", "_parse_args_run_superlink"),  # 1.2x
    ],
    "flower-supernode": [("flwr.supernode.cli.flower_supernode", "_parse_args_run_supernode")],
    "flower-superexec": [("flwr.supercore.cli.flower_superexec", "_parse_args")],
}


def _parser(program):
    for module, fn in PARSERS[program]:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(mod, fn):
            return getattr(mod, fn)()
    raise RuntimeError(f"no parser found for {program}")


def _jsonable(ns):
    return {k: v if isinstance(v, (str, int, float, bool, type(None), list)) else repr(v) for k, v in vars(ns).items()}


def handle(req):
    op = req["op"]
    if op == "version":
        from importlib.metadata import PackageNotFoundError, version

        # Flower's nightly installs the same `flwr` module from the package flwr-nightly.
        try:
            return version("flwr")
        except PackageNotFoundError:
            return version("flwr-nightly")
    if op == "parse":
        parser = _parser(req["program"])
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(req["args"])
        except SystemExit:
            raise ValueError(err.getvalue().strip().splitlines()[-1] if err.getvalue() else "parse failed") from None
        return _jsonable(ns)
    if op == "node_config":
        from flwr.common.config import parse_config_args

        return parse_config_args([req["value"]])
    if op == "connection":
        import tomli
        from flwr.cli.flower_config import parse_superlink_connection

        doc = tomli.loads(req["toml"])
        name = doc["superlink"]["default"]
        conn = parse_superlink_connection(doc["superlink"][name], name)
        return {
            "name": name,
            "address": conn.address,
            "insecure": conn.insecure,
            "root_certificates": conn.root_certificates,
        }
    if op == "executor_config":
        return _executor_config(req["yaml"], req.get("executor", "kubernetes"))
    if op == "grpc_health":
        # What a kubelet `grpc` probe asks: grpc.health.v1.Health/Check on the port.
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with grpc.insecure_channel(req["address"]) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=req.get("service", "")), timeout=req.get("timeout", 5)
            )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    raise ValueError(f"unknown op {op}")


def _executor_config(text, executor):
    """The executor config file as flower-superexec reads it: the YAML loaded from a
    file by Flower's own loader, then turned into the Kubernetes executor's dataclass
    by the factory `get_executor` uses. Returns the dataclass fields (callables left out)."""
    import dataclasses
    import os
    import tempfile

    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.superexec.executor.config import load_executor_config
    from flwr.supercore.superexec.executor.factory import _kubernetes_executor_config_from_mapping

    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mapping = load_executor_config(path, ExecutorType(executor))
    finally:
        os.unlink(path)
    config = _kubernetes_executor_config_from_mapping(mapping)
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items() if not callable(v)}


def main():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = {"ok": True, "result": handle(req)}
        except BaseException as exc:  # report, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply, default=repr) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
