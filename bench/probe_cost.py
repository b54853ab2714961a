"""The CPU of one exec probe of a SuperNode on Flower 1.43+ (flower_federation/plan/probes.py), the rendered command
against the command it replaced, each run PROBES times against `openssl s_server -www` on loopback (HTTPS, an
answer to any GET), as a kubelet would run it: a new process each time. Prints each command's CPU a probe (the
children's user + system time), twice in turn so that a neighbour's burst shows as a disagreement.

    .venv/bin/python bench/probe_cost.py [FLOWER_PYTHON] [PROBES]

FLOWER_PYTHON defaults to the next Flower's venv (tests/support/flower.py NEXT), PROBES to 40. Needs `openssl`.
Figures: docs/benchmarks.md, "Exec probes".
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flower_federation.plan.probes import PROBE_PYTHON, RUNTIME_HEALTH  # noqa: E402

# The probe before issue 36's change, kept here as the baseline it is measured against.
BEFORE = (
    "import ssl,sys,urllib.request\n"
    "ctx=ssl.create_default_context()\n"
    "ctx.check_hostname=False\n"
    "ctx.verify_mode=ssl.CERT_NONE\n"
    "urllib.request.urlopen(sys.argv[1],timeout=float(sys.argv[2]),context=ctx)"
)


def _cpu_a_probe(argv: list[str], probes: int) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(probes):
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the probe failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / probes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    if len(sys.argv) > 1:
        python = sys.argv[1]
    else:
        from tests.support.flower import NEXT, venv_python

        python = str(venv_python(NEXT))
    probes = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with tempfile.TemporaryDirectory() as tmp:
        key, cert = Path(tmp, "key.pem"), Path(tmp, "cert.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
            + ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=probe"],
            check=True,
            capture_output=True,
        )
        port = _free_port()
        server = subprocess.Popen(
            ["openssl", "s_server", "-accept", str(port), "-cert", str(cert), "-key", str(key), "-www", "-quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                if time.monotonic() > deadline:
                    raise SystemExit("openssl s_server did not listen")
                time.sleep(0.1)
            url = f"https://127.0.0.1:{port}/health"
            commands = {
                "before: python -c, urllib.request, a default TLS context": [python, "-c", BEFORE, url, "5"],
                f"now: python {' '.join(PROBE_PYTHON[1:])}, http.client, a bare TLS context": [
                    python,
                    *PROBE_PYTHON[1:],
                    RUNTIME_HEALTH,
                    url,
                    "5",
                ],
            }
            for _ in range(2):
                for name, argv in commands.items():
                    print(f"{_cpu_a_probe(argv, probes) * 1000:6.0f} ms CPU a probe  {name}")
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
