"""Pods in any workload, and the Flower programs their containers run.

A container runs a Flower program when its command names one (`flower-superlink`, a shell or
Python wrapper that runs it: our gRPC-era SuperLink's `python -c ... run_superlink()`), or, with no
command, when its image is one of Flower's (`flwr/superlink`, `flwr/supernode[-ee]`,
`flwr/superexec`, `flwr/serverapp`, `flwr/clientapp`, whatever the registry): their ENTRYPOINT is
the program. A container of a Flower image with a command of its own (our registration Job's
`python register_nodes.py`, the state guard) runs something else. The Flower version is the image
tag's (`flower/versions.py`); a digest-only image or `:latest` has none (the version it is checked
as: `flower_version.py`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from flower_federation.checks.model import UNKNOWN, Objects, Ref, as_dict, as_list, as_str, has_unknown
from flower_federation.flower.versions import FlowerVersion, version_from_image

SUPERLINK = "flower-superlink"
SUPERNODE = "flower-supernode"
SUPEREXEC = "flower-superexec"
SERVERAPP = "flwr-serverapp"
CLIENTAPP = "flwr-clientapp"
PROGRAMS = (SUPERLINK, SUPERNODE, SUPEREXEC, SERVERAPP, CLIENTAPP)
# Flower's images, by the last path segment of the repository (the chart's enterprise `-ee` too).
IMAGE_PROGRAMS = {
    "superlink": SUPERLINK,
    "supernode": SUPERNODE,
    "superexec": SUPEREXEC,
    "serverapp": SERVERAPP,
    "clientapp": CLIENTAPP,
}
_FLOWER_IMAGE = re.compile(r"(?:^|/)flwr/(superlink|supernode|superexec|serverapp|clientapp)(?:-ee)?$")
# In a wrapper script: the program's name, or the Python entry point it calls.
_ENTRY_POINTS = {
    SUPERLINK: ("flower-superlink", "run_superlink"),
    SUPERNODE: ("flower-supernode", "run_supernode"),
    SUPEREXEC: ("flower-superexec", "run_superexec"),
    SERVERAPP: ("flwr-serverapp", "flwr_serverapp"),
    CLIENTAPP: ("flwr-clientapp", "flwr_clientapp"),
}
WORKLOAD_TEMPLATES = {
    "Deployment": "spec.template",
    "StatefulSet": "spec.template",
    "DaemonSet": "spec.template",
    "ReplicaSet": "spec.template",
    "ReplicationController": "spec.template",
    "Job": "spec.template",
    "CronJob": "spec.jobTemplate.spec.template",
    "Pod": "",
}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def repository(image: str) -> str:
    """`registry:5000/flwr/supernode:1.41.0@sha256:..` -> `registry:5000/flwr/supernode`."""
    ref = image.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def flower_image(image: Any) -> bool:
    return isinstance(image, str) and _FLOWER_IMAGE.search(repository(image)) is not None


@dataclass(frozen=True)
class Flags:
    """A command line's `--flag [value]` and `--flag=value` options. `unknown`: some word of it is
    not known yet, so a flag may be missing only in appearance."""

    values: dict[str, list[Optional[str]]] = field(default_factory=dict)
    unknown: bool = False

    def has(self, flag: str) -> bool:
        return flag in self.values

    def value(self, flag: str) -> Optional[str]:
        found = self.values.get(flag)
        return found[-1] if found else None


def parse_flags(words: list[Any]) -> Flags:
    values: dict[str, list[Optional[str]]] = {}
    unknown = False
    tokens: list[Optional[str]] = []
    for word in words:
        if not isinstance(word, str):
            unknown = True
            tokens.append(None)
            continue
        tokens.append(word)
    for i, token in enumerate(tokens):
        if token is None or not token.startswith("--"):
            continue
        flag, eq, inline = token.partition("=")
        if eq:
            values.setdefault(flag, []).append(inline)
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        values.setdefault(flag, []).append(nxt if nxt is not None and not nxt.startswith("--") else None)
    return Flags(values, unknown)


@dataclass(frozen=True)
class FlowerContainer:
    """A container that runs a Flower program, with where it sits."""

    pod: PodSite
    path: str
    container: dict[str, Any]
    program: str
    flags: Flags
    version: Optional[FlowerVersion]

    @property
    def name(self) -> str:
        return as_str(self.container.get("name")) or ""


def _program_of_command(command: list[Any]) -> Optional[str]:
    first = command[0] if command else None
    if isinstance(first, str) and first.rsplit("/", 1)[-1] in PROGRAMS:
        return first.rsplit("/", 1)[-1]
    for word in command[1:]:
        if not isinstance(word, str):
            continue
        for program, marks in _ENTRY_POINTS.items():
            if any(re.search(rf"(?<![\w-]){re.escape(mark)}(?![\w-])", word) for mark in marks):
                return program
    return None


def _words(command: list[Any], args: list[Any]) -> list[Any]:
    """The command line's words after the program: a wrapper script's own words too (`sh -c
    'exec flower-supernode --insecure ...'`)."""
    out: list[Any] = []
    for word in command[1:] + args:
        out.append(word)
        if isinstance(word, str) and any(c.isspace() for c in word):
            try:
                out += shlex.split(word, comments=False)
            except ValueError:
                out += word.split()
    return out


def program_of(container: dict[str, Any]) -> Optional[str]:
    """The Flower program a container runs, or None (not Flower, or not known yet)."""
    command = container.get("command")
    if has_unknown(command):
        return None
    if as_list(command):
        return _program_of_command(as_list(command))
    image = container.get("image")
    if not flower_image(image):
        return None
    segment = repository(str(image)).rsplit("/", 1)[-1].removesuffix("-ee")
    return IMAGE_PROGRAMS[segment]


@dataclass(frozen=True)
class PodSite:
    """A pod template (or a Pod) inside its object: `prefix` is the path of its `spec`'s parent
    (`spec.template` in a Deployment, "" in a Pod)."""

    obj: dict[str, Any]
    ref: Ref
    prefix: str
    labels: Any
    spec: dict[str, Any]

    def at(self, rel: str) -> str:
        return f"{self.prefix}.{rel}" if self.prefix else rel

    def containers(self, lists: tuple[str, ...] = CONTAINER_LISTS) -> Iterator[tuple[str, dict[str, Any]]]:
        """(path, container) of each container in `lists`; a container list not known yet is skipped."""
        for kind in lists:
            for i, c in enumerate(as_list(self.spec.get(kind))):
                if isinstance(c, dict):
                    name = c.get("name")
                    key = name if isinstance(name, str) else str(i)
                    yield self.at(f"spec.{kind}[{key}]"), c

    def flower_containers(self) -> Iterator[FlowerContainer]:
        for path, c in self.containers(("initContainers", "containers")):
            program = program_of(c)
            if program is None:
                continue
            command, args = as_list(c.get("command")), as_list(c.get("args"))
            if has_unknown(c.get("args")) and not args:
                args = [UNKNOWN]
            image = c.get("image")
            version = version_from_image(image) if isinstance(image, str) else None
            yield FlowerContainer(self, path, c, program, parse_flags(_words(command, args)), version)

    @property
    def is_flower(self) -> bool:
        """A pod of the federation: one of its containers runs a Flower program or a Flower image."""
        return any(
            program_of(c) is not None or flower_image(c.get("image"))
            for _, c in self.containers(("initContainers", "containers"))
        )


def pod_sites(objects: Objects) -> Iterator[PodSite]:
    for obj in objects.items:
        kind = obj.get("kind")
        if not isinstance(kind, str) or kind not in WORKLOAD_TEMPLATES:
            continue
        prefix = WORKLOAD_TEMPLATES[kind]
        template: Any = obj
        for key in prefix.split(".") if prefix else []:
            template = as_dict(template).get(key)
        if not isinstance(template, dict):
            continue
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue
        labels = as_dict(template.get("metadata")).get("labels") if isinstance(template, dict) else None
        if template.get("metadata") is UNKNOWN:
            labels = UNKNOWN
        yield PodSite(obj, Ref.of(obj), prefix, labels if labels is not None else {}, spec)


def flower_pods(objects: Objects) -> Iterator[PodSite]:
    return (p for p in pod_sites(objects) if p.is_flower)


def flower_containers(objects: Objects, *programs: str) -> Iterator[FlowerContainer]:
    for pod in pod_sites(objects):
        for fc in pod.flower_containers():
            if not programs or fc.program in programs:
                yield fc


def host_of(address: Optional[str]) -> Optional[str]:
    """`HOST:PORT` -> HOST (`[::1]:9094` -> `[::1]`)."""
    if address is None:
        return None
    if address.startswith("["):
        return address.split("]", 1)[0] + "]"
    return address.rsplit(":", 1)[0] if ":" in address else address


def port_of(address: Optional[str], default: int) -> Optional[int]:
    """The port of `HOST:PORT`, `default` when there is no address; None when it is not a number."""
    if address is None:
        return default
    tail = address.rsplit(":", 1)[-1] if ":" in address else ""
    return int(tail) if re.fullmatch(r"[0-9]+", tail) else None
