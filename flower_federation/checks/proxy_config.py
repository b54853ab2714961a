"""What a Fleet-only proxy in front of a SuperLink really forwards: its nginx.conf, read from the
ConfigMap its container mounts and PARSED (nginxinc's `crossplane`, strict: a directive nginx does
not know is an error), never grepped, so a config that an injected string or a hand edit changed
is judged by the directive tree nginx itself would load.

The rule (strict: a config is accepted only when every forwarding is provably Fleet-only):
- the file parses; no `include` (what it pulls in is not in the ConfigMap, so it cannot be judged);
  exactly one `server`; no `rewrite`, `set` or `break` anywhere (they change the URI or skip the
  guard between the guard and the forwarding);
- a forwarding directive (`proxy_pass`, `grpc_pass`, `fastcgi_pass`, `uwsgi_pass`, `scgi_pass`,
  `memcached_pass`) appears ONLY as a direct child of `location /v1/fleet/` or `location = /health`
  in that server, once, with an upstream that is `scheme://host[:port]` alone: a URI part would
  replace the matched prefix (`proxy_pass https://sl/v1/control/;` makes `/v1/fleet/x` reach
  `/v1/control/x`), a variable makes the target the client's choice;
- each of those two locations starts with its guard, `if ($request_uri !~ "<allowlist>") { return
  4xx; }`, the allowlist exactly the one nginx.conf is rendered with (`FLEET_URI`, `HEALTH_URI`): a
  location prefix is matched on the normalised path, so without the guard on the raw URI
  `/v1/fleet/../control/...` is forwarded as sent; the guard first, because rewrite-phase
  directives run in order;
- nothing nests inside them except the guard and `limit_except` (which may not forward), so no
  inner location or `if` forwards past the guard;
- what they forward to is the SuperLink next to the proxy: a loopback address (or a Unix socket), directly or
  through an `upstream` group whose every `server` is one; any other host would carry the Fleet traffic, and
  the sites' signed requests, out of the pod.
Anything else a location does (return, deny) cannot reach the SuperLink.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from typing import Any, Optional

import crossplane  # type: ignore[import-untyped]

from flower_federation.builders.fleet_proxy import FLEET_URI, HEALTH_URI
from flower_federation.checks.model import Objects, Ref, as_dict, as_list, as_str, same_namespace
from flower_federation.checks.pods import PodSite

FORWARDING = frozenset({"proxy_pass", "grpc_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "memcached_pass"})
# Directives that change the URI after the guard saw it, or stop the guard from running.
URI_CHANGING = frozenset({"rewrite", "set", "break"})
# (location args) -> the allowlist its guard must hold
ALLOWED_LOCATIONS = {("/v1/fleet/",): FLEET_URI, ("=", "/health"): HEALTH_URI}
# An upstream with no URI part and no variable: the request URI passes as the client sent it.
PLAIN_UPSTREAM = re.compile(
    r"(?:https?|grpcs?)://(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?|unix:/[A-Za-z0-9._/-]+"
)
# The SuperLink in the proxy's own pod: IPv4 loopback, IPv6's, or `localhost`, with a port; or a Unix socket.
LOOPBACK = re.compile(r"(?:127(?:\.[0-9]{1,3}){3}|\[::1\]|localhost)(?::[0-9]{1,5})?|unix:/[A-Za-z0-9._/-]+")
DATA_BLOCKS = frozenset({"map", "geo", "types", "split_clients", "match"})
DEFAULT_CONFIG = "/etc/nginx/nginx.conf"  # nginx's own default when no `-c` is given


def parse(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The directive tree of one nginx.conf and its parse errors (crossplane, strict, includes
    not followed: an `include` is judged as a directive)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nginx.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        payload = crossplane.parse(path, single=True, catch_errors=True)
    errors = [f"line {e.get('line')}: {e.get('error')}" for e in payload.get("errors", [])]
    configs = payload.get("config") or [{}]
    tree = list(configs[0].get("parsed") or [])
    # Strict on directives, as nginx is: one crossplane does not know (a module's: Lua, njs, perl)
    # is an error, except inside a block whose entries are data (a map's keys), not directives.
    errors += [
        f"line {d.get('line')}: unknown directive {d['directive']!r}"
        for d, trail in _walk(tree)
        if d["directive"] not in crossplane.analyzer.DIRECTIVES
        and not any(t.split(" ", 1)[0] in DATA_BLOCKS for t in trail)
    ]
    return tree, errors


def _walk(block: list[dict[str, Any]], trail: tuple[str, ...] = ()) -> Iterator[tuple[dict[str, Any], tuple[str, ...]]]:
    for d in block:
        yield d, trail
        if "block" in d:
            yield from _walk(d["block"], (*trail, _label(d)))


def _label(d: dict[str, Any]) -> str:
    return " ".join([d["directive"], *d.get("args", [])])


def _where(d: dict[str, Any], trail: tuple[str, ...]) -> str:
    return f"`{_label(d)}` (line {d.get('line')}{', in ' + ' > '.join(trail) if trail else ''})"


def _guard_problem(location: dict[str, Any], allowlist: str) -> Optional[str]:
    block = location.get("block") or []
    first = block[0] if block else {}
    body = first.get("block") or []
    if (
        first.get("directive") == "if"
        # crossplane drops the condition's parentheses and quotes: the words as nginx reads them
        and first.get("args") == ["$request_uri", "!~", allowlist]
        and len(body) == 1
        and body[0].get("directive") == "return"
        and re.fullmatch(r"4[0-9]{2}", (body[0].get("args") or [""])[0])
    ):
        return None
    return (
        f"`location {' '.join(location.get('args', []))}` (line {location.get('line')}) does not start with its guard "
        f'`if ($request_uri !~ "{allowlist}") {{ return 404; }}`: without it a raw URI such as '
        "`/v1/fleet/../control/...` is forwarded as sent"
    )


def _upstream_groups(tree: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{name: its `server` directives} of every `upstream` block."""
    return {
        (d.get("args") or [""])[0]: [s for s in d.get("block") or [] if s["directive"] == "server"]
        for d, _ in _walk(tree)
        if d["directive"] == "upstream"
    }


