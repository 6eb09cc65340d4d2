"""Options (issue #39): values that reached an unexpected error, or were quietly bent.

`--victim random:99` on a federation of 10 clients took all 10; `--max-queries 1` failed with
numpy's "Mean of empty slice" warning; experiment keys that must be tables (`hyper = 3`,
`partition-options = ["x"]`, ...) reached "unexpected TypeError/ValueError ... bug". Each is one
line naming the option, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, refused

EVALUATE = ("evaluate", "run", "--attack", "membership", "--set", "shadows=1", "--set", "classifier=logreg",
            "--quiet", "--out", "results")
BAD_EVALUATE = {
    "victim-random-99-of-10-clients": (["--victim", "random:99"], ("random:99", "10 clients")),
    "victim-random-11-of-10-clients": (["--victim", "random:11"], ("random:11",)),
    "max-queries-one": (["--victim", "0", "--max-queries", "1"], ("--max-queries 1", "no member")),
}


@pytest.mark.parametrize("extra, words", BAD_EVALUATE.values(), ids=BAD_EVALUATE.keys())
def test_evaluate_names_the_option(ws: Workspace, run: Path, extra: list[str], words: tuple[str, ...]) -> None:
    ws.seal()
    refused(ws.fedattack(*EVALUATE, *extra), *words)
    ws.unchanged()


FEDERATION = '[[federation]]\nmethod = "fedprox"\ndataset = "digits"\nrounds = 1\nclients = 4\n'
BAD_TABLES = {
    "hyper-a-number": ("hyper = 3\n", "hyper = 3"),
    "partition-options-a-list": ('partition-options = ["x"]\n', "partition-options = ['x']"),
    "hyper-a-string": ('hyper = "mu=1"\n', "hyper = 'mu=1'"),
    "by-method-a-number": ("by-method = 1\n", "by-method = 1"),
    "evaluation-settings-a-list": ('[[evaluation]]\nthreat-models = ["eavesdropper"]\nattacks = ["membership"]\n'
                                   "settings = [1, 2]\n", "settings = [1, 2]"),
    "defaults-a-number": ("", "defaults = 5"),
}


@pytest.mark.parametrize("extra, words", BAD_TABLES.values(), ids=BAD_TABLES.keys())
def test_an_experiment_key_that_must_be_a_table_is_refused(ws: Workspace, extra: str, words: str) -> None:
    head = "defaults = 5\n" if words.startswith("defaults") else ""
    (ws.root / "mine.toml").write_text(head + FEDERATION + extra)
    ws.seal()
    refused(ws.fedattack("experiment", "run", "mine.toml", "--out", "exp", "--quiet"), words, "must be a table")
    ws.unchanged()
