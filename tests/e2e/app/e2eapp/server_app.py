"""ServerApp: FedAvg over numpy arrays for `num-server-rounds` rounds.

Prints one line per round from the train replies, `E2E round=<r> seconds=<the round's
time, from the previous round's end or main's start> clients=<JSON {pod name:
[num-partitions, partition-id]}>`, and `E2E done rounds=<n> model=<sum>` at
the end; the tests read them from `flwr run --stream`.

`round-quorum` (comma-separated pod names, empty by default): a round also ends as
soon as every pod it names has replied, instead of waiting out `round-timeout` for a
sampled node that will never answer (one a fault scenario killed). So a test that
expects the survivors' replies waits for exactly those, however loaded the machine,
and `round-timeout` only bounds a hang. Without it a round ends as Flower's
Grid.send_and_receive ends it: every reply in, or the timeout.
"""

import json
import time

import numpy as np

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

app = ServerApp()
PULL_EVERY = 1.0  # seconds between pulls while waiting for the quorum (Flower's own loop: 3 s)


def _pod(reply) -> str:
    """The pod a train reply came from (the ClientApp reports its host name)."""
    if not reply.has_content() or "identity" not in reply.content.config_records:
        return ""
    return str(reply.content["identity"]["pod"])


class QuorumGrid:
    """The run's Grid, with send_and_receive also ending once every pod of `quorum`
    replied (Flower's loop: push, then pull until every reply is in or the timeout)."""

    def __init__(self, grid: Grid, quorum: set):
        self._grid, self._quorum = grid, quorum

    def __getattr__(self, name):
        return getattr(self._grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        if not self._quorum:
            return self._grid.send_and_receive(messages, timeout=timeout)
        pending = set(self._grid.push_messages(messages))
        end = time.time() + (timeout or 0.0)
        replies = []
        while pending and (timeout is None or time.time() < end):
            got = list(self._grid.pull_messages(pending))
            replies += got
            pending -= {m.metadata.reply_to_message_id for m in got}
            if self._quorum <= {_pod(m) for m in replies}:
                break
            if pending:
                time.sleep(PULL_EVERY)
        return replies


@app.main()
def main(grid: Grid, context: Context) -> None:
    rounds = int(context.run_config["num-server-rounds"])
    nodes = int(context.run_config["min-nodes"])
    timeout = float(context.run_config["round-timeout"])
    quorum = {p for p in str(context.run_config["round-quorum"]).split(",") if p}
    seen_rounds = []
    clock = [time.monotonic()]  # when the previous round ended (the first: when main started)

    def train_metrics(records, weighting_key):
        clients = {}
        for r in records:
            metrics = next(iter(r.metric_records.values()))
            pod = str(r["identity"]["pod"]) if "identity" in r.config_records else "?"
            clients[pod] = [int(metrics["num-partitions"]), int(metrics["partition-id"])]
        seen_rounds.append(clients)
        now = time.monotonic()
        seconds, clock[0] = now - clock[0], now
        print(f"E2E round={len(seen_rounds)} seconds={seconds:.2f} clients={json.dumps(clients, sort_keys=True)}",
              flush=True)
        return aggregate_metricrecords(records, weighting_key)

    strategy = FedAvg(fraction_train=1.0, fraction_evaluate=float(context.run_config["fraction-evaluate"]),
                      min_train_nodes=nodes, min_evaluate_nodes=nodes, min_available_nodes=nodes,
                      train_metrics_aggr_fn=train_metrics)
    result = strategy.start(grid=QuorumGrid(grid, quorum), initial_arrays=ArrayRecord([np.zeros(int(context.run_config["model-floats"]))]),
                            num_rounds=rounds, timeout=timeout)
    model = result.arrays.to_numpy_ndarrays()
    size = sum(a.size for a in model)
    print(f"E2E done rounds={len(seen_rounds)} model={float(sum(a.sum() for a in model))} floats={size}", flush=True)
