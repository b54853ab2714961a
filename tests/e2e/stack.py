"""A rendered federation running on the harness, driven by the real `flwr` CLI.

- Rendering is the project's own path: `flower_federation.cli.offline.run_program` with
  `RealTlsProvider` (real CA, server certificate and node keys, made by the program's own
  pulumi-tls resources), then `manifests(show_secrets=True)` and the stack outputs.
- Every workload's pods run on a `harness.Cluster` (see harness/).
- The CLI runs as a user would, in its own network namespace `cli` in the federation's
  namespace (same cluster DNS; a pod labelled CLI_LABELS, which the SuperLink's
  NetworkPolicy admits as a configured source: every NetworkPolicy is enforced), with
  `FLWR_HOME/config.toml` = the exported `flwrConfig` verbatim and the exported
  `caCertificate` mounted at the `root-certificates` path that config names; node keys
  are registered by running the exported `nodeAuth.registerScript` with `sh`, with the
  real `flwr` on PATH.
- The federation is ready when the SuperLink's pod is Ready (its probes), the register
  script succeeded, every pod is Ready, every SuperNode's current process logged its node
  id, the SuperLink's state file shows every node online (polled: milliseconds) and then
  `flwr supernode list --format json` confirms it (at most every 3 s: each call costs
  seconds of CPU), and, with subprocess isolation,
  the SuperLink and SuperNodes still have their `flower-superexec` child (Kubernetes
  cannot see one die, and nothing restarts it: a lost one fails the scenario).
- Rollout order: all pods at once, as the StatefulSets would. Flower before 1.28 creates
  the SuperLink's state lazily without a lock; the product starts such a SuperLink
  through a wrapper that creates it before serving (flower_federation/flower/superlink_state.py), so no
  ordering or retry here hides that race.

The parts: rendering.py (the config and the render), cli_user.py (the `flwr` user),
readiness.py (keys registered, nodes online, as above) and runs.py (runs of the test app);
Federation mixes in the last three.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from typing import Any, Optional

from tests.e2e.cli_user import CLI_LABELS, FlwrCli
from tests.e2e.harness import Cluster, Pod
from tests.e2e.harness.rollout import rolling_update
from tests.e2e.readiness import FederationReadiness
from tests.e2e.rendering import NAMESPACE, Rendered, config, render  # noqa: F401  (config: tests/test_e2e_netpol_compiler.py)
from tests.e2e.runs import AppRuns
from tests.support.flower import GRPC_ERA, HTTP_ERA, NEXT, venv
from tests.support.tls_provider import PulumiState

VERSIONS = (GRPC_ERA, HTTP_ERA)
# The next Flower (the nightly until its release is served) runs a chosen few scenarios, not every one: those
# parametrized with WITH_NEXT, and the upgrade to it (13, 14). Why these: CONTRIBUTING.md, Lanes.
WITH_NEXT = (*VERSIONS, NEXT)


class Federation(FederationReadiness, FlwrCli, AppRuns):
    """A rendered stack running on its own Cluster. Use as a context manager."""

    def __init__(
        self,
        version: str,
        raw: dict[str, Any],
        *,
        label: str = "e2e",
        tamper: Optional[Callable[[list[dict[str, Any]]], None]] = None,
        warm: bool = True,
    ):
        self.version = version
        # False: Flower's console scripts themselves, the user's `flwr` (cli_user.py) and the containers' daemons
        # (harness/warm.py); True: both warm, forked from an interpreter that imported Flower once.
        self.warm = warm
        self.state = PulumiState()  # the stack's state: a later render keeps its keys
        self.rendered = render(raw, self.state)
        self.manifests = copy.deepcopy(self.rendered.manifests)
        if tamper is not None:
            tamper(self.manifests)
        self.outputs = self.rendered.outputs
        doc = tomllib.loads(self.outputs["flwrConfig"])
        self.connection = doc["superlink"]["default"]
        self.registered = False
        self.register_runs = 0
        self.phases: list[str] = []
        self.incidents: list[str] = []
        self._crashes_seen: dict[tuple[str, str], int] = {}
        self.cluster = Cluster(version, venv(version), label, warm=warm)
        try:
            self.cluster.apply(self.manifests)
            self.cluster.create_pods()
            self.cli_netns = self.cluster.add_client("cli", NAMESPACE, CLI_LABELS)
            self._prepare_cli(doc)
            # All pods at once, as the StatefulSets would.
            self.cluster.start_pods()
        except BaseException:
            self.cluster.close()
            raise

    def rerender(self, raw: dict[str, Any]) -> Rendered:
        """The same stack after a config edit (the next `pulumi up`): keys and
        certificates kept by its state."""
        return render(raw, self.state)

    def roll_out(
        self,
        raw: dict[str, Any],
        timeout: float,
        event: Optional[Callable[[str], None]] = None,
        before_roll: Optional[Callable[[list[Any]], None]] = None,
    ) -> list[str]:
        """The next `pulumi up` with config `raw`, in Pulumi's order (flower_federation/shell/federation.py:
        the SuperLink's StatefulSet rolls first, then the Jobs' hook `before_roll`, then the
        pools, which wait for both), each rolled as its controller would (harness/rollout.py);
        the CLI follows the stack's `version` (its user upgrades `flwr` too). Returns the pods
        replaced; NotReady names a rollout that got stuck, after the new render became the
        current one."""
        new = self.rerender(raw)
        self.rendered, self.manifests, self.outputs = new, copy.deepcopy(new.manifests), new.outputs
        self.version = raw["version"]
        self._prepare_cli(tomllib.loads(self.outputs["flwrConfig"]))
        return rolling_update(
            self.cluster, self.manifests, timeout, event, before_roll, first=[self.superlink.workload]
        )

    # -- pods
    def pods(self, component: str) -> list[Pod]:
        return [p for p in self.cluster.pods.values() if p.labels.get("app.kubernetes.io/component") == component]

    @property
    def superlink(self) -> Pod:
        (pod,) = self.pods("superlink")
        return pod

    @property
    def supernodes_pods(self) -> list[Pod]:
        return self.pods("supernode")

    def phase(self, name: str, seconds: float) -> None:
        """Where a scenario's time went (printed in the summary)."""
        self.phases.append(f"{name} {seconds:.1f}s")

    def incident(self, text: str) -> None:
        """Something real Flower did that a test should not hide: printed in the summary."""
        self.incidents.append(text)

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> Federation:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
