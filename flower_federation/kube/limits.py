"""The API server's size and length limits on any object, checked on plain manifests before anything is
registered, so an object Kubernetes would refuse is never sent halfway through `pulumi up`.

Each limit as the API server counts it (kubernetes/kubernetes, commit 000f2605, read 2026-11-26):

- ConfigMap: `pkg/apis/core/validation/validation.go` `ValidateConfigMap` sums `len(value)` of every
  `data` and `binaryData` entry (the value's bytes; `binaryData` decoded, not its base64) and refuses
  `totalSize > core.MaxSecretSize`, 1 MiB (1,048,576 bytes). Key names are not counted.
- Secret: `ValidateSecret`, the same sum over `data` values (`stringData` is merged into `data` before
  validation, so it counts as its bytes) against the same `core.MaxSecretSize`.
- Annotations: apimachinery `ValidateAnnotationsSize`: the sum of `len(key) + len(value)` of one
  object's annotations at most `TotalAnnotationSizeLimitB`, 256 KiB (262,144); a pod template's own
  annotations are checked the same way. Keys must be qualified names (`IsQualifiedName`).
- Labels: `ValidateLabels`: qualified-name keys, values at most 63 characters of
  `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?` (`IsValidLabelValue`).
- Names: every object's `metadata.name` is a DNS-1123 subdomain of at most 253 characters
  (`NameIsDNSSubdomain`), and a Service's, a Namespace's, a Job's a DNS label of at most 63
  (`ValidateServiceName`: an RFC 1035 label; a Job's pods carry `job-name=<name>`, a label value);
  a StatefulSet's at most 52 (its pods' `controller-revision-hash=<name>-<10 character hash>`, a label
  value). One check over every rendered object, so no name is left to a list.
- The whole object: etcd refuses a request over `--max-request-bytes`, 1.5 MiB by default, and the
  API server writes more than we send (managedFields, status, the request's own framing). We hold our
  JSON to OBJECT_MAX, 1.25 MiB: the 256 KiB margin is the annotations' own ceiling, room for what the
  API server adds to an object whose data alone may reach 1 MiB. JSON overstates the protobuf etcd
  stores (no quoting or escaping there), so the margin errs on the safe side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.kube.naming import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN_MAX,
    NAME_PART,
    NAME_PART_MAX,
    PREFIX_MAX,
    STATEFULSET_NAME_MAX,
    is_label_value,
)
from flower_federation.kube.objects import Manifest, ObjectKey, pod_template_of

DATA_MAX = 1024 * 1024  # core.MaxSecretSize
ANNOTATIONS_MAX = 256 * 1024  # TotalAnnotationSizeLimitB
OBJECT_MAX = 1024 * 1024 + 256 * 1024  # ours, under etcd's 1.5 MiB request limit (the module docstring)
LABEL_VALUE_MAX = QUALIFIED_NAME_MAX = NAME_PART_MAX
# A kind whose name is a DNS label (module docstring), with its limit; any other kind's: a DNS subdomain, 253.
LABEL_NAMED = {
    "Service": DNS_LABEL_MAX,
    "Namespace": DNS_LABEL_MAX,
    "Job": DNS_LABEL_MAX,
    "StatefulSet": STATEFULSET_NAME_MAX,
}


@dataclass(frozen=True)
class Breach:
    """One limit an object breaks: `what` (data, object, annotations, labels, name), the figure and the limit
    (bytes or characters; 0 where the shape is wrong, not the size), and the sentence saying so."""

    key: ObjectKey
    what: str
    figure: int
    limit: int
    detail: str

    def __str__(self) -> str:
        return f"{self.key}: {self.detail}"


def data_size(m: Manifest, extra: int = 0) -> int:
    """What the API server counts against DATA_MAX: the bytes of every value (base64 of binaryData decoded)."""
    total = extra
    for value in (m.get("data") or {}).values():
        total += len(value) * 3 // 4 if m["kind"] == "Secret" else len(str(value).encode())
    for value in (m.get("stringData") or {}).values():
        total += len(str(value).encode())
    binary: dict[str, Any] = dict(m.get("binaryData") or {})  # type: ignore[call-overload]
    for value in binary.values():
        total += len(value) * 3 // 4
    return total


def object_size(m: Manifest, extra: int = 0) -> int:
    return len(json.dumps(m, separators=(",", ":"), default=str).encode()) + extra


def qualified_name_problem(key: str) -> Optional[str]:
    """Why `key` is not a qualified name (a label or annotation key), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "has more than one '/'"
    if "/" in key and (not prefix or len(prefix) > PREFIX_MAX or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"its prefix '{prefix}' must be a DNS subdomain of at most {PREFIX_MAX} characters"
    if not name or len(name) > QUALIFIED_NAME_MAX or not NAME_PART.fullmatch(name):
        return (
            f"its name '{name}' must be at most {QUALIFIED_NAME_MAX} alphanumerics, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return None


def _metadata_breaches(key: ObjectKey, meta: dict[str, Any], where: str) -> Iterator[Breach]:
    labels: dict[str, Any] = meta.get("labels") or {}
    for k, v in labels.items():
        why = qualified_name_problem(str(k))
        if why:
            yield Breach(key, "labels", 0, 0, f"{where}label key '{k}' {why}")
        value = str(v)
        if not is_label_value(value):
            yield Breach(
                key,
                "labels",
                len(value),
                LABEL_VALUE_MAX,
                f"{where}label {k}: value of {len(value)} characters; the API server takes at most "
                f"{LABEL_VALUE_MAX} alphanumerics, '-', '_' or '.', starting and ending alphanumeric",
            )
    annotations: dict[str, Any] = meta.get("annotations") or {}
    for k in annotations:
        why = qualified_name_problem(str(k))
        if why:
            yield Breach(key, "annotations", 0, 0, f"{where}annotation key '{k}' {why}")
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX:
        yield Breach(
            key,
            "annotations",
            size,
            ANNOTATIONS_MAX,
            f"{where}annotations total {size:,} bytes (keys and values); the API server refuses more than "
            f"{ANNOTATIONS_MAX:,}",
        )


def name_breach(key: ObjectKey) -> Optional[Breach]:
    """The limit `key`'s name breaks (its kind's: LABEL_NAMED, else a DNS subdomain), or None."""
    limit = LABEL_NAMED.get(key.kind, DNS_SUBDOMAIN_MAX)
    shape = DNS1123_LABEL if key.kind in LABEL_NAMED else DNS1123_SUBDOMAIN
    if len(key.name) <= limit and shape.fullmatch(key.name):
        return None
    why = " (Kubernetes adds a revision hash to it)" if key.kind == "StatefulSet" else ""
    what = "DNS label" if key.kind in LABEL_NAMED else "DNS subdomain"
    return Breach(
        key,
        "name",
        len(key.name),
        limit,
        f"object name '{key.name}' has {len(key.name)} characters; a {key.kind} name is a {what} of at most "
        f"{limit}{why}",
    )


def breaches(m: Manifest, extra_data: int = 0) -> list[Breach]:
    """Every limit `m` breaks. `extra_data`: bytes the shell adds to its data at deploy time (known here by
    an upper bound), counted in the data and the whole object."""
    key = ObjectKey.of(m)
    found = [b for b in [name_breach(key)] if b is not None]
    found += _metadata_breaches(key, dict(m.get("metadata") or {}), "")
    template = pod_template_of(m)
    if template is not None:
        found += _metadata_breaches(key, dict(template.get("metadata") or {}), "its pod template's ")
    if m["kind"] in ("ConfigMap", "Secret"):
        size = data_size(m, extra_data)
        if size > DATA_MAX:
            found.append(
                Breach(
                    key,
                    "data",
                    size,
                    DATA_MAX,
                    f"data of {size:,} bytes; the API server refuses more than {DATA_MAX:,}",
                )
            )
    size = object_size(m, extra_data)
    if size > OBJECT_MAX:
        found.append(
            Breach(
                key,
                "object",
                size,
                OBJECT_MAX,
                f"{size:,} bytes as JSON; objects are held to {OBJECT_MAX:,} to stay under etcd's 1.5 MiB "
                "request limit",
            )
        )
    return found
