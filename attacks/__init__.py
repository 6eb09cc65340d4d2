"""fedattack's attacks, grouped by role (docs/architecture.md, "Folders"):

- `base`, `view`: the contract an attack and a threat model write against;
- `evaluation/`: the pipeline from a run directory to result files;
- `planning/`: what each call costs, the budget, the plan and the default audit;
- `threat_models/`: what an adversary sees and knows;
- `hidden_parts/`: strategies that guess what a method keeps off the wire (WAFFLe's selection,
  FedPer's head, personal models), so an attack has a model to query;
- `membership/`, `data_reconstruction/`, `model_inversion/`: the attack families;
- `active/`: servers that act during training, and the readout of what they got back.

The modules of the flat layout before 2026-12 stay importable under their old names (a plugin
written against `fedattack.attacks.membership_family` keeps working): `_OLD_NAMES` maps each to
where it lives now, and the finder below serves the old name as the same module object. (Two old
names now name packages and are not served: `planning`, whose planner is `planning.planner`, and
`membership`, whose Shokri attack is `membership.shokri`.) The three LiRA modules are one,
`membership.lira`, and the two FedMIA modules `membership.fedmia`: their old names serve it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

_OLD_NAMES = {
    "cost": "planning.cost", "probe": "planning.probe", "plan": "planning.plan",
    "default_audit": "planning.default_audit",
    "evaluate": "evaluation.evaluate", "request": "evaluation.request", "data": "evaluation.data",
    "truth": "evaluation.truth", "not_applicable": "evaluation.not_applicable",
    "deferred": "evaluation.deferred", "upper_bound": "evaluation.upper_bound",
    "selection": "evaluation.selection", "summary": "evaluation.summary",
    "membership_family": "membership.family", "membership_metrics": "membership.metrics",
    "shadow": "membership.shadow", "reference_models": "membership.reference_models",
    "rmia": "membership.rmia", "lira": "membership.lira", "lira_online": "membership.lira",
    "lira_rounds": "membership.lira", "fedmia": "membership.fedmia", "fedmia_rmia": "membership.fedmia",
    "membership.lira_online": "membership.lira", "membership.lira_rounds": "membership.lira",
    "membership.fedmia_rmia": "membership.fedmia",
    "update_inversion_attack": "data_reconstruction.update_inversion",
    "gradient_inversion": "data_reconstruction.gradient_inversion",
    "inversion_cost": "data_reconstruction.cost",
    "inversion": "model_inversion.inversion", "eval_classifier": "model_inversion.eval_classifier",
    "readout": "active.readout", "active.imprint": "active.servers.imprint",
    "active.trap_weights": "active.servers.trap_weights", "active.inconsistency": "active.servers.inconsistency",
    "reconstruction": "hidden_parts", "update_inversion": "data_reconstruction",
}
_PREFIXES = {"reconstruction.": "hidden_parts.", "update_inversion.": "data_reconstruction."}
_HERE = __name__ + "."


def _new_name(old: str) -> str | None:
    rest = old.removeprefix(_HERE)
    if rest in _OLD_NAMES:
        return _HERE + _OLD_NAMES[rest]
    for before, after in _PREFIXES.items():
        if rest.startswith(before):
            leaf = rest.removeprefix(before)
            return _HERE + after + ("inversion_family" if after.startswith("data") and leaf == "family" else leaf)
    return None


class _OldNameLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:  # the module it serves is already executed
        pass


class _OldNames(importlib.abc.MetaPathFinder):
    """Serves `fedattack.attacks.<old name>` as the module that now holds it."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_HERE):
            return None
        new = _new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _OldNameLoader(new))


if not any(isinstance(f, _OldNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldNames())  # first: a submodule of an old package name must not load twice
