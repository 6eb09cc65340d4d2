"""benchmarks/executor_digests.py covers everything registered (#43), and its digest is a digest.

The script is what shows that a refactoring changed no bit of any federation; a model, method
or defence it leaves out could change unseen (the average-pooled CNN trained wrongly under the
batched executor for as long as the cases named a fixed list of models).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

from fedattack.defences.base import DEFENCES
from fedattack.registry import MODELS, TARGETS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "executor_digests.py"


@cache
def digests() -> ModuleType:
    spec = importlib.util.spec_from_file_location("executor_digests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_cases_cover_every_registered_model_method_and_defence() -> None:
    cases = digests().cases().values()
    assert set(MODELS.names()) <= {c.get("model") for c in cases}
    assert set(TARGETS.names()) <= {c["method"] for c in cases}
    assert set(DEFENCES.names()) <= {d["name"] for c in cases for d in c.get("defences", ())}
    for model in MODELS.names():  # every model through the kernel a method chooses for it, and FedProx's pull
        assert {("fedavg", model), ("fedprox", model)} <= {(c["method"], c.get("model")) for c in cases}


def test_a_case_digests_the_same_federation_the_same_way() -> None:
    """Twice the same bits: so a digest that differs after a change means the federation did."""
    case = {**digests().cases()["fedavg/dimitrov-cnn"], "num_clients": 4, "rounds": 1}
    first, _ = digests().federate(case, "batched")
    again, _ = digests().federate(case, "batched")
    other, _ = digests().federate({**case, "rounds": 2}, "batched")
    assert first == again != other
