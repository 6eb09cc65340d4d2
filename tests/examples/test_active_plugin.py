"""Issue #38: a user's active threat model is one file passed with `--plugin`
(`quiet_units_server.py`): listed, trained with, recorded, read by `readout`, and marked active in
every result, with no edit to fedattack."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.federation.active import ACTIVE
from fedattack.federation.rundir import Federation
from tests.active.conftest import readout
from tests.examples.one_file import HERE, load_example

NAME = "quiet-units"
FILE = str(HERE / "quiet_units_server.py")
TINY = ["--dataset", "digits", "--clients", "10", "--fraction", "0.3", "--epochs", "2", "--rounds", "2",
        "--lr", "0.1", "--quiet", "--record", "all"]


@pytest.fixture(autouse=True)
def _loaded(isolated_registries: None) -> None:
    load_example("quiet_units_server.py", ACTIVE, NAME, "QuietUnits")


def test_a_users_active_server_is_listed_trained_recorded_and_read(tmp_path: Path) -> None:
    listed = CliRunner().invoke(cli, ["list", "active-threat-models", "--plugin", FILE])
    assert NAME in listed.output and "shift=1.0" in listed.output
    run = tmp_path / "run"
    trained = CliRunner().invoke(cli, ["train", *TINY, "--plugin", FILE, "--active", f"{NAME}:shift=0.5,rounds=2",
                                       "--out", str(run)])
    assert trained.exit_code == 0, trained.output
    assert f"active server {NAME} acted in round 2" in trained.output
    record = Federation(run).manifest["active_adversary"]
    assert record["settings"] == {"rounds": "2", "victim": -1, "shift": 0.5}
    result = readout(run, tmp_path / "out", (record["acted"][0]["victim"],))[0]
    assert result.applicable and result.run["active_adversary"]["name"] == NAME
    assert result.metrics["candidates"] > 0