def _target_problem(
    d: dict[str, Any], trail: tuple[str, ...], groups: dict[str, list[dict[str, Any]]]
) -> Optional[str]:
    """Why forwarding directive `d` (a plain upstream) may reach another host than the pod's SuperLink."""
    target = (d.get("args") or [""])[0]
    host = target if target.startswith("unix:") else target.split("://", 1)[-1]
    if host in groups:
        outside = [(s.get("args") or [""])[0] for s in groups[host]]
        outside = [a for a in outside if not LOOPBACK.fullmatch(a)]
        if not groups[host] or outside:
            return f"{_where(d, trail)} forwards to `upstream {host}`, whose servers {outside} are not loopback"
        return None
    if not LOOPBACK.fullmatch(host):
        return f"{_where(d, trail)} forwards to `{host}`, not to the SuperLink over loopback"
    return None


def _allowed_location_problems(location: dict[str, Any], allowlist: str) -> Iterator[str]:
    guard = _guard_problem(location, allowlist)
    if guard:
        yield guard
    block = location.get("block") or []
    forwards = [d for d in block if d["directive"] in FORWARDING]
    if len(forwards) > 1:
        yield f"`location {' '.join(location['args'])}` forwards {len(forwards)} times"
    for d in forwards:
        target = (d.get("args") or [""])[0]
        if not PLAIN_UPSTREAM.fullmatch(target):
            yield (
                f"{_where(d, ('location ' + ' '.join(location['args']),))} forwards to a URI part or a variable: "
                "only `scheme://host:port` keeps the request on the path the guard allowed"
            )
    for d in block[1 if guard is None else 0 :]:
        if "block" in d and d["directive"] != "limit_except":
            yield f"{_where(d, ('location ' + ' '.join(location['args']),))} nests a block past the guard"


