"""Issue #35's four extension trials, each one new file loaded with `--plugin`, no edit elsewhere.

- `int8_target.py`: a method whose uplink is int8-quantised; it trains, the eavesdropper decodes
  and attacks it, and the built-in `clip` bounds its decoded update (not its scales);
- `entropy_attack.py`: a membership attack in 15 lines;
- `last_round_blind.py`: a threat model that sees only the last recorded round and no labels;
- `laplace_defence.py`: Laplace noise on every client's update.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.defences._update import l2_norm
from fedattack.federation.rundir import Federation
from fedattack.wire import Message

HERE = Path(__file__).parent
TINY = ["--dataset", "digits", "--clients", "6", "--fraction", "0.5", "--epochs", "1", "--batch-size", "16",
        "--lr", "0.1", "--rounds", "2", "--record", "all", "--quiet"]
CHEAP = ["--victim", "random:2", "--set", "shadows=1", "--set", "classifier=logreg", "--aux-size", "100",
         "--eval-size", "0", "--max-queries", "40", "--quiet"]

pytestmark = pytest.mark.usefixtures("isolated_registries")


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _results(folder: Path, attack: str = "membership") -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{attack}-*-victim*.json"))]


def _pairs(run: Path) -> list[tuple[Message, Message]]:
    """(downlink, uplink) of every client and round of a run."""
    by: dict[tuple[int, int], dict[str, Message]] = {}
    for m in Federation(run).transcript().load():
        by.setdefault((m.round, m.client), {})[m.kind] = m
    return [(p["downlink"], p["uplink"]) for p in by.values() if len(p) == 2]


def test_an_int8_method_trains_and_the_eavesdropper_decodes_it(tmp_path: Path) -> None:
    plugin = str(HERE / "int8_target.py")
    run, out = tmp_path / "run", tmp_path / "results"
    _run("train", "--plugin", plugin, "--method", "int8-avg", "--out", str(run), *TINY)
    schema = Federation(run).manifest["wire_schema"]["uplink"]
    assert schema["q.fc1.weight"] == {"shape": [64, 64], "dtype": "int8"}
    assert schema["s.fc1.weight"] == {"shape": [], "dtype": "float32"}
    _run("evaluate", str(run), "--plugin", plugin, "--threat-model", "eavesdropper", "--attack", "membership",
         *CHEAP, "--out", str(out))
    results = _results(out)
    assert len(results) == 2 and all(r["applicable"] and r["reconstruction"] == "decoded" for r in results)
    assert all(math.isfinite(r["metrics"]["auc"]) for r in results)


def test_clip_bounds_the_int8_methods_decoded_update_not_its_scales(tmp_path: Path) -> None:
    plugin, bound = str(HERE / "int8_target.py"), 0.05
    _run("train", "--plugin", plugin, "--method", "int8-avg", "--out", str(tmp_path / "plain"), *TINY)
    _run("train", "--plugin", plugin, "--method", "int8-avg", "--defence", f"clip:max_norm={bound}",
         "--out", str(tmp_path / "clipped"), *TINY)
    target = Federation(tmp_path / "clipped").target()

    def norms(run: Path) -> list[float]:
        return [l2_norm(target.uplink_update(d.payload, u.payload)) for d, u in _pairs(run)]

    assert min(norms(tmp_path / "plain")) > 5 * bound  # so the clip acts on every uplink
    clipped = norms(tmp_path / "clipped")  # clipped to the bound, then quantised again
    assert clipped and all(0.95 * bound < n < 1.05 * bound for n in clipped), clipped


def test_an_int8_uplink_is_refused_by_a_defence_that_averages_the_wire(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["train", "--plugin", str(HERE / "int8_target.py"), "--method", "int8-avg",
                                      "--defence", "dp-fedavg", "--out", str(tmp_path / "run"), *TINY])
    assert result.exit_code != 0 and "not linear in its update" in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_a_15_line_membership_attack(fedavg_run: Path, tmp_path: Path) -> None:
    plugin = HERE / "entropy_attack.py"
    assert len(plugin.read_text().splitlines()) <= 15
    _run("evaluate", str(fedavg_run), "--plugin", str(plugin), "--threat-model", "eavesdropper",
         "--attack", "entropy", *CHEAP[:2], *CHEAP[6:], "--out", str(tmp_path / "results"))
    results = _results(tmp_path / "results", "entropy")
    assert len(results) == 2 and all(r["applicable"] and math.isfinite(r["metrics"]["auc"]) for r in results)


def test_a_threat_model_of_the_last_round_without_labels(fedavg_run: Path, tmp_path: Path) -> None:
    _run("evaluate", str(fedavg_run), "--plugin", str(HERE / "last_round_blind.py"), "--threat-model",
         "last-round-blind", "--attack", "membership", *CHEAP[:-1], "--victim", "all", "--quiet",
         "--out", str(tmp_path / "results"))
    last = max(e["round"] for e in Federation(fedavg_run).transcript().index)
    seen = [r for r in _results(tmp_path / "results") if r["applicable"]]
    assert seen and all(r["extra"]["observation"]["round"] == last for r in seen)
    assert all(r["extra"]["knowledge"]["labels_known"] is False for r in seen)


def test_a_laplace_noise_defence(tmp_path: Path) -> None:
    plugin, scale = str(HERE / "laplace_defence.py"), 0.01
    _run("train", "--method", "fedavg", "--out", str(tmp_path / "plain"), *TINY)
    _run("train", "--plugin", plugin, "--method", "fedavg", "--defence", f"laplace:scale={scale}",
         "--out", str(tmp_path / "noisy"), *TINY)
    plain = {(d.round, d.client): u.payload for d, u in _pairs(tmp_path / "plain") if d.round == 1}
    noisy = {(d.round, d.client): u.payload for d, u in _pairs(tmp_path / "noisy") if d.round == 1}
    noise = torch.cat([(noisy[k][n] - plain[k][n]).flatten().double() for k in plain for n in plain[k]])
    assert abs(float(noise.abs().mean()) / scale - 1) < 0.05  # E|X| = b for Laplace(0, b)
    kurtosis = float((noise**4).mean() / (noise**2).mean() ** 2)
    assert 5 < kurtosis < 7  # Laplace's is 6, a Gaussian's 3
    _run("evaluate", str(tmp_path / "noisy"), "--plugin", plugin, "--threat-model", "eavesdropper",
         "--attack", "membership", *CHEAP, "--out", str(tmp_path / "results"))
    assert all(r["applicable"] for r in _results(tmp_path / "results"))
