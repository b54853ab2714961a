"""The e2e harness's image mapping (tests/e2e/harness/pods.py), without root: nginx images
(the Fleet-only proxy's) run the container's `command` with the host's nginx, with the
image's environment and no Flower version check; Flower images from their version's venv; any other image,
an nginx image without `command` or with another program, and a missing nginx are refused
saying why. tests/e2e/test_e2e_gateway_emulation.py runs one as uid 101."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.e2e.harness import pods
from tests.e2e.harness.cluster import FlowerImages
from tests.e2e.harness.host import HarnessError

VERSION = "1.41.0"
PROXY_COMMAND = ["nginx", "-e", "stderr", "-c", "/etc/fleet-proxy/nginx.conf"]
RESTRICTED = {
    "runAsUser": 101,
    "runAsGroup": 101,
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


def _launch(tmp_path: Path, container: dict[str, Any]) -> dict[str, Any]:
    """podinit's spec for `container` in a StatefulSet pod (fsGroup 49999) of a cluster running Flower VERSION."""
    images = FlowerImages(
        VERSION,
        Path("/opt/flwr-venv"),
        [{"mask": "/root", "paths": ["/root/python"]}],
        ["/opt/flwr-venv", "/root/python"],
    )

    def flower_images(version: str) -> FlowerImages:
        if version != VERSION:  # as Cluster.flower_images for a version with no venv here
            raise HarnessError(f"Flower {version}'s images: no venv at /opt/flwr-{version}")
        return images

    cluster = SimpleNamespace(
        id="fe2etest", bridge_ip="10.0.0.1", data=lambda kind, name: None, flower_images=flower_images
    )
    owner = {
        "kind": "StatefulSet",
        "metadata": {"name": "fl-superlink", "namespace": "fed"},
        "spec": {
            "template": {
                "metadata": {"labels": {}},
                "spec": {"securityContext": {"fsGroup": 49999}, "containers": [container]},
            }
        },
    }
    pod = pods.Pod(cluster, owner, "fl-superlink-0", {}, "node-a", 0, "fl-superlink-0", None)  # type: ignore[arg-type]
    pod.dir = tmp_path
    c = SimpleNamespace(name=container["name"], spec=container)
    argv, spec_file = pod.container_launch(c)  # type: ignore[arg-type]
    assert argv[-1] == str(spec_file)
    return dict(json.loads(spec_file.read_text()))


def _proxy(image: str = "nginxinc/nginx-unprivileged:1.28.0-alpine", **extra: Any) -> dict[str, Any]:
    return {"name": "fleet-proxy", "image": image, "command": PROXY_COMMAND, "securityContext": RESTRICTED, **extra}


@pytest.fixture(autouse=True)
def no_mountpoints(monkeypatch):
    """The working dir's mountpoint is not made on this host (a cluster would remove it again)."""
    monkeypatch.setattr(pods, "MOUNTPOINTS", SimpleNamespace(ensure=lambda path, is_file=False: None))


@pytest.fixture
def host_nginx(monkeypatch):
    """A host nginx at a fixed path, fit for the images (whether or not this host has one)."""
    monkeypatch.setattr(pods, "nginx_path", lambda: "/usr/sbin/nginx")
    monkeypatch.setattr(pods, "nginx_unusable", lambda path: None)
    return "/usr/sbin/nginx"


