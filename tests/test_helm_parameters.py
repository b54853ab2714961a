"""docs/helm-parameters.md accounts for every parameter of Flower's SuperNode Helm chart (issue 12 §2): each row
of the chart's parameter tables appears once, with a status, a reason where it is not simply carried, and a config
path that exists. docs/reference/flower-supernode-helm-chart.md is a verbatim copy of the chart's documentation
(shared/seeds/flower-supernode-helm-chart.md), kept in the repository so a clean clone can run this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower_federation.importers.helm_parameters import (
    CHART_FILE,
    MAPPING_FILE,
    STATUSES,
    Mapping,
    chart_parameters,
    mappings,
    path_problem,
    read_mappings,
)
from flower_federation.plan import load_plan

SEED = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "flower-supernode-helm-chart.md"


def table_problems(chart: list[str], rows: list[Mapping]) -> list[str]:
    """Everything wrong with a mapping table, given the chart's parameters."""
    out = []
    listed = [r.parameter for r in rows]
    out += [f"{p}: missing" for p in chart if p not in listed]
    out += [f"{p}: not a parameter of the chart" for p in listed if p not in chart]
    out += [f"{p}: listed {listed.count(p)} times" for p in sorted(set(listed)) if listed.count(p) > 1]
    for r in rows:
        if r.status not in STATUSES:
            out.append(f"{r.parameter}: unknown status '{r.status}'")
        if r.status in ("carried", "partial") and r.config_path is None:
            out.append(f"{r.parameter}: {r.status} needs a config path")
        if r.status == "refused" and r.config_path is not None:
            out.append(f"{r.parameter}: refused, yet names {r.config_path}")
        if r.status != "carried" and r.note in ("", "—"):
            out.append(f"{r.parameter}: {r.status} needs a reason")
        if r.config_path is not None and (why := path_problem(r.config_path)):
            out.append(f"{r.parameter}: {r.config_path}: {why}")
    return out


def test_every_chart_parameter_is_accounted_for_once_with_a_real_path() -> None:
    chart = chart_parameters(CHART_FILE.read_text(encoding="utf-8"))
    # The chart's tables: Helm, global, TLS, SuperNode and SuperExec parameters (two rows are listed twice).
    assert len(chart) == 136 and chart[0] == "nameOverride" and chart[-1] == "superexec.networkPolicy.extraEgress"
    assert table_problems(chart, list(mappings())) == []


def test_a_missing_or_wrong_row_fails_the_check() -> None:
    # Negative controls: the check above is only as good as these.
    chart = chart_parameters(CHART_FILE.read_text(encoding="utf-8"))
    rows = list(mappings())
    dropped = [r for r in rows if r.parameter != "supernode.tolerations"]
    assert table_problems(chart, dropped) == ["supernode.tolerations: missing"]
    typo = [
        Mapping(r.parameter, "supernodes.pools[].nodeSelectr", r.status, r.note)
        if r.parameter == "supernode.nodeSelector"
        else r
        for r in rows
    ]
    assert table_problems(chart, typo) == [
        "supernode.nodeSelector: supernodes.pools[].nodeSelectr: no key 'nodeSelectr' under 'supernodes.pools[]'"
    ]
    unexplained = [
        Mapping(r.parameter, None, "refused", "—") if r.parameter == "supernode.lifecycle" else r for r in rows
    ]
    assert table_problems(chart, unexplained) == ["supernode.lifecycle: refused needs a reason"]
    assert table_problems(chart, rows + [rows[0]]) == ["nameOverride: listed 2 times"]


@pytest.mark.parametrize(
    "path, why",
    [
        ("supernodes.pools[].superexec.replicas", ""),
        ("supernodes.image.digest", ""),
        ("securityContext.capabilities.drop", ""),
        ("nodeAuthKeys.<pool>.<ordinal>", ""),
        ("securityContext.runAsUsr", "'runAsUsr' is not a field of securitycontext-v1.json"),
        ("supernodes.pools.name", "'pools' is a list: write 'pools[]'"),
        ("supernodes.env[].name", "'supernodes.env[]' holds no keys"),
        ("superlink.image.tag.x", "'superlink.image.tag' holds no keys"),
        ("supernodes.pools[].services", "no key 'services' under 'supernodes.pools[]'"),
    ],
)
def test_config_paths_are_resolved_against_the_config_model(path: str, why: str) -> None:
    assert path_problem(path) == why