def problems(text: str) -> list[str]:
    """Why this nginx.conf may forward a request to a non-Fleet path ([] when it cannot)."""
    tree, errors = parse(text)
    if errors:
        return [f"nginx.conf does not parse: {e}" for e in errors]
    out: list[str] = []
    # A `server` with a block is a listener; one without (in `upstream`) is an address the proxy forwards to.
    servers = [(d, t) for d, t in _walk(tree) if d["directive"] == "server" and "block" in d]
    if len(servers) != 1:
        out.append(f"nginx.conf has {len(servers)} `server` blocks, not one: each more is a listener to judge")
    allowed: set[int] = set()  # id() of the forwarding directives that are judged in their location
    groups = _upstream_groups(tree)
    for server, _ in servers[:1]:
        for loc in server.get("block") or []:
            key = tuple(loc.get("args", []))
            if loc["directive"] == "location" and key in ALLOWED_LOCATIONS:
                out.extend(_allowed_location_problems(loc, ALLOWED_LOCATIONS[key]))
                forwards = [d for d in loc.get("block") or [] if d["directive"] in FORWARDING]
                allowed.update(id(d) for d in forwards)
                within = ("location " + " ".join(key),)
                plain = [d for d in forwards if PLAIN_UPSTREAM.fullmatch((d.get("args") or [""])[0])]
                out.extend(p for d in plain if (p := _target_problem(d, within, groups)))
    for d, trail in _walk(tree):
        if d["directive"] == "include":
            out.append(f"{_where(d, trail)}: an included file is not in the ConfigMap and cannot be judged")
        elif d["directive"] in URI_CHANGING:
            out.append(f"{_where(d, trail)} changes the URI or skips the guard before a request is forwarded")
        elif d["directive"] in FORWARDING and id(d) not in allowed:
            out.append(
                f"{_where(d, trail)} forwards from outside `location /v1/fleet/` and `location = /health` of the one "
                "server: a path that is not the Fleet API can reach the upstream"
            )
    return out


def _config_path(container: dict[str, Any]) -> str:
    words = [w for w in as_list(container.get("command")) + as_list(container.get("args")) if isinstance(w, str)]
    for i, w in enumerate(words[:-1]):
        if w == "-c":
            return words[i + 1]
    return DEFAULT_CONFIG


def runs_nginx(container: dict[str, Any]) -> bool:
    command = as_list(container.get("command"))
    first = command[0] if command and isinstance(command[0], str) else ""
    return os.path.basename(first) == "nginx" or (not command and "nginx" in (as_str(container.get("image")) or ""))


def config_text(objects: Objects, pod: PodSite, container: dict[str, Any]) -> tuple[Optional[str], str]:
    """(nginx.conf, where it was read) of an nginx container: the key of the ConfigMap volume mounted
    at the config file's directory; (None, why) when the objects do not hold it."""
    path = _config_path(container)
    folder, key = os.path.dirname(path), os.path.basename(path)
    volumes = {as_str(v.get("name")): v for v in map(as_dict, as_list(pod.spec.get("volumes")))}
    for m in map(as_dict, as_list(container.get("volumeMounts"))):
        if as_str(m.get("mountPath")) != folder or m.get("subPath"):
            continue
        cm = as_dict(volumes.get(as_str(m.get("name")), {}).get("configMap"))
        name = as_str(cm.get("name"))
        for obj in objects.of_kind("ConfigMap"):
            ref = Ref.of(obj)
            if ref.name == name and same_namespace(ref.namespace, pod.ref.namespace):
                text = as_dict(obj.get("data")).get(key)
                if isinstance(text, str):
                    return text, f"ConfigMap {ref} key {key}"
        return None, f"ConfigMap {name} key {key} (mounted at {folder}) is not among the objects"
    return None, f"{path} comes from no ConfigMap volume, so it is not among the objects"
