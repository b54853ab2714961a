"""Names of things the stack refers to (rules/references.py): Secrets, classes, cert-manager's issuer, a GPU's
extended resource, a Secret's data key. Each reached its object as written: a newline, a space or `;` passed validate
and render (the attacker's j3, g1, l1 and sweep), and the API server would refuse the object at `pulumi up`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.validation import assert_valid, cfg, messages_by_path, sts_pool, with_settings

BASE = cfg(name="demo", version="1.42.0")
HOSTILE = ["zq9\n", "zq9 x", "zq9;{", "X_zq9", "zq9$(id)", "zq9\u00a0", "a" * 254]

# (setting, its path, a value it takes)
FIELDS = [
    ("superlink__ingress__className", "superlink.ingress.className", "nginx"),
    ("superlink__ingress__tlsSecretName", "superlink.ingress.tlsSecretName", "fl-tls"),
    ("superlink__persistence__storageClassName", "superlink.persistence.storageClassName", "fast-ssd.example.org"),
    ("tls__existingSecret", "tls.existingSecret", "server-tls"),
    ("tls__trust__existingSecret", "tls.trust.existingSecret", "ca"),
    ("tls__certManager__issuerRef__name", "tls.certManager.issuerRef.name", "ca-issuer"),
    ("tls__certManager__issuerRef__group", "tls.certManager.issuerRef.group", "cert-manager.io"),
]


def _settings(key: str, value: str) -> dict[str, Any]:
    """A config where `key` applies (its source set), with `key` = value."""
    settings: dict[str, Any] = {key: value}
    if key.startswith("superlink__ingress"):
        settings["superlink__ingress__host"] = "fl.example.org"
    if key == "tls__existingSecret":
        settings["tls__source"] = "existingSecret"
    if key == "tls__trust__existingSecret":
        settings.update(
            tls__source="existingSecret", tls__existingSecret="server-tls", tls__trust__source="existingSecret"
        )
    if key.startswith("tls__certManager"):
        settings["tls__source"] = "certManager"
        settings.setdefault("tls__certManager__issuerRef__name", "ca-issuer")
    return settings


@pytest.mark.parametrize(("key", "path", "good"), FIELDS)
def test_a_name_the_api_server_refuses_is_refused_at_its_path(key: str, path: str, good: str) -> None:
    assert messages_by_path(with_settings(BASE, **_settings(key, good))) == {}
    for value in HOSTILE:
        got = messages_by_path(with_settings(BASE, **_settings(key, value)))
        assert repr(value) in got.get(f"federation.{path}", ""), (value, got)


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("runtimeClassName", "nvidia", ["Bad_Name; $(id)\n", "nvidia\n", "nvidia x", "a" * 254]),
        ("resourceName", "nvidia.com/gpu", ["nvidia.com/gpu x;{", "nvidia.com/gpu\n", "gpu", "Nvidia.com/gpu", "x/"]),
    ],
)
def test_a_pools_gpu_names_are_held_to_their_grammar(key: str, good: str, bad: list[str]) -> None:
    def pool_with(value: str) -> dict[str, Any]:
        return cfg(sts_pool("cpu", gpu={"enabled": True, "mountAll": True, "vendor": "nvidia", key: value}))

    assert_valid(pool_with(good))
    for value in bad:
        got = messages_by_path(pool_with(value))
        assert repr(value) in got.get(f"federation.supernodes.pools[0].gpu.{key}", ""), (value, got)


@pytest.mark.parametrize("key", ["ca.crt", "tls-ca_1.pem"])
def test_a_trust_key_is_a_data_key(key: str) -> None:
    assert messages_by_path(with_settings(BASE, tls__trust__key=key)) == {}


@pytest.mark.parametrize("key", ["ca.crt\n", "ca.crt x", "ca.crt;{", "..ca", "ca/crt", "a" * 254, ""])
def test_a_trust_key_that_is_no_data_key_is_refused(key: str) -> None:
    got = messages_by_path(with_settings(BASE, tls__trust__key=key))
    assert "federation.tls.trust.key" in got, got


@pytest.mark.parametrize("value", ["Fast SSD", "fast\n", "a;b"])
def test_a_claim_templates_storage_class_is_a_dns_subdomain(value: str) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": value,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    got = messages_by_path(cfg(sts_pool("a", volumeClaimTemplates=[claim])))
    assert value in got.get("federation.supernodes.pools[0].volumeClaimTemplates[0].spec.storageClassName", ""), got


def test_a_kubeconfig_context_is_free_form_but_for_control_characters() -> None:
    """A context name reaches no object (it picks a kubeconfig's context): any name kubeconfig takes is fine."""

    def multi(context: str) -> dict[str, Any]:
        return cfg(
            sts_pool("a1", cluster="east"),
            name="multi",
            version="1.42.0",
            clusters={"east": {"kubeconfig": "apiVersion: v1\nkind: Config\n", "context": context}},
            superlink={"cluster": "east"},
        )

    assert messages_by_path(multi("arn:aws:eks:eu-west-1:1234:cluster/Prod East")) == {}
    for context in ("east\n", "east\x00", "east\u2028x"):
        got = messages_by_path(multi(context))
        assert repr(context) in got.get("federation.clusters.east.context", ""), got


@pytest.mark.parametrize(("key", "path", "good"), FIELDS)
def test_an_empty_name_is_unset_where_it_always_was(key: str, path: str, good: str) -> None:
    """A review's find: "" reached no object for these (the builders leave it out, or cert-manager defaults an
    issuerRef's group), so configs that say "" kept working; the grammar refuses it only where it would reach one."""
    got = messages_by_path(with_settings(BASE, **_settings(key, "")))
    if path in ("tls.certManager.issuerRef.name",):
        assert "is not an Issuer's name" in got[f"federation.{path}"]
    elif path in ("tls.existingSecret", "tls.trust.existingSecret"):
        assert got[f"federation.{path}"].startswith("name the ")  # its source's own rule: a Secret must be named
    else:
        assert got == {}, got
