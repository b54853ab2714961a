"""The Fleet-only proxy's bounds against abuse (issue 32 part 3), as rendered: every bound a
`superlink.fleetProxy` setting, the upload bounds derived from the SuperLink's memory limit
unless set (`maxConcurrentUploads`' description states the formula), refused with a problem at
its config path when out of range, and the rendered nginx.conf loaded by Debian's nginx
(`nginx -t`). That the bounds hold against a real SuperLink: tests/test_fleet_proxy_abuse.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flower_federation.builders import fleet_proxy
from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.flower import HTTP_ERA, NEXT, PREVIOUS_HTTP_ERA, venv_python
from tests.support.manifests import get
from tests.support.processes import free_port
from tests.support.validation import problems
from tests.test_hub_exposure import hub, render


def _conf(raw: dict[str, Any]) -> str:
    objects, _, _ = render(raw)
    text: str = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    return text


def _with(proxy: dict[str, Any] | None = None, **superlink: Any) -> dict[str, Any]:
    raw = hub()
    raw["superlink"].update(superlink)
    if proxy is not None:
        raw["superlink"]["fleetProxy"] = proxy
    return raw


def _limits(conf: str) -> tuple[int, int]:
    per_address = int(conf.split(f"limit_conn {fleet_proxy.PER_ADDRESS_ZONE} ")[1].split(";")[0])
    total = int(conf.split(f"limit_conn {fleet_proxy.TOTAL_ZONE} ")[1].split(";")[0])
    return total, per_address


def test_the_defaults_derive_from_the_superlinks_memory_limit() -> None:
    conf = _conf(_with())
    # 768Mi (the default preset's limit), 8m bodies: floor((768 - 416) / (8 * 8)) = 5 in all, 2 per address.
    assert _limits(conf) == (5, 2)
    for line in (
        "client_max_body_size 8m;",
        "client_header_timeout 10s;",
        "client_body_timeout 30s;",
        "send_timeout 30s;",
        "keepalive_timeout 30s;",
        "large_client_header_buffers 4 8k;",
        "limit_conn_status 503;",
    ):
        assert line in conf, line
    # A larger SuperLink takes more uploads at once; larger bodies fewer.
    assert _limits(_conf(_with(resources={"limits": {"memory": "2304Mi"}}))) == (29, 2)
    assert _limits(_conf(_with({"maxRequestBodySize": "16m"}))) == (2, 2)
    # Even a SuperLink too small for one upload under the formula gets one.
    assert _limits(_conf(_with({"maxRequestBodySize": "64m"}, resources={"limits": {"memory": "300Mi"}}))) == (1, 1)


def test_every_bound_is_a_setting() -> None:
    proxy = {
        "maxRequestBodySize": "16m",
        "maxConcurrentUploads": 40,
        "maxConcurrentUploadsPerAddress": 7,
        "clientHeaderTimeoutSeconds": 5,
        "idleTimeoutSeconds": 12,
        "keepaliveTimeoutSeconds": 0,
        "headerBufferSize": "16k",
    }
    conf = _conf(_with(proxy))
    assert _limits(conf) == (40, 7)
    for line in (
        "client_max_body_size 16m;",
        "client_header_timeout 5s;",
        "client_body_timeout 12s;",
        "send_timeout 12s;",
        "keepalive_timeout 0s;",
        "large_client_header_buffers 4 16k;",
    ):
        assert line in conf, line


def test_bounds_out_of_range_are_refused_each_at_its_path() -> None:
    bad = {
        "maxConcurrentUploads": 0,
        "maxConcurrentUploadsPerAddress": -1,
        "clientHeaderTimeoutSeconds": 0,
        "idleTimeoutSeconds": 100000,
        "headerBufferSize": "8k;\n",
    }
    with pytest.raises(ConfigError) as err:
        load_plan(_with(bad), "hub")
    text = str(err.value)
    for key in bad:
        assert f"federation.superlink.fleetProxy.{key}" in text, key
    assert "Traceback" not in text


# Each bound set to the value nginx would read as "none" (0: no body limit, no timeout) or that leaves no slot.
SWITCHED_OFF = {
    "maxRequestBodySize": ("0", "'0' means no limit in nginx (client_max_body_size 0)"),
    "maxConcurrentUploads": (0, "greater than or equal to 1, not 0"),
    "maxConcurrentUploadsPerAddress": (0, "greater than or equal to 1, not 0"),
    "clientHeaderTimeoutSeconds": (0, "greater than or equal to 1, not 0"),
    "idleTimeoutSeconds": (0, "greater than or equal to 5, not 0"),
    "timeoutSeconds": (0, "greater than or equal to 60, not 0"),
}


def test_no_bound_can_be_switched_off() -> None:
    """Every value that would disable a bound is refused at its path, quoting it (`maxRequestBodySize: 0` rendered
    `client_max_body_size 0`, nginx's "unlimited", before), all at once, one problem each."""
    every = dict(problems(_with({key: value for key, (value, _) in SWITCHED_OFF.items()})))
    assert sorted(every) == sorted(f"federation.superlink.fleetProxy.{key}" for key in SWITCHED_OFF)  # once each
    for key, (_, message) in SWITCHED_OFF.items():
        assert message in every[f"federation.superlink.fleetProxy.{key}"], every
    # keepaliveTimeoutSeconds 0 is no keep-alive at all (the strictest), and any size above 0 renders as given.
    conf = fleet_proxy.config(load_plan(_with({"keepaliveTimeoutSeconds": 0, "maxRequestBodySize": "1k"}), "hub"))
    assert "keepalive_timeout 0s;" in conf and "client_max_body_size 1k;" in conf


@pytest.mark.live
def test_nginx_loads_the_rendered_bounds(tmp_path: Path) -> None:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("nginx is not installed: `make test` installs Debian's nginx as root")
    conf = _conf(_with()).replace("listen 8000 ssl;", f"listen 127.0.0.1:{free_port()};")
    # Certificates are not what this checks (tests/test_fleet_proxy.py runs them): the same config without TLS.
    lines = [ln for ln in conf.splitlines() if "ssl" not in ln]
    text = "\n".join(lines).replace(" /tmp/", f" {tmp_path}/").replace("/dev/stdout", f"{tmp_path}/access.log")
    (tmp_path / "nginx.conf").write_text(text)
    done = subprocess.run([nginx, "-t", "-e", "stderr", "-c", str(tmp_path / "nginx.conf")], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    # The negative control: nginx does refuse a broken bound.
    (tmp_path / "nginx.conf").write_text(text.replace("limit_conn_status 503;", "limit_conn_status 200;"))
    done = subprocess.run([nginx, "-t", "-e", "stderr", "-c", str(tmp_path / "nginx.conf")], capture_output=True)
    assert done.returncode != 0


@pytest.mark.parametrize("version", sorted({PREVIOUS_HTTP_ERA, HTTP_ERA, NEXT}))
def test_the_proxys_upstream_idle_timeout_is_below_the_superlinks_keep_alive(version: str) -> None:
    """The upstream keep-alive (issue 36): nginx must close an idle connection to the SuperLink first, or it
    may send a request on one the SuperLink is closing, which nginx does not repeat for a POST (the site sees
    502). The SuperLink is uvicorn, run with its default `timeout_keep_alive` (read here from each HTTP-era
    Flower's own venv: uvicorn's default, and flower-superlink's source, which does not set it)."""
    (site,) = venv_python(version).parent.parent.glob("lib/python3*/site-packages")
    # Read, not imported: importing Flower takes seconds.
    (default,) = re.findall(r"timeout_keep_alive: int = ([0-9]+)", (site / "uvicorn" / "config.py").read_text())
    assert "timeout_keep_alive" not in (site / "flwr" / "superlink" / "cli" / "flower_superlink.py").read_text()
    conf = _conf(_with())
    ours = int(fleet_proxy.UPSTREAM_IDLE_TIMEOUT.rstrip("s"))
    assert f"keepalive_timeout {fleet_proxy.UPSTREAM_IDLE_TIMEOUT};" in conf and ours < int(default), (ours, default)
    # Every forwarding goes through the kept-alive group, to the SuperLink's own port on loopback.
    assert conf.count(f"proxy_pass https://{fleet_proxy.UPSTREAM};") == 2 and "server 127.0.0.1:9095;" in conf
