"""The MNIST Flower app (Message API): Flower's FedAvg, recorded for fedattack by a strategy wrapper.

The ClientApp is what a Flower user writes (load my partition, train locally, reply with the
weights, `num-examples` and the `partition-id`). The ServerApp adds three things for fedattack:
a `Recorder` declaring the model, data, partition and recipe, `RecordingStrategy` around
Flower's FedAvg, and `close` with the final model. The data root reaches the simulated clients
through `$FEDATTACK_DATA`, as it reaches fedattack.
"""

from __future__ import annotations

import os
from pathlib import Path

import mnist_task as task
import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from fedattack.interop import Recorder
from fedattack.interop.flower import RecordingStrategy

MIMIC_ENV = "FLOWER_MNIST_MIMIC"  # "1": fedattack's initial weights and batch order (see mnist_task)
client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    torch.set_num_threads(1)
    pid = int(context.node_config["partition-id"])
    x, y, _, _ = task.load(os.environ.get("FEDATTACK_DATA"))
    idx = torch.as_tensor(task.partition(os.environ.get("FEDATTACK_DATA", ""))[0][pid])
    model = task.Net()
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    rnd = int(msg.content.config_records["config"]["server-round"])  # type: ignore[arg-type]
    task.train_locally(model, x[idx], y[idx], rnd, pid, mimic=os.environ.get(MIMIC_ENV) == "1")
    metrics = MetricRecord({"num-examples": len(idx), "partition-id": pid})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


def server_app(out: str | Path, overwrite: bool = False, rounds: int = task.ROUNDS) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        root = os.environ.get("FEDATTACK_DATA", "")
        train_idx, test_idx = task.partition(root)
        recorder = Recorder(out, model=task.Net, dataset=task.load, clients=train_idx, test_clients=test_idx,
                            epochs=task.EPOCHS, batch_size=task.BATCH, lr=task.LR, seed=task.SEED,
                            data_root=root or None, source="flower", overwrite=overwrite,
                            partition="iid")  # fedattack's iid split: reports pair it with fedattack's run
        strategy = RecordingStrategy(FedAvg(fraction_train=1.0, fraction_evaluate=0.0), recorder)
        start = ArrayRecord(task.initial_state(os.environ.get(MIMIC_ENV) == "1"))
        result = strategy.start(grid=grid, initial_arrays=start, num_rounds=rounds)
        recorder.close(server=result.arrays.to_torch_state_dict())

    return app
