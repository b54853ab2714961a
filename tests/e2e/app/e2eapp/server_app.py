"""ServerApp: FedAvg over numpy arrays for `num-server-rounds` rounds.

Prints one line per round from the train replies, `E2E round=<r> clients=<JSON
{pod name: [num-partitions, partition-id]}>`, and `E2E done rounds=<n> model=<sum>` at
the end; the tests read them from `flwr run --stream`.
"""

import json

import numpy as np

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    rounds = int(context.run_config["num-server-rounds"])
    nodes = int(context.run_config["min-nodes"])
    timeout = float(context.run_config["round-timeout"])
    seen_rounds = []

    def train_metrics(records, weighting_key):
        clients = {}
        for r in records:
            metrics = next(iter(r.metric_records.values()))
            pod = str(r["identity"]["pod"]) if "identity" in r.config_records else "?"
            clients[pod] = [int(metrics["num-partitions"]), int(metrics["partition-id"])]
        seen_rounds.append(clients)
        print(f"E2E round={len(seen_rounds)} clients={json.dumps(clients, sort_keys=True)}", flush=True)
        return aggregate_metricrecords(records, weighting_key)

    strategy = FedAvg(fraction_train=1.0, fraction_evaluate=float(context.run_config["fraction-evaluate"]),
                      min_train_nodes=nodes, min_evaluate_nodes=nodes, min_available_nodes=nodes,
                      train_metrics_aggr_fn=train_metrics)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(4)]),
                            num_rounds=rounds, timeout=timeout)
    model = result.arrays.to_numpy_ndarrays()
    print(f"E2E done rounds={len(seen_rounds)} model={float(sum(a.sum() for a in model))}", flush=True)