def test_the_table_is_parsed_row_by_row() -> None:
    text = MAPPING_FILE.read_text(encoding="utf-8")
    rows = read_mappings(text)
    assert len(rows) == text.count("\n| `")
    row = {r.parameter: r for r in rows}
    assert row["superexec.replicas"].config_path == "supernodes.pools[].superexec.replicas"
    assert row["supernode.selectorLabels"] == Mapping(
        "supernode.selectorLabels", None, "refused", row["supernode.selectorLabels"].note
    )
    assert {r.status for r in rows} == set(STATUSES)


def test_the_requested_chart_settings_are_carried() -> None:
    # What issue 12 §2 asks to add, each carried (not refused) by the table.
    asked = [
        "global.annotations",
        "global.podLabels",
        "supernode.podAnnotations",
        "superexec.podAnnotations",
        "global.nodeSelector",
        "global.tolerations",
        "supernode.nodeSelector",
        "superexec.tolerations",
        "global.affinity.podAntiAffinity",
        "global.affinity.nodeAffinity.type",
        "global.affinity.nodeAffinity.matchExpressions",
        "supernode.affinity",
        "supernode.lifecycle",
        "superexec.lifecycle",
        "supernode.image.registry",
        "supernode.image.repository",
        "supernode.image.tag",
        "supernode.image.digest",
        "supernode.image.pullPolicy",
        "superexec.image.digest",
        "supernode.imagePullSecrets",
        "supernode.serviceAccount.annotations",
        "superexec.serviceAccount.labels",
        "supernode.automountServiceAccountToken",
        "supernode.service.type",
        "supernode.service.servicePortClientAppIo",
        "supernode.service.nodePortClientAppIo",
        "supernode.containerPorts.clientAppIo",
        "superexec.replicas",
    ]
    row = {r.parameter: r for r in mappings()}
    assert [p for p in asked if row[p].status != "carried"] == []
    # supernode.updateStrategy is carried for a StatefulSet's strategies (Recreate is a Deployment's).
    assert row["supernode.updateStrategy.type"].status == "partial"


def test_a_site_written_with_every_carried_path_is_valid() -> None:
    """The carried paths are not only keys of the model: a config using them together validates."""
    digest = "sha256:" + "0" * 64
    se = {"repository": "flwr/superexec", "tag": "1.41.0", "digest": digest, "pullPolicy": "Always"}
    raw = {
        "role": "site",
        "annotations": {"a": "b"},
        "podLabels": {"c": "d"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "spot", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": "soft", "nodeAffinity": {"type": "hard", "matchExpressions": []}},
        "imagePullPolicy": "IfNotPresent",
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "supernodes": {
            "image": {"registry": "registry.hub.docker.com", "repository": "flwr/supernode", "tag": "1.41.0"},
            "superlink": {"address": "my-superlink.example.com", "port": 9092, "certificate": {"existingSecret": "ca"}},
            "pools": [
                {
                    "name": "supernode",
                    "replicas": 1,
                    "images": {"superexecClientApp": se},
                    "service": {"type": "NodePort", "port": 9094, "nodePort": 30094, "portName": "clientappio"},
                    "containerPorts": {"clientAppIo": 9094, "health": 8081},
                    "networkPolicy": {"allowExternal": True},
                    "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
                    "serviceAccount": {
                        "annotations": {"iam.gke.io/gcp-service-account": "x@y.iam.gserviceaccount.com"}
                    },
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                    "superexec": {"replicas": 2, "podAnnotations": {"e": "f"}, "imagePullSecrets": ["regcred"]},
                }
            ],
        },
        "createNamespace": False,
    }
    load_plan(raw, "site")


def test_the_chart_copy_is_the_seed_verbatim() -> None:
    if not SEED.exists():
        pytest.skip(f"{SEED} is not on this machine (it lives beside the repository, not in it)")
    assert CHART_FILE.read_bytes() == SEED.read_bytes()
