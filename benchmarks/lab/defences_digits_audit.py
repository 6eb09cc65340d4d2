"""One client-level audit of a digits FedAvg federation (the small table of docs/defences.md).

Usage: python benchmarks/lab/defences_digits_audit.py SIGMA|none client  -> client-SIGMA.json here.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from fedattack.audit import AuditSpec, audit_federation
from fedattack.federation.spec import FederationSpec
from fedattack.target import Recipe


def main() -> None:
    torch.set_num_threads(1)
    sigma = None if sys.argv[1] == "none" else float(sys.argv[1])
    defences = () if sigma is None else (
        {"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": sigma}},)
    spec = FederationSpec(method="fedavg", dataset="digits", partition="shards", num_clients=10,
                          model="digits-mlp", rounds=5, fraction=1.0,
                          recipe=Recipe(epochs=1, batch_size=10, lr=0.1), seed=0, executor="batched",
                          defences=defences)
    started = time.time()
    result = audit_federation(spec, AuditSpec(level=sys.argv[2], canaries=64))
    result["wall"] = round(time.time() - started, 1)
    with open(f"{sys.argv[2]}-{sys.argv[1]}.json", "w") as out:
        json.dump(result, out, indent=1)


if __name__ == "__main__":
    main()