@pytest.mark.parametrize(
    "image",
    [
        "nginxinc/nginx-unprivileged:1.28.0-alpine",
        "nginxinc/nginx-unprivileged:1.28.0-alpine@sha256:" + "a" * 64,
        "docker.io/nginxinc/nginx-unprivileged:1.28.0",
        "nginx:1.28.0-alpine",
        "docker.io/library/nginx:1.28.0",
    ],
)
def test_an_nginx_image_runs_its_command_with_the_host_nginx(tmp_path, host_nginx, image):
    launch = _launch(tmp_path, _proxy(image))
    assert launch["argv"] == [host_nginx, *PROXY_COMMAND[1:]]
    # The image's environment (no Flower venv, no PYTHONFAULTHANDLER), its working dir `/`.
    assert launch["env"] == {
        "PATH": pods.BASE_PATH,
        "HOSTNAME": "fl-superlink-0",
        "HOME": "/var/cache/nginx",
        "NGINX_VERSION": "1.28.0",
    }
    assert launch["cwd"] == "/"
    # Everything else as for a Flower container: the container's user, the pod's fsGroup, read-only root.
    assert launch["user"] == {"uid": 101, "gid": 101, "groups": [49999], "noNewPrivs": True, "dropAllCaps": True}
    assert launch["readOnlyRoot"] is True
    # The image is the nginx binary's directory, nothing of the Flower venv.
    assert launch["image"] == ["/usr/sbin"] and launch["expose"] == []


def test_an_nginx_image_of_another_tag_needs_no_flower_version(tmp_path, host_nginx):
    launch = _launch(tmp_path, _proxy("nginxinc/nginx-unprivileged:stable-alpine-slim"))
    assert launch["argv"][0] == host_nginx
    assert "NGINX_VERSION" not in launch["env"]


def test_a_flower_image_is_unchanged(tmp_path):
    launch = _launch(tmp_path, {"name": "superlink", "image": f"flwr/superlink:{VERSION}", "args": ["--insecure"]})
    assert launch["argv"] == ["/opt/flwr-venv/bin/flower-superlink", "--insecure"]
    assert launch["env"]["PATH"].startswith("/opt/flwr-venv/bin:") and launch["env"]["PYTHONFAULTHANDLER"] == "1"
    assert launch["cwd"] == "/app" and launch["image"] == ["/opt/flwr-venv", "/root/python"]
    with pytest.raises(HarnessError, match=r"image flwr/superlink:1.26.1: Flower 1.26.1's images: no venv"):
        _launch(tmp_path, {"name": "superlink", "image": "flwr/superlink:1.26.1"})


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"name": "x", "image": "busybox:1.36", "command": ["nginx"]}, "neither a Flower nor an nginx image"),
        ({"name": "x", "image": "nginxinc/nginx-unprivileged:1.28.0-alpine"}, "without `command`"),
        ({"name": "x", "image": "nginx:1.28.0", "command": ["sh", "-c", "nginx"]}, "only `nginx` runs"),
    ],
)
def test_refused_images_and_commands(tmp_path, host_nginx, container, message):
    with pytest.raises(HarnessError, match=message):
        _launch(tmp_path, container)


def test_without_nginx_an_nginx_container_cannot_start_and_says_why(tmp_path, monkeypatch):
    """No silent skip: the container's start fails naming the missing package and who installs it."""
    monkeypatch.setattr(pods.shutil, "which", lambda name: None)
    monkeypatch.setattr(pods.os, "access", lambda path, mode: False)
    assert pods.nginx_path() is None
    with pytest.raises(HarnessError, match=r"fleet-proxy: `nginx` is not installed.*make e2e"):
        _launch(tmp_path, _proxy())
    with pytest.raises(HarnessError, match="`nginx` is not installed"):
        pods.host_nginx()


def test_an_nginx_without_the_ssl_or_proxy_module_is_refused(tmp_path, monkeypatch):
    built = "configure arguments: --with-http_ssl_module --without-http_proxy_module"
    monkeypatch.setattr(pods, "nginx_path", lambda: "/usr/sbin/nginx")
    monkeypatch.setattr(pods.subprocess, "run", lambda *a, **k: SimpleNamespace(stderr=built, stdout=""))
    pods.nginx_unusable.cache_clear()
    try:
        with pytest.raises(HarnessError, match="lacks the http ssl or proxy module"):
            pods.host_nginx()
    finally:
        pods.nginx_unusable.cache_clear()


@pytest.mark.skipif(pods.nginx_path() is None, reason="no nginx on this host (make test installs it as root)")
def test_this_hosts_nginx_is_fit_for_the_images():
    assert pods.nginx_unusable(pods.host_nginx()) is None
