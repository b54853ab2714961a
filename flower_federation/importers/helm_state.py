"""What `import helm` knows of the install as its steps go (helm_steps.py runs them; helm_node_auth.py,
helm_pods.py and helm_defaults.py read and extend it): the values read against the chart, the stack being
written, the release's names, and what the steps decided so far (isolation, placement, exposure, Flower
version)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from flower_federation.flower.versions import FlowerVersion
from flower_federation.importers.common import flow
from flower_federation.kube.naming import selector_labels

if TYPE_CHECKING:
    from flower_federation.importers.chart import Values
    from flower_federation.importers.common import Stack


class ChartImport:
    """One import's state; the chart's install it describes becomes the one pool `pool` of the site `name`."""

    def __init__(self, vals: Values, stack: Stack, *, release: Optional[str], namespace: Optional[str], preserve: bool):
        self.vals = vals
        self.stack = stack
        self.release = release
        self.namespace = namespace
        self.preserve = preserve
        self.process = False
        self.distributed = False
        self.exposed = False  # the ClientAppIo Service exposed, allowExternal left at the chart's default
        self.version: Optional[FlowerVersion] = None
        self.name = ""
        self.pool = str(vals.get("supernode.name"))

    def active(self, path: str) -> bool:
        """SuperExec parameters act only where the chart runs SuperExecs."""
        return self.process or not path.startswith("superexec.")

    def scaled_to_zero(self) -> bool:
        """supernode.replicas below 1, which the chart allows (a release scaled to zero) and a pool does not."""
        replicas = self.vals.get("supernode.replicas")
        return isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 1

    def selector(self) -> dict[str, str]:
        return selector_labels(self.name, "supernode", self.pool)

    def set_preserved(self, path: str, value: Any) -> str:
        """--preserve-behaviour: set the source's behaviour; say what was (or would be) set."""
        return self.preserved([(path, value)])

    def preserved(self, settings: list[tuple[str, Any]]) -> str:
        """--preserve-behaviour for several settings, said in one sentence."""
        shown = [f"{path}: {flow(value)}" if not isinstance(value, dict) else path for path, value in settings]
        if self.preserve:
            for path, value in settings:
                self.stack.set(path, value, "--preserve-behaviour")
        return f"--preserve-behaviour {'set' if self.preserve else 'sets'} {' and '.join(shown)}."
