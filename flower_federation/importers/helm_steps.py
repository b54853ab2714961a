"""The steps of `import helm` that compute a value rather than copy it to the path
docs/helm-parameters.md names (the parameters in `COMPUTED`): names (the chart's fullname),
isolation and SuperExec placement, images and the Flower version, the SuperLink dialled,
TLS, replicas and nodeConfig; node keys are in helm_node_auth.py, the pod steps in
helm_pods.py, where our defaults differ from the chart's in helm_defaults.py."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from flower_federation.flower.dialects import dialect_for, supported_ranges
from flower_federation.flower.versions import DEFAULT_VERSION, FlowerVersion
from flower_federation.importers import helm_node_auth, helm_pods
from flower_federation.importers.chart import CHART_NAME, POOL
from flower_federation.importers.helm_defaults import differences, exposure, semantics
from flower_federation.importers.helm_state import ChartImport

if TYPE_CHECKING:
    pass

PLACEHOLDERS = ("{index}", "{replicas}", "{pool}", "{node}")
IMAGE_KEYS = ("registry", "repository", "tag", "digest", "pullPolicy")
CERTIFICATE = "supernode.superlink.certificate"
# The chart's default SuperLink address: a placeholder of its documentation, never a real SuperLink.
PLACEHOLDER_ADDRESS = "my-superlink.example.com"
# What the steps compute (helm.py copies every other carried or partial parameter as it is).
COMPUTED = helm_pods.COMPUTED | {
    "nameOverride",
    "fullnameOverride",
    "supernode.name",
    "superexec.name",
    "supernode.enabled",
    "supernode.isolationMode",
    "superexec.enabled",
    "superexec.supernode",
    *(f"{component}.image.{key}" for component in ("supernode", "superexec") for key in IMAGE_KEYS),
    "supernode.superlink.address",
    "supernode.superlink.port",
    "tls.enabled",
    f"{CERTIFICATE}.existingSecret",
    f"{CERTIFICATE}.copyFromExistingSecret.enabled",
    f"{CERTIFICATE}.copyFromExistingSecret.secretName",
    "global.nodeAuth.enabled",
    "global.nodeAuth.authSupernodePrivateKey",
    "global.nodeAuth.authSupernodePublicKey",
    "supernode.replicas",
    "supernode.node.config",
}


def fullname(release: str, name: str, override: str) -> str:
    """The chart's `fullname` (Helm's standard _helpers.tpl): fullnameOverride, else the
    release name if it contains the chart's name, else `<release>-<name>`; cut to 63
    characters, then one trailing '-' trimmed."""
    text = override or (release if name in release else f"{release}-{name}")
    text = text[:63]
    return text[:-1] if text.endswith("-") else text


class Steps(ChartImport):
    """The steps, in order (`run`); each sets config on the stack or refuses a value by its path."""

    def run(self) -> None:
        self.stack.set("role", "site", "the chart installs SuperNodes that dial a SuperLink elsewhere")
        self._names()
        self._isolation()
        self._images()
        self._superlink()
        self._tls()
        helm_node_auth.run(self)
        self._pool()
        exposure(self)
        semantics(self)
        helm_pods.run(self)
        for text in differences(self):
            self.stack.differences.append(text)

    # --- names -------------------------------------------------------------------------

    def _names(self) -> None:
        v, s = self.vals, self.stack
        override, chart_name = str(v.get("fullnameOverride") or ""), str(v.get("nameOverride") or "")
        if not override and not chart_name:
            s.refuse(
                "nameOverride",
                "empty: the chart then names objects after the name in its Chart.yaml, which its documentation does "
                "not give; set nameOverride (or fullnameOverride) to the name your release used",
                droppable=False,
            )
        release = self.release or chart_name or CHART_NAME
        self.name = fullname(release, chart_name, override)
        s.stack = release
        s.name_settings = ("fullnameOverride", "supernode.name")
        source = "fullnameOverride" if override else ("--release, nameOverride" if self.release else "nameOverride")
        s.set("name", self.name, source)
        s.set("namespace", self.namespace or "default", "--namespace" if self.namespace else "helm's default namespace")
        s.set("createNamespace", False, "helm install needs the namespace to exist")
        s.names.append(
            f"SuperNodes: StatefulSet {self.name}-supernode-{self.pool}, pods {self.name}-supernode-{self.pool}-0, -1, "
            f"... (the chart: Deployment {self.name}-{self.pool}, pods with random suffixes). The chart's fullname "
            "is the federation's name, supernode.name the pool's."
        )
        if not self.release:
            s.notes.append(f"No --release: the release is taken to be named '{release}', the chart's name.")
        if not self.namespace:
            s.notes.append("No --namespace: the namespace is 'default', as for `helm install` in a default context.")
        s.notes.append(
            "createNamespace: false, as `helm install` expects the namespace to exist; this stack then does not label "
            "it with a Pod Security level (its pods meet `restricted` all the same)."
        )

    # --- isolation -----------------------------------------------------------------------

    def _isolation(self) -> None:
        v, s = self.vals, self.stack
        for path in ("supernode.enabled", "superexec.enabled"):
            if not isinstance(v.get(path), bool):
                s.refuse(path, f"must be true or false, not {v.get(path)!r}", droppable=False)
        mode = v.get("supernode.isolationMode")
        superexec = v.get("superexec.enabled") is True
        if v.get("supernode.enabled") is False:
            s.refuse(
                "supernode.enabled",
                "false: a release of SuperExecs only (the chart's second install for 'Isolation Distributed') has no "
                "counterpart: here a pool brings its own SuperExecs; import the SuperNodes' values with "
                "superexec.enabled: true and the SuperExec release's superexec settings",
                droppable=False,
            )
        if mode not in ("subprocess", "process"):
            s.refuse("supernode.isolationMode", f"must be subprocess or process, not {mode!r}", droppable=False)
        elif superexec and mode == "subprocess" and v.set_by_user("supernode.isolationMode"):
            s.refuse(
                "supernode.isolationMode",
                "subprocess with superexec.enabled: true: the SuperNode would start ClientApps itself while the "
                "SuperExec waits for them; set process (the chart's 'Isolated Setup') or superexec.enabled: false",
                droppable=False,
            )
        elif mode == "process" and not superexec:
            s.refuse(
                "supernode.isolationMode",
                "process without superexec.enabled: the chart leaves the SuperNodes' ClientApps to SuperExecs of "
                "another release; here a pool brings its own: set superexec.enabled: true (with that release's "
                "superexec settings) to import both as one pool",
                droppable=False,
            )
        self.process = superexec
        if not superexec:
            ignored = sorted(p for p in v.user if p.startswith("superexec.") and p != "superexec.enabled")
            if ignored:
                s.notes.append(
                    f"Ignored, as the chart ignores them with superexec.enabled false: {', '.join(ignored)}."
                )
            return
        s.set("isolationMode", "process", "superexec.enabled")
        if not v.set_by_user("supernode.isolationMode"):
            s.notes.append(
                "superexec.enabled: true runs ClientApps in the SuperExecs, i.e. process isolation (the chart's "
                "'Isolated Setup'), though supernode.isolationMode is left at its default."
            )
        # The chart runs its SuperExecs in a workload of their own: so do we, which is where
        # the superexec.* pod settings (replicas, scheduling, ServiceAccount, ...) apply.
        self.distributed = True
        s.set("superexecPlacement", "distributed", "superexec.enabled")
        target = v.get("superexec.supernode")
        if not isinstance(target, dict) or set(target) - {"address", "port"}:
            s.refuse("superexec.supernode", f"expected {{address, port}}, got {target!r}", droppable=False)
            return
        service_port = v.get("supernode.service.servicePortClientAppIo")
        ports = {service_port, v.get("supernode.containerPorts.clientAppIo")}
        port = target.get("port", service_port)
        if port not in ports:
            s.refuse(
                "superexec.supernode.port",
                f"{port!r}: the SuperNode serves its ClientAppIo API on {' and '.join(sorted(map(str, ports)))} "
                "(supernode.service.servicePortClientAppIo, supernode.containerPorts.clientAppIo)",
            )
        workload = f"{self.name}-superexec-{self.pool}"
        more = " (and -1, -2, ... for superexec.replicas)" if v.changed("superexec.replicas") else ""
        dialled = (
            f"instead of superexec.supernode.address {target['address']!r}"
            if target.get("address")
            else "where the chart's SuperExec dials the SuperNode's Service"
        )
        s.names.append(
            f"SuperExecs: StatefulSet {workload}{more}, where the chart runs Deployment "
            f"{self.name}-{v.get('superexec.name')}; replica k dials SuperNode k at its own in-cluster name "
            f"({self.name}-supernode-{self.pool}-k.{self.name}-supernode-{self.pool}) {dialled}."
        )

    # --- images and version ------------------------------------------------------------------

    def _image(self, component: str) -> Optional[dict[str, str]]:
        """The chart's image parts as an image of ours (the same keys); the pull policy only
        where the values file sets it (else `imagePullPolicy`, from global.image.pullPolicy)."""
        keys = [k for k in IMAGE_KEYS if k != "pullPolicy" or self.vals.set_by_user(f"{component}.image.{k}")]
        parts = {k: self.vals.get(f"{component}.image.{k}") for k in keys}
        bad = [k for k, p in parts.items() if not isinstance(p, str)]
        for key in bad:
            self.stack.refuse(f"{component}.image.{key}", "must be a string", droppable=False)
        if bad:
            return None
        if not parts["repository"]:
            self.stack.refuse(f"{component}.image.repository", "must not be empty", droppable=False)
            return None
        return {k: str(p) for k, p in parts.items() if p}

    def _images(self) -> None:
        s = self.stack
        image = self._image("supernode")
        if image is None:
            return
        s.set("supernodes.image", image, "supernode.image.*")
        superexec = self._image("superexec") if self.process else None
        if superexec is not None:
            s.set(f"{POOL}.images.superexecClientApp", superexec, "superexec.image.*")
        tag = image.get("tag", "")
        version = self.version = FlowerVersion.parse(tag) if tag else None
        if version is None:
            s.notes.append(
                f"The SuperNode image's tag {tag!r} names no Flower version: this stack assumes Flower's default here "
                f"({DEFAULT_VERSION}); set `version` to the Flower the image holds."
            )
        elif dialect_for(version) is None:
            s.refuse(
                "supernode.image.tag",
                f"{tag!r} is Flower {version}, which flower-federation does not run ({supported_ranges()}): build "
                "the image on a supported Flower",
                droppable=False,
            )
        else:
            s.set("version", str(version), "supernode.image.tag")
            self._version_skew(version, superexec)

    def _version_skew(self, version: FlowerVersion, superexec: Optional[dict[str, str]]) -> None:
        """Said, not changed: the chart's defaults pair any SuperNode tag with its own SuperExec tag
        (1.21.0), so a user who raised only `supernode.image.tag` runs two Flowers side by side."""
        theirs = FlowerVersion.parse(superexec.get("tag", "")) if superexec else None
        if theirs is None or theirs == version:
            return
        given = "as set" if self.vals.set_by_user("superexec.image.tag") else "the chart's default"
        self.stack.notes.append(
            f"The SuperExecs run Flower {theirs} (superexec.image.tag, {given}) beside SuperNodes of Flower "
            f"{version}: kept, as Helm would run them, though the two then speak the ClientAppIo API across "
            f"versions, which this project's tests never do (one Flower everywhere); set superexec.image.tag "
            f"to a {version} tag."
        )

    # --- the SuperLink dialled, TLS (node keys: helm_node_auth.py) -------------------------------

    def _superlink(self) -> None:
        v, s = self.vals, self.stack
        address, port = v.get("supernode.superlink.address"), v.get("supernode.superlink.port")
        s.set("supernodes.superlink.address", address, "supernode.superlink.address")
        if address == PLACEHOLDER_ADDRESS:
            s.notes.append(
                f"supernode.superlink.address is {PLACEHOLDER_ADDRESS!r}, the chart's placeholder (its default), not "
                "a real SuperLink: set supernodes.superlink.address to the address your SuperLink's Fleet API "
                "answers on before `pulumi up`."
            )
        # Helm renders a quoted number ("9092") into the command line all the same.
        if isinstance(port, str) and re.fullmatch(r"[0-9]+", port.strip()):
            port = int(port.strip())
        s.set("supernodes.superlink.port", port, "supernode.superlink.port")

    def _tls(self) -> None:
        v, s = self.vals, self.stack
        enabled = v.get("tls.enabled")
        cert = CERTIFICATE
        if not isinstance(enabled, bool):
            s.refuse("tls.enabled", f"must be true or false, not {enabled!r}", droppable=False)
            s.left_unset("supernodes.superlink.certificate", "tls.enabled")  # its CA source is unknown
            return
        if not enabled:
            s.set("insecure", True, "tls.enabled")
            ignored = sorted(p for p in v.user if p.startswith(cert))
            if ignored:
                s.notes.append(f"Ignored with tls.enabled false, as in the chart: {', '.join(ignored)}.")
            return
        secret = v.get(f"{cert}.existingSecret")
        copy = v.get(f"{cert}.copyFromExistingSecret.enabled") is True
        copy_name = v.get(f"{cert}.copyFromExistingSecret.secretName") or f"{v.get('nameOverride')}-tls"
        ca = f"{self.name}-ca"
        if copy and not secret:
            s.refuse(
                f"{cert}.existingSecret",
                "empty with copyFromExistingSecret.enabled: name the SuperLink's Secret to copy the CA from",
                droppable=False,
            )
            return
        source = secret or f"{v.get('nameOverride')}-tls"
        where = f"{cert}.existingSecret" if secret else "the chart's default CA Secret (nameOverride-tls)"
        s.set("supernodes.superlink.certificate.existingSecret", source, where)
        if copy:
            s.names.append(f"CA: Secret {ca}, copied from {source} at `pulumi up` (the chart's copy: {copy_name}).")
        else:
            s.names.append(
                f"CA: Secret {ca}, copied from {source} (ca.crt, else tls.crt) at `pulumi up`; the chart mounts "
                f"{source} itself. Either way {source} must exist in the namespace first."
            )

    # --- the pool ------------------------------------------------------------------------------

    def _pool(self) -> None:
        v, s = self.vals, self.stack
        s.set(f"{POOL}.name", self.pool, "supernode.name")
        replicas = v.get("supernode.replicas")
        s.set(f"{POOL}.replicas", replicas, "supernode.replicas")
        if self.scaled_to_zero():
            # Said in the chart's terms: validation's own words are the operator CRD's rule for StatefulSet mode.
            s.refuse(
                "supernode.replicas",
                f"{replicas!r}{' (scaled to zero)' if replicas == 0 else ''}: a site's pool runs 1 SuperNode or more "
                "here (flower-operator's rule, replicas >= 1, which this config keeps) and a site has a pool: import "
                "it with supernode.replicas set to the SuperNodes you want to run, and `pulumi destroy` the stack "
                "while none should run (generated node keys are then new at the next `pulumi up`)",
                droppable=False,
            )
        config = v.get("supernode.node.config")
        if not v.set_by_user("supernode.node.config"):
            return
        if isinstance(config, dict):
            for key, value in config.items():
                if isinstance(value, str) and any(p in value for p in PLACEHOLDERS):
                    s.refuse(
                        f"supernode.node.config.{key}",
                        f"{value!r}: the chart passes it literally; here {{index}}, {{replicas}}, {{pool}} and "
                        "{node} are placeholders",
                    )
        s.set(f"{POOL}.nodeConfig", config, "supernode.node.config")


__all__ = ["Steps", "fullname"]
