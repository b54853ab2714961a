"""Jobs, as the Job controller runs them: one pod at a time, `<job>-<5 chars>` with the
template's labels plus `job-name` / `batch.kubernetes.io/job-name`, run to completion.
With restartPolicy Never (the only policy a Job's pods may have here) a failed pod is not
restarted: the controller makes a new pod (fresh volumes and address), after a back-off
of 1 s doubling (the controller: 10 s doubling, capped at 6 min), until one pod succeeds
(exit 0: the Job is Complete) or `backoffLimit` pods failed or `activeDeadlineSeconds`
passed (Failed). `podFailurePolicy` rules on exit codes apply to a failed pod in order
(FailJob: the Job fails at once; Ignore: the pod does not count; Count); rules on pod
conditions never match (no pod conditions are emulated). Every pod's log is kept (one
file per pod and container).

A Job's pods are not in `Cluster.pods` (those are the long-running pods whose readiness
tests wait for: a completed pod is never Ready); they get cluster DNS and are closed with
the cluster like the others. Jobs start only when asked (`Cluster.start_jobs`): whoever
deploys decides when a Job is created (Pulumi creates the registration Job once the
SuperLink it depends on is ready).
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import HarnessError
from tests.e2e.harness.pods import NODES, Pod

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster

BACKOFF_START = 1.0
BACKOFF_CAP = 8.0


class Job:
    def __init__(self, cluster: Cluster, manifest: dict[str, Any]):
        spec = manifest["spec"]
        policy = spec["template"]["spec"].get("restartPolicy")
        if policy != "Never":
            raise HarnessError(f"Job {manifest['metadata']['name']}: restartPolicy {policy!r}: only Never is emulated")
        for key in ("parallelism", "completions"):
            if spec.get(key, 1) != 1:
                raise HarnessError(f"Job {manifest['metadata']['name']}: {key} != 1 is not emulated")
        self.cluster = cluster
        self.manifest = manifest
        self.name = manifest["metadata"]["name"]
        self.namespace = manifest["metadata"].get("namespace", "default")
        self.backoff_limit = int(spec.get("backoffLimit", 6))
        self.failure_rules = spec.get("podFailurePolicy", {}).get("rules", [])
        for rule in self.failure_rules:
            if rule["action"] not in ("FailJob", "Ignore", "Count"):
                raise HarnessError(
                    f"Job {manifest['metadata']['name']}: podFailurePolicy {rule['action']} not emulated"
                )
        self.ignored: set[str] = set()  # pods a podFailurePolicy Ignore rule does not count
        self.deadline_seconds: Optional[float] = spec.get("activeDeadlineSeconds")
        self.pods: list[Pod] = []
        self.status = "Pending"  # Pending, Running, Complete, Failed
        self.reason = ""
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.started_at = 0.0
        self.finished_at = 0.0

    @property
    def failed_pods(self) -> int:
        return sum(p.phase == "Failed" and p.name not in self.ignored for p in self.pods)

    def _failure_action(self, pod: Pod) -> str:
        """What the first podFailurePolicy rule matching a failed pod says (Count if none)."""
        for rule in self.failure_rules:
            on = rule.get("onExitCodes")
            if on is None:  # onPodConditions: no pod conditions are emulated
                continue
            codes = [
                c.exit_codes[-1]
                for c in pod.containers
                if c.exit_codes and c.exit_codes[-1] != 0 and on.get("containerName") in (None, c.name)
            ]
            values = set(on["values"])
            if any((code in values) == (on["operator"] == "In") for code in codes):
                return rule["action"]
        return "Count"

    def start(self) -> None:
        if self._thread is not None:
            return
        self.started_at = time.monotonic()
        self.status = "Running"
        self._thread = threading.Thread(target=self._control, name=f"job/{self.name}", daemon=True)
        self._thread.start()

    def _new_pod(self) -> Pod:
        labels = dict(self.manifest["spec"]["template"]["metadata"].get("labels", {}))
        labels.update({"job-name": self.name, "batch.kubernetes.io/job-name": self.name})
        name = f"{self.name}-{secrets.token_hex(3)[:5]}"
        pod = Pod(self.cluster, self.manifest, name, labels, NODES[len(self.pods) % len(NODES)], None, None, None)
        pod.create_sandbox()
        self.pods.append(pod)
        self.cluster.write_dns()
        return pod

    def _finish(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason
        self.finished_at = time.monotonic()
        self.done.set()

    def _control(self) -> None:
        backoff = BACKOFF_START
        deadline = self.started_at + self.deadline_seconds if self.deadline_seconds else None
        while not self._stop.is_set():
            pod = self._new_pod()
            pod.prepare_volumes()
            pod.start()
            while pod.phase not in ("Succeeded", "Failed"):
                if self._stop.wait(0.2):
                    return
                if deadline is not None and time.monotonic() > deadline:
                    pod.stop()
                    self._finish("Failed", "DeadlineExceeded")
                    return
            if pod.phase == "Succeeded":
                self._finish("Complete", f"pod {pod.name} succeeded")
                return
            action = self._failure_action(pod)
            if action == "FailJob":
                codes = [c.exit_codes[-1] for c in pod.containers if c.exit_codes]
                self._finish("Failed", f"PodFailurePolicy: pod {pod.name} exited {codes}")
                return
            if action == "Ignore":
                self.ignored.add(pod.name)
            if self.failed_pods > self.backoff_limit:
                self._finish("Failed", f"BackoffLimitExceeded ({self.failed_pods} pods failed)")
                return
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, BACKOFF_CAP)

    def wait(self, timeout: float) -> bool:
        """Whether the Job finished (Complete or Failed) within `timeout`."""
        return self.done.wait(timeout)

    def log(self, tail: int = 200) -> str:
        """Every pod's log, oldest pod first."""
        return "\n".join(
            f"----- {p.name}/{c.name} ({p.phase}) -----\n{c.log(tail)}"
            for p in self.pods
            for c in [*p.init_containers, *p.containers]
        )

    def describe(self) -> str:
        pods = "; ".join(f"{p.name}: {p.phase}" for p in self.pods) or "no pod yet"
        return f"Job {self.name}: {self.status} {self.reason} ({pods})"

    def halt(self) -> None:
        """The controller stops making pods (its pods are left as they are)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def stop(self) -> None:
        """The Job is deleted: its controller stops and its pods go."""
        self.halt()
        for p in self.pods:
            p.stop()
