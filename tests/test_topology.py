"""The federation's topology as Mermaid (review/topology.py): for every golden stack it is deterministic, its node
ids are valid, and its solid edges are exactly the flows the golden render's NetworkPolicies allow, read back from
the committed YAML (a negative control drops one link and the comparison fails). `render --format mermaid` prints
it; `render` and `render --format yaml` still print the golden YAML byte for byte."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from typing import Any

import pytest
import yaml

from flower_federation.builders import network_links
from flower_federation.builders.network_links import POD_NAME_LABEL, Peer, _freeze
from flower_federation.cli.main import main as cli
from flower_federation.plan import load_plan
from flower_federation.review import topology
from flower_federation.review.topology import Edge, mermaid, peer_id
from tests.support.golden import GOLDEN_DIR, GOLDENS, Golden

EDGE = re.compile(r'^  (\w+) -->\|"([^"]*)"\| (\w+)$')
NODE = re.compile(r"^\s+(\w+)[\[\(\{]")


def _plan(golden: Golden) -> Any:
    """The golden's plan, with the outputs of the stacks it reads (a site's hub address comes from them)."""
    raw = yaml.safe_load(golden.settings.read_text())["config"]["flower-federation:federation"]
    reads = {stack: json.loads((GOLDEN_DIR / f"{name}.outputs.json").read_text()) for stack, name in golden.reads}
    return load_plan(copy.deepcopy(raw), golden.name, stack_outputs=reads)


def mermaid_edges(text: str) -> set[Edge]:
    """The solid edges of a diagram, one per port (`8000/TCP, 53/UDP · TLS`)."""
    found = set()
    for line in text.splitlines():
        if m := EDGE.match(line):
            for port in m.group(2).split(" · ")[0].split(", "):
                number, proto = port.split("/")
                found.add(Edge(m.group(1), m.group(3), int(number), proto))
    return found


def _clusters(golden: Golden) -> list[list[dict[str, Any]]]:
    """The golden render's objects, per cluster (`# cluster:` headers split a multi-cluster render)."""
    text = golden.rendered.read_text()
    parts = re.split(r"^# cluster: .*\n", text, flags=re.M) if text.startswith("# cluster:") else [text]
    return [[d for d in yaml.safe_load_all(p) if d] for p in parts if p.strip()]


def policy_edges(golden: Golden) -> set[Edge]:
    """Every flow the rendered NetworkPolicies allow, as (source, target, port, protocol), an end being the
    component whose pods a selector picks (in the policy's own cluster) or a peer outside."""
    found: set[Edge] = set()
    for objects in _clusters(golden):
        policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
        own = {
            frozenset(
                p["spec"]["podSelector"]["matchLabels"].items()
            ): f"c_{re.sub(r'[^A-Za-z0-9_]', '_', p['metadata']['name'])}"
            for p in policies
            if not p["metadata"]["name"].endswith("-pair")
        }

        def ends(peer: dict[str, Any] | None, own: dict[frozenset[tuple[str, str]], str] = own) -> list[str]:
            if peer is None:
                return ["p_anywhere"]
            if set(peer) == {"podSelector"}:
                labels = {k: v for k, v in peer["podSelector"]["matchLabels"].items() if k != POD_NAME_LABEL}
                members = [node for sel, node in own.items() if set(labels.items()) <= sel]
                if members:
                    return members
            return [peer_id(Peer(_freeze(peer)))]

        for p in policies:
            labels = {k: v for k, v in p["spec"]["podSelector"]["matchLabels"].items() if k != POD_NAME_LABEL}
            me = own[frozenset(labels.items())]
            for direction, key, mine_first in (("ingress", "from", False), ("egress", "to", True)):
                for rule in p["spec"].get(direction, []):
                    peers = rule.get(key) or [None]
                    for peer in peers:
                        for other in ends(peer):
                            for port in rule["ports"]:
                                s, t = (me, other) if mine_first else (other, me)
                                found.add(Edge(s, t, port["port"], port["protocol"]))
    return found


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_the_diagram_is_deterministic_and_its_edges_are_the_networkpolicies(golden: Golden) -> None:
    plan = _plan(golden)
    text = mermaid(plan)
    assert text == mermaid(_plan(golden))
    assert text.startswith("flowchart LR\n")
    assert mermaid_edges(text) == policy_edges(golden) == topology.edges(plan)
    ids = {m.group(1) for line in text.splitlines() if (m := NODE.match(line))}
    assert ids and all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", i) and i not in ("end", "graph", "subgraph") for i in ids)


def test_dropping_a_link_makes_the_comparison_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a diagram made from one link fewer than the policies no longer matches them."""
    golden = next(g for g in GOLDENS if g.name == "process-distributed")
    real = network_links.components_and_links

    def one_fewer(plan: Any) -> Any:
        components, links = real(plan)
        return components, links[1:]

    monkeypatch.setattr(topology, "components_and_links", one_fewer)
    assert mermaid_edges(mermaid(_plan(golden))) != policy_edges(golden)


def test_tls_is_shown_where_the_plan_has_it() -> None:
    text = {g.name: mermaid(_plan(g)) for g in GOLDENS if g.name in ("dev", "site-from-hub")}
    assert 'c_demo_supernode_cpu -->|"8000/TCP · TLS"| c_demo_superlink' in text["dev"]
    # A site dials its hub's address (from the hub stack's outputs) over TLS.
    assert 'c_hospital_b_supernode_gpu -->|"443/TCP · TLS"| p_ip_203_0_113_0_24' in text["site-from-hub"]
    # The gRPC era's ServerAppIo hop is plaintext, and the diagram says so.
    grpc = {
        "name": "g",
        "namespace": "g",
        "version": "1.30.0",
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "superlink": {"superexecImage": "flwr/superexec:1.30.0"},
        "supernodes": {
            "pools": [{"name": "p", "replicas": 1, "images": {"superexecClientApp": "flwr/superexec:1.30.0"}}]
        },
    }
    assert "plaintext" in mermaid(load_plan(grpc, "g"))


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli(list(argv)) == 0
    return out.getvalue()


def test_render_format_mermaid_and_the_default_yaml() -> None:
    hub = next(g for g in GOLDENS if g.name == "hub")
    reads = [a for a in hub.argv(hub.outputs) if a.startswith("--stack-outputs")]
    argv = ["render", "--config-file", str(hub.settings), *reads]
    assert _cli(*argv, "--format", "mermaid") == mermaid(_plan(hub))
    assert _cli(*argv) == _cli(*argv, "--format", "yaml") == hub.rendered.read_text()
