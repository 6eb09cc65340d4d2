"""Experiment files: strict parsing, expansion into jobs, and the shipped ones all load."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fedattack.experiments import load, resolve, shipped
from fedattack.experiments.plan import plan
from fedattack.experiments.spec import parse
from fedattack.registry import TARGETS, UserError

MINIMAL = """
name = "t"
[[federation]]
methods = ["fedavg", "fedprox"]
partitions = ["shards", "iid"]
seeds = [0, 1]
rounds = 2
batch-size = 5
[federation.by-method.fedprox]
hyper = { mu = 0.5 }
[[evaluation]]
methods = ["fedavg"]
threat-models = ["eavesdropper"]
attacks = ["membership"]
victims = [0, 1]
seeds = [3, 4]
[evaluation.settings]
shadows = 2
"""


def test_unknown_key_is_one_line_user_error() -> None:
    data = tomllib.loads(MINIMAL.replace("rounds = 2", "roundz = 2"))
    with pytest.raises(UserError) as err:
        parse(data)
    assert "unknown key 'roundz'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["colour = 1", "[evaluation.settings.membership]\nshadows = 1"])
def test_unknown_or_misplaced_keys_anywhere_are_refused(bad: str) -> None:
    with pytest.raises(UserError):
        parse(tomllib.loads(MINIMAL + "\n" + bad if bad.startswith("[") else bad + "\n" + MINIMAL))


def test_federation_without_method_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="names no method"):
        parse(tomllib.loads("[[federation]]\ndataset = 'digits'\n"))
    bad = tmp_path / "x.toml"
    bad.write_text("[[federation]\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load(bad)


def test_expansion_counts_and_overrides() -> None:
    jobs = plan(parse(tomllib.loads(MINIMAL)))
    assert len(jobs.federations) == 2 * 2 * 2  # methods x partitions x seeds
    prox = [f for f in jobs.federations if f.spec.method == "fedprox"]
    assert all(f.spec.hyper == {"mu": 0.5} and f.spec.recipe.batch_size == 5 for f in prox)
    assert len({f.ident for f in jobs.federations}) == 8
    # evaluation restricted to fedavg: 4 federations x 2 attack seeds
    assert len(jobs.evaluations) == 4 * 2
    assert {j.federation.spec.method for j in jobs.evaluations} == {"fedavg"}
    assert jobs.evaluations[0].evaluation.settings == {"shadows": 2}


def test_changing_a_setting_changes_the_folder() -> None:
    a = plan(parse(tomllib.loads(MINIMAL))).federations[0]
    b = plan(parse(tomllib.loads(MINIMAL.replace("rounds = 2", "rounds = 3")))).federations[0]
    assert a.ident != b.ident and a.ident.startswith("fedavg-digits-shards-s0-")


def test_missing_method_is_refused_or_skipped_with_a_note() -> None:
    text = MINIMAL.replace('["fedavg", "fedprox"]', '["fedavg", "no-such-method"]')
    with pytest.raises(UserError, match="not installed"):
        plan(parse(tomllib.loads(text)))
    jobs = plan(parse(tomllib.loads("skip-missing-methods = true\n" + text)))
    assert {f.spec.method for f in jobs.federations} == {"fedavg"}
    assert any("no-such-method" in n for n in jobs.notes)


def test_shipped_experiments_are_discovered_and_valid() -> None:
    files = shipped()
    assert {"quick-digits", "waffle-membership", "waffle-inversion", "waffle-utility",
            "waffle-wavg-table1"} <= set(files)
    for name in files:
        exp = resolve(name)
        assert exp.name == name
        jobs = plan(exp)  # every method, hyperparameter and key must be valid
        assert jobs.federations
    assert len(plan(resolve("waffle-utility")).federations) == 4 * 3 * 2 * 3
    quick = plan(resolve("quick-digits"))
    assert {"fedavg", "waffle-ibp"} <= {f.spec.method for f in quick.federations} <= set(TARGETS.names())


def test_unknown_experiment_name() -> None:
    with pytest.raises(UserError, match="no experiment named"):
        resolve("nope")


def test_an_evaluation_entry_is_one_evaluation_spec_per_seed() -> None:
    ev = parse(tomllib.loads(MINIMAL)).evaluations[0]
    specs = ev.specs()
    assert [s.seed for s in specs] == [3, 4]
    assert all(s.threat_models == ("eavesdropper",) and s.victims == (0, 1) and s.settings == {"shadows": 2}
               and s.reconstruction == "strongest" and s.max_queries == 1000 for s in specs)
    job = plan(parse(tomllib.loads(MINIMAL))).evaluations[1]
    assert job.spec == ev.spec(job.seed)


@pytest.mark.parametrize("bad, message", [('victims = ["x7"]', "victim 'x7' is not a client id"),
                                          ('victims = ["random:0"]', "random:0 needs a positive count"),
                                          ("max-queries = 0", "max-queries must be an integer of at least 1"),
                                          ('executor = "fast"', "unknown executor 'fast'"),
                                          ("executor = 2", "executor must be an executor's name")])
def test_a_bad_evaluation_value_is_one_line_naming_the_entry(bad: str, message: str) -> None:
    text = MINIMAL.replace("victims = [0, 1]", bad) if bad.startswith("victims") else MINIMAL.replace(
        "seeds = [3, 4]", f"seeds = [3, 4]\n{bad}")
    with pytest.raises(UserError) as err:
        parse(tomllib.loads(text))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_evaluation_entry_chooses_the_executor_of_its_shadow_models_and_it_is_part_of_the_address() -> None:
    default = plan(parse(tomllib.loads(MINIMAL))).evaluations[0]
    named = MINIMAL.replace("seeds = [3, 4]", 'seeds = [3, 4]\nexecutor = "sequential"')
    sequential = plan(parse(tomllib.loads(named)))
    assert default.spec.executor == "batched" and sequential.evaluations[0].spec.executor == "sequential"
    assert sequential.evaluations[0].ident != default.ident
