"""Defences and their audit (issue #39), each input through the real `fedattack` entry point.

Secure aggregation below its minimum of clients a round, an audit written over a user's file,
and an audit of a run whose defence came from a plugin file that is not passed again: each is
refused in one line, before any training, and the user's folder stays as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, finish, refused, spawn

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TRAIN = ("train", "--dataset", "digits", "--rounds", "1", "--epochs", "1", "--clients", "4", "--quiet",
         "--out", "new-run")

SECURE_AGGREGATION = {
    "secure-aggregation-one-client-a-round": ("0.25", "samples 1"),
    "secure-aggregation-two-clients-a-round": ("0.5", "samples 2"),
}


@pytest.mark.parametrize("fraction, words", SECURE_AGGREGATION.values(), ids=SECURE_AGGREGATION.keys())
def test_secure_aggregation_below_three_clients_a_round_is_refused(ws: Workspace, fraction: str,
                                                                    words: str) -> None:
    ws.seal()
    refused(ws.fedattack(*TRAIN, "--defence", "secure-aggregation", "--fraction", fraction),
            "at least 3 clients a round", words)
    ws.unchanged()


AUDIT_OUT = {
    "audit-out-is-a-users-file": (["--out", "notes.txt"], "already exists"),
    "audit-overwrite-a-users-file": (["--out", "notes.txt", "--overwrite"], "not a fedattack audit"),
    "audit-default-out-already-there": ([], "already exists"),
    "audit-out-is-a-folder": (["--out", "thesis"], "thesis"),
}


@pytest.mark.parametrize("extra, words", AUDIT_OUT.values(), ids=AUDIT_OUT.keys())
def test_an_audit_never_writes_over_a_users_file(ws: Workspace, run: Path, extra: list[str], words: str) -> None:
    (ws.root / "run.audit-client.json").write_text('{"my": "own file"}')
    ws.seal()
    refused(ws.fedattack("audit", "run", "--canaries", "8", *extra), words)
    ws.unchanged()


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run trained with a defence that a plugin file registers (tests/examples/clip_defence.py),
    in its own process, so that this one has not registered the plugin."""
    where = tmp_path_factory.mktemp("plugin-run")
    shutil.copy(EXAMPLES / "clip_defence.py", where / "clip_defence.py")
    args = (*TRAIN[:-2], "--plugin", "clip_defence.py", "--defence", "clip-uplink:max_norm=0.5", "--out", "run")
    done = finish(spawn(*args, cwd=where), args)
    assert done.code == 0, done.err
    return where


def test_an_audit_of_a_plugin_defence_without_the_plugin_names_it(ws: Workspace, plugin_run: Path) -> None:
    shutil.copytree(plugin_run / "run", ws.root / "run")
    ws.seal()
    refused(ws.fedattack("audit", "run", "--canaries", "8"), "'clip-uplink'", "--plugin")
    ws.unchanged()


@pytest.mark.usefixtures("isolated_registries")
def test_an_audit_runs_a_users_defence_from_its_plugin_file(ws: Workspace, plugin_run: Path) -> None:
    """`audit --plugin` (issue #39: the audit had no --plugin, so a user's defence was "unknown")."""
    shutil.copytree(plugin_run / "run", ws.root / "run")
    shutil.copy(EXAMPLES / "clip_defence.py", ws.root / "clip_defence.py")
    ws.seal()
    done = ws.fedattack("audit", "run", "--plugin", "clip_defence.py", "--canaries", "8", "--out", "audit.json")
    assert done.code == 0 and not done.lines, done.err
    audit = json.loads((ws.root / "audit.json").read_text())
    assert [d["name"] for d in audit["spec"]["defences"]] == ["clip-uplink"]
    assert audit["canaries"]["norm"] == pytest.approx(100 * 0.5)  # 100 x the plugin's own max_norm
    again = ws.fedattack("audit", "run", "--plugin", "clip_defence.py", "--canaries", "8", "--out", "audit.json",
                         "--overwrite")
    assert again.code == 0, again.err  # an earlier audit is replaced when asked


EXPERIMENT = ('[[federation]]\nmethod = "fedavg"\ndataset = "digits"\nrounds = 1\nclients = 4\n'
              'defences = ["clip-uplink:max_norm=0.5"]\n')


def test_an_experiment_naming_a_plugin_defence_without_the_plugin_is_refused(ws: Workspace) -> None:
    (ws.root / "exp.toml").write_text(EXPERIMENT)
    ws.seal()
    refused(ws.fedattack("experiment", "run", "exp.toml", "--out", "exp", "--quiet"), "unknown defence 'clip-uplink'")
    ws.unchanged()


@pytest.mark.usefixtures("isolated_registries")
def test_an_experiment_runs_a_users_defence_from_its_plugin_file(ws: Workspace) -> None:
    """`experiment run --plugin` (issue #39: it had none, so a user's defence could not be swept)."""
    (ws.root / "exp.toml").write_text(EXPERIMENT)
    shutil.copy(EXAMPLES / "clip_defence.py", ws.root / "clip_defence.py")
    done = ws.fedattack("experiment", "run", "exp.toml", "--out", "exp", "--quiet", "--no-report",
                        "--backend", "sequential", "--plugin", "clip_defence.py")
    assert done.code == 0, done.err
    (run,) = (ws.root / "exp" / "runs").iterdir()
    assert [d["name"] for d in json.loads((run / "federation.json").read_text())["defences"]] == ["clip-uplink"]
