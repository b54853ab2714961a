"""Kubernetes manifests as text: every document, read as kubectl reads it (go-yaml v2,
`kube/goyaml.py`), grouped by cluster. Our `render` marks each cluster's objects with a
`# cluster: NAME` comment line; a file without one is one cluster. Objects of different
clusters never select or cover one another."""

from __future__ import annotations

import re
from typing import Any

from flower_federation.kube.goyaml import load_helm_values

CLUSTER_MARK = re.compile(r"^# cluster: (\S+)[ \t]*$", re.MULTILINE)
DEFAULT_CLUSTER = "default"


class NotManifests(ValueError):
    """The text is YAML but a document of it is not a Kubernetes object."""


def read_clusters(text: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """[(cluster, objects)] in the text's order. Raises yaml.YAMLError (with line numbers of the
    whole text) or NotManifests."""
    marks = list(CLUSTER_MARK.finditer(text))
    cuts = [(DEFAULT_CLUSTER, 0)] + [(m.group(1), m.start()) for m in marks]
    groups: dict[str, list[dict[str, Any]]] = {}
    for i, (cluster, start) in enumerate(cuts):
        end = cuts[i + 1][1] if i + 1 < len(cuts) else len(text)
        # Padded with the lines before it, so a YAML error names the line of the whole text.
        segment = "\n" * text.count("\n", 0, start) + text[start:end]
        objects = []
        for n, doc in enumerate(load_helm_values(segment)):
            if doc is None:
                continue
            if isinstance(doc, dict) and "kind" not in doc and isinstance(doc.get("config"), dict):
                # A Pulumi stack settings file: its objects are what `render` makes of it.
                raise NotManifests(
                    "this is a Pulumi stack settings file (`config:`), not Kubernetes objects: render it first, "
                    "`python -m flower_federation render --config-file FILE | python -m flower_federation check -`"
                )
            if not isinstance(doc, dict) or "kind" not in doc:
                raise NotManifests(f"document {n + 1} of cluster {cluster} is not a Kubernetes object (no kind)")
            objects.append(doc)
        if objects or cluster != DEFAULT_CLUSTER:
            groups.setdefault(cluster, []).extend(objects)
    return list(groups.items())
