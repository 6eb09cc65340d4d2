"""Grids: an entry expands to its cells, each content-addressed; bad grids are one-line errors."""

from __future__ import annotations

import tomllib

import pytest

from fedattack.experiments.plan import address, plan
from fedattack.experiments.spec import parse
from fedattack.registry import UserError

SWEEP = """
[[federation]]
method = "fedavg"
rounds = 2
defences = ["clip:max_norm=0.5"]
[federation.grid]
lr = [0.05, 0.1]
seeds = [0, 1]
"defence.clip.max-norm" = [0.5, 2.0]
[[evaluation]]
threat-models = ["eavesdropper"]
attacks = ["membership"]
[evaluation.grid]
"settings.shadows" = [2, 4]
aux-size = [100, 200]
"""


def jobs(text: str = SWEEP):  # type: ignore[no-untyped-def]
    return plan(parse(tomllib.loads(text)))


def test_a_grid_expands_to_every_combination_with_its_values_filled_in() -> None:
    p = jobs()
    cells = {(f.spec.recipe.lr, f.spec.seed, f.spec.defences[0]["settings"]["max_norm"]) for f in p.federations}
    assert cells == {(lr, s, c) for lr in (0.05, 0.1) for s in (0, 1) for c in (0.5, 2.0)}
    assert len({f.ident for f in p.federations}) == 8
    settings = {(j.spec.settings["shadows"], j.spec.aux_size) for j in p.evaluations}
    assert settings == {(2, 100), (2, 200), (4, 100), (4, 200)} and len(p.evaluations) == 8 * 4


def test_each_cell_is_addressed_by_its_resolved_spec_alone() -> None:
    before = {f.ident for f in jobs().federations}
    more_seeds = {f.ident for f in jobs(SWEEP.replace("seeds = [0, 1]", "seeds = [0, 1, 2]")).federations}
    assert before < more_seeds and len(more_seeds) == 12  # adding a seed keeps the other cells' folders
    other_rounds = {f.ident for f in jobs(SWEEP.replace("rounds = 2", "rounds = 3")).federations}
    assert not before & other_rounds  # a changed spec is a new address
    fed = jobs().federations[0]
    assert fed.ident.endswith(address(fed.spec.to_json())) and fed.record()["spec"] == fed.spec.to_json()
    # the same federation written without a grid is the same cell
    plain = SWEEP.split("[federation.grid]")[0].replace('["clip:max_norm=0.5"]', '[{name = "clip", settings = '
                                                          '{max_norm = 0.5}}]') + "lr = 0.05\nseed = 0\n"
    assert jobs(plain).federations[0].ident in before


@pytest.mark.parametrize("change, message", [
    ("lr = [0.05, 0.1]", "unknown grid key 'lrr'"),
    ("lr = [0.05, 0.1]|lr = 0.1", "grid key 'lr' must list its values"),
    ("lr = [0.05, 0.1]|lr = [0.1, 0.1]", "grid key 'lr' lists a value twice"),
    ("lr = [0.05, 0.1]|rounds = [1, 2]", "'rounds' is set both in the entry and in its grid"),
    ("lr = [0.05, 0.1]|lr = [-1.0]", "grid cell lr=-1.0, seeds=0, defence.clip.max-norm=0.5 (fedavg): lr=-1.0"),
    ("lr = [0.05, 0.1]|\"hyper.mu\" = [1.0]", "grid cell hyper.mu=1.0"),
    ('"defence.clip.max-norm"|"defence.dp-fedavg.noise"', "defence 'dp-fedavg', which this cell does not have"),
    ('"settings.shadows"|"setting.shadows"', "unknown grid key 'setting.shadows'"),
])
def test_a_bad_grid_is_one_line_naming_what_was_written(change: str, message: str) -> None:
    old, _, new = change.partition("|")
    text = SWEEP.replace(old, new or old.replace("lr", "lrr", 1))
    with pytest.raises(UserError) as err:
        jobs(text)
    assert message in str(err.value) and "\n" not in str(err.value)
