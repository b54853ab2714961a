"""From raw stack config to a validated, resolved federation plan (or a ConfigError
listing every problem). Nothing here touches Pulumi."""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Optional

import pydantic

from . import nodeauth, rules
from .config import Federation, Model, Pool
from .dialects import Dialect, FlowerVersion, Ports, dialect_for
from .errors import ConfigError, Problem, format_path, problem
from .naming import Names


@dataclass(frozen=True)
class Trust:
    """Where TLS material lives. The SuperLink mounts `server_secret` (tls.crt, tls.key)
    and the CA from `ca_secret`; everything that dials it mounts only `ca_secret`, so a
    tampered server Secret makes clients fail instead of trusting it.

    `source` says who makes the server Secret (generate: us, from pulumi-tls;
    certManager: cert-manager; existingSecret: the user); `trust_source` who makes the
    CA Secret (generated / copyFromServerSecret: us; existingSecret: the user)."""

    server_secret: str
    ca_secret: str
    ca_key: str = "ca.crt"
    source: str = "generate"
    trust_source: str = "generated"

    @property
    def creates_ca_secret(self) -> bool:
        return self.trust_source != "existingSecret"


@dataclass(frozen=True)
class FederationPlan:
    spec: Federation
    name: str
    version: FlowerVersion
    dialect: Dialect
    ports: Ports
    trust: Optional[Trust]
    # nodeAuth.keySource=config: {pool: {slot: OpenSSH private key}} from secret config.
    node_auth_keys: Optional[dict[str, dict[str, str]]] = None

    @property
    def names(self) -> Names:
        return Names(self.name)

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def process_isolation(self) -> bool:
        return self.spec.isolation_mode == "process"

    @property
    def distributed(self) -> bool:
        return self.process_isolation and self.spec.superexec_placement == "distributed"

    def service_host(self, service: str) -> str:
        return f"{service}.{self.namespace}.svc.{self.spec.cluster_domain}"

    @property
    def superlink_host(self) -> str:
        return self.service_host(self.names.superlink)

    @property
    def fleet_address(self) -> str:
        return f"{self.superlink_host}:{self.ports.fleet}"

    @property
    def control_address(self) -> str:
        return f"{self.superlink_host}:{self.ports.control}"

    def default_image(self, repository: str) -> str:
        return f"flwr/{repository}:{self.version}"

    @property
    def superlink_image(self) -> str:
        return self.spec.superlink.image or self.default_image("superlink")

    def supernode_image(self, pool: Pool) -> str:
        return pool.images.supernode or self.spec.supernodes.image or self.default_image("supernode")


def _sort_key(p: Problem) -> list:
    # Natural order, so pools[2] comes before pools[10].
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.path)] + [p.message]


def load_plan(raw: Any, stack: str, node_auth_keys: Any = None) -> FederationPlan:
    """Validate `raw` (the `federation` config value) and resolve it, or raise
    ConfigError with every problem found. `node_auth_keys` is the `nodeAuthKeys` secret
    config value (only read when nodeAuth.keySource is config)."""
    if raw is None:
        raise ConfigError([Problem("federation", "missing: set the flower-federation:federation config key")])
    if not isinstance(raw, dict):
        raise ConfigError([Problem("federation", f"must be a mapping, not {type(raw).__name__}")])

    problems: list[Problem] = []
    spec: Optional[Federation] = None
    try:
        spec = Federation.model_validate(raw)
    except pydantic.ValidationError as err:
        problems += _pydantic_problems(err)
    problems += rules.check(raw, stack)
    uses_supplied_keys = spec is not None and spec.node_auth.enabled and spec.node_auth.key_source == "config"
    if uses_supplied_keys and not problems:
        problems += nodeauth.supplied_key_problems(spec, node_auth_keys)
    if problems:
        raise ConfigError(sorted(set(problems), key=_sort_key))
    assert spec is not None

    version, _ = rules.resolve_version(raw)
    dialect = dialect_for(version)
    name = spec.name or stack
    ports = dialect.resolve_ports(spec.superlink.service.ports.model_dump(by_alias=True))
    names = Names(name)
    trust = None if spec.insecure else _trust(spec, names)
    keys = None
    if uses_supplied_keys:
        keys = {pool: {str(slot): text for slot, text in slots.items()} for pool, slots in node_auth_keys.items()}
    return FederationPlan(spec=spec, name=name, version=version, dialect=dialect, ports=ports, trust=trust,
                          node_auth_keys=keys)


def default_trust_source(tls_source: str) -> str:
    return "generated" if tls_source == "generate" else "copyFromServerSecret"


def _trust(spec: Federation, names: Names) -> Trust:
    tls = spec.tls
    trust_source = tls.trust.source or default_trust_source(tls.source)
    server = tls.existing_secret if tls.source == "existingSecret" else names.server_tls_secret
    if trust_source == "existingSecret":
        return Trust(server, tls.trust.existing_secret, tls.trust.key, tls.source, trust_source)
    return Trust(server, names.ca_secret, "ca.crt", tls.source, trust_source)


def _pydantic_problems(err: pydantic.ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden":
            out.append(problem(loc, _unknown_key_message(loc)))
        else:
            msg = e["msg"]
            if e["type"] in ("model_type", "dict_type"):
                msg = "must be a mapping"
            elif loc == ("version",) and e["type"] == "string_type":
                msg = f'must be a string; quote it in YAML, e.g. version: "{e["input"]}.0"' 
            out.append(problem(loc, msg))
    return out


def _unknown_key_message(loc: tuple) -> str:
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    valid = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f"unknown key '{key}'; did you mean '{close[0]}'?"
    return f"unknown key '{key}'; valid keys: {', '.join(valid)}"


def _model_at(loc: tuple) -> Optional[type[Model]]:
    """The config model class found at a config path, following lists and Optionals."""
    current: Any = Federation
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        if not (isinstance(current, type) and issubclass(current, Model)):
            return None
        by_alias = {(f.alias or n): f for n, f in current.model_fields.items()}
        if part not in by_alias:
            return None
        current = by_alias[part].annotation
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, Model) else None


def _unwrap(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


__all__ = ["FederationPlan", "Trust", "load_plan", "ConfigError", "format_path"]
