"""Every registered defence, trained and then evaluated end to end from the command line.

What a user does: `fedattack train --defence NAME --record all`, then `fedattack evaluate` on
the run with the eavesdropper, the server and the oracle. Each must exit 0 and write a result
per victim and threat model; the oracle (the victim's deployed model) is attackable whatever
the defence, and the eavesdropper's view is too unless the defence masks the uplinks, in which
case its result says so. A new defence is held to this the moment it is registered.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.defences import DEFENCES

TRAIN = ["--method", "fedavg", "--dataset", "digits", "--clients", "6", "--fraction", "0.5", "--rounds", "2",
         "--epochs", "1", "--batch-size", "16", "--lr", "0.1", "--record", "all", "--quiet"]
EVALUATE = ["--threat-model", "eavesdropper", "--threat-model", "server", "--threat-model", "oracle",
            "--attack", "membership", "--victim", "random:2", "--set", "shadows=1", "--set", "classifier=logreg",
            "--aux-size", "100", "--eval-size", "0", "--max-queries", "40", "--quiet"]


def _run(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("defence", DEFENCES.names())
def test_every_defence_trains_and_is_evaluated(defence: str, tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "results"
    _run("train", *TRAIN, "--defence", defence, "--out", str(run))
    _run("evaluate", str(run), *EVALUATE, "--out", str(out))
    results = [json.loads(p.read_text()) for p in out.glob("membership-*-victim*.json")]
    assert sorted({r["threat_model"] for r in results}) == ["eavesdropper", "oracle", "server"]
    assert len(results) == 6
    assert all(r["applicable"] for r in results if r["threat_model"] == "oracle")
    masks = DEFENCES.get(defence).hides_uplinks
    seen = [r for r in results if r["threat_model"] == "eavesdropper"]
    assert all(r["applicable"] != masks for r in seen), [r["note"] for r in seen]
    if masks:
        assert all("no reconstruction strategy" in r["note"] and "masks every uplink" in r["note"] for r in seen)
