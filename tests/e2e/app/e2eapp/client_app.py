"""ClientApp: adds 1 to every array and reports its node config and where it ran.

`partition-id` and `num-partitions` come from the SuperNode's `--node-config`, i.e.
from the pod's ordinal (StatefulSet) through the rendered args; the host name is the
pod's name (the ClientApp runs in the SuperNode's pod, or in its SuperExec sidecar).
The ServerApp prints them per round so the test can check which pods took part.
"""

import socket
import time

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


def _identity(context: Context) -> dict:
    return {"partition-id": int(context.node_config["partition-id"]),
            "num-partitions": int(context.node_config["num-partitions"])}


@app.train()
def train(msg: Message, context: Context) -> Message:
    arrays = msg.content["arrays"].to_numpy_ndarrays()
    delay = float(context.run_config.get("train-seconds", 0.0))
    if delay:
        time.sleep(delay)
    ident = _identity(context)
    updated = [a + 1.0 for a in arrays]  # every client moves the model by +1
    metrics = MetricRecord({**ident, "num-examples": 10})
    content = RecordDict({"arrays": ArrayRecord(updated), "metrics": metrics,
                          "identity": ConfigRecord({"pod": socket.gethostname()})})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    arrays = msg.content["arrays"].to_numpy_ndarrays()
    loss = float(sum(float(a.sum()) for a in arrays))
    metrics = MetricRecord({**_identity(context), "loss": loss, "num-examples": 10})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
