"""Bad experiment files (issue #13), each given to `fedattack experiment run` at the command line.

An experiment file is read with `tomllib` (never executed) and planned completely before
anything is written, so every mistake below is refused in one line and the output folder is
never created.
"""

from __future__ import annotations

import pytest

from tests.hostile._cli import Workspace, refused

GOOD_FEDERATION = '[[federation]]\nmethod = "fedavg"\ndataset = "digits"\nrounds = 1\nclients = 4\n'
EVALUATION = '[[evaluation]]\nthreat-models = ["eavesdropper"]\nattacks = ["membership"]\n'


def federation(**keys: str) -> str:
    """A valid [[federation]] entry with `keys` (TOML values, written as they are) replacing its own."""
    lines = {"method": '"fedavg"', "dataset": '"digits"', "rounds": "1", "clients": "4", **keys}
    return "[[federation]]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items())


def evaluation(**keys: str) -> str:
    lines = {"threat-models": '["eavesdropper"]', "attacks": '["membership"]', **keys}
    return GOOD_FEDERATION + "[[evaluation]]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items())


BAD_FILES: dict[str, tuple[str | bytes, str]] = {
    "empty-file": ("", "no [[federation]] entry"),
    "binary-garbage": (bytes(range(256)) * 8, "not valid TOML"),
    "not-utf8": ('name = "caf\xe9"\n'.encode("latin-1") + GOOD_FEDERATION.encode(), "not valid TOML"),
    "huge-file-of-junk": ("x" * (8 << 20), "not valid TOML"),
    "deeply-nested-arrays": ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    "duplicate-key": (GOOD_FEDERATION + "rounds = 2\n", "not valid TOML"),
    "unknown-top-level-table": (GOOD_FEDERATION + "[bogus]\nx = 1\n", "unknown key 'bogus'"),
    "unknown-federation-key": (federation(roundz="3"), "unknown key 'roundz'"),
    "federation-not-a-table": ("federation = 5\n", "array-of-tables"),
    "federation-without-method": ('[[federation]]\ndataset = "digits"\n', "names no method"),
    "rounds-wrong-type": (federation(rounds='"ten"'), "rounds"),
    "rounds-zero": (federation(rounds="0"), "rounds=0"),
    "rounds-huge": (federation(rounds=str(2**62 * 2)), "rounds="),
    "lr-nan": (federation(lr="nan"), "lr=nan"),
    "lr-inf": (federation(lr="inf"), "lr=inf"),
    "lr-negative": (federation(lr="-1.0"), "lr=-1.0"),
    "lr-boolean": (federation(lr="true"), "lr=True"),
    "fraction-above-one": (federation(fraction="2.0"), "fraction=2.0"),
    "batch-size-zero": (federation(**{"batch-size": "0"}), "batch_size=0"),
    "batch-size-float": (federation(**{"batch-size": "10.5"}), "batch_size=10.5"),
    "epochs-zero": (federation(epochs="0"), "epochs=0"),
    "eval-every-zero": (federation(**{"eval-every": "0"}), "eval_every=0"),
    "seed-negative": (federation(seed="-5"), "seed=-5"),
    "clients-zero": (federation(clients="0"), "clients=0"),
    "unknown-method": (federation(method='"nosuch"'), "nosuch"),
    "unknown-dataset": (federation(dataset='"nosuch"'), "nosuch"),
    "unknown-partition": (federation(partition='"nosuch"'), "nosuch"),
    "unknown-hyper-key": (federation(method='"fedprox"', hyper="{ nosuch = 1 }"), "no setting 'nosuch'"),
    "hyper-nan": (federation(method='"fedprox"', hyper="{ mu = nan }"), "finite"),
    "unknown-partition-option": (federation(**{"partition-options": "{ nosuch = 1 }"}), "no option 'nosuch'"),
    "unknown-recording-policy": (federation(record='"sometimes"'), "recording policy"),
    "evaluation-unknown-attack": (evaluation(attacks='["nosuch"]'), "unknown attack 'nosuch'"),
    "evaluation-unknown-threat-model": (evaluation(**{"threat-models": '["nosuch"]'}), "nosuch"),
    "evaluation-unknown-key": (evaluation(victimz="[0]"), "unknown key 'victimz'"),
    "evaluation-victim-boolean": (evaluation(victims="[true]"), "victim"),
    "evaluation-victim-negative": (evaluation(victims="[-1]"), "victim -1"),
    "evaluation-aux-size-negative": (evaluation(**{"aux-size": "-1"}), "aux-size"),
    "evaluation-max-queries-zero": (evaluation(**{"max-queries": "0"}), "max-queries"),
    "evaluation-seeds-empty": (evaluation(seeds="[]"), "seeds"),
    "evaluation-seeds-words": (evaluation(seeds='["a"]'), "seeds"),
    "evaluation-settings-nested": (evaluation() + "[evaluation.settings.deep]\nx = 1\n", "settings"),
    "evaluation-setting-nan": (evaluation() + "[evaluation.settings]\nshadows = nan\n", "shadows"),
    # (an entry without attacks is the default audit, issue 33; an empty list names nothing)
    "evaluation-empty-attacks": (GOOD_FEDERATION + '[[evaluation]]\nthreat-models = ["oracle"]\nattacks = []\n',
                                 "attacks"),
    "reproduces-unknown-table": ('reproduces = ["nosuch:table9"]\n' + GOOD_FEDERATION, "nosuch:table9"),
    "reproduces-not-strings": ("reproduces = [1]\n" + GOOD_FEDERATION, "reproduces"),
}


@pytest.mark.parametrize("content, words", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_experiment_file_is_refused(ws: Workspace, content: str | bytes, words: str) -> None:
    path = ws.root / "mine.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    ws.seal()
    line = refused(ws.fedattack("experiment", "run", "mine.toml", "--out", "exp", "--quiet", "--no-report"), words)
    assert len(line) < 1000  # the message names the problem, it does not echo the file
    ws.unchanged()


BAD_PATHS = {
    "missing-file": ("nosuch.toml", "does not exist", 2),
    "a-folder-named-toml": ("folder.toml", "folder.toml", 1),
}


@pytest.mark.parametrize("name, words, code", BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_an_experiment_path_that_is_not_a_file_is_refused(ws: Workspace, name: str, words: str, code: int) -> None:
    (ws.root / "folder.toml").mkdir()
    ws.seal()
    refused(ws.fedattack("experiment", "run", name, "--out", "exp", "--quiet"), words, code=code)
    ws.unchanged()
