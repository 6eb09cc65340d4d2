"""The active server and its client-side check through the real `fedattack` entry point (issue #50).

Accepted without a word before: two `--active` (the last won), a victim past the last client and
acting rounds past the last round ("acted in no round"), isolation without secure aggregation
(where it does nothing but stop the other clients training), and a server on a method with
nothing on the wire. Each is now one line, before any training, with the user's folder as it was.
What crashed before ("unexpected KeyError: 'c.imprint.weight'; this is a fedattack bug" for
SCAFFOLD, "'imprint.weight'" for q-FFL) trains and is read, the check lets SCAFFOLD train, and the
evaluation's summary line prints each spread as a 95% interval in brackets.
"""

from __future__ import annotations

import pytest

from tests.hostile._cli import Workspace, refused

TRAIN = ("train", "--dataset", "digits", "--clients", "6", "--fraction", "0.5", "--rounds", "2", "--epochs", "1",
         "--quiet", "--out", "new-run")

BAD_ACTIVE = {
    "active-twice": (["--active", "imprint", "--active", "trap-weights"], ("--active given 2 times", "one server")),
    "victim-past-the-last-client": (["--active", "imprint:victim=999"], ("victim=999", "6 clients")),
    "rounds-past-the-last-round": (["--active", "trap-weights:rounds=2-5"], ("rounds=2-5", "runs 2 rounds")),
    "isolation-without-secure-aggregation": (["--active", "model-inconsistency"],
                                             ("isolates", "--defence secure-aggregation")),
    "imprint-isolate-without-secure-aggregation": (["--active", "imprint:isolate=true"], ("hides the uplinks",)),
    "a-method-with-nothing-on-the-wire": (["--method", "local", "--active", "trap-weights"],
                                          ("local puts nothing on the wire",)),
}


@pytest.mark.parametrize("extra, words", BAD_ACTIVE.values(), ids=BAD_ACTIVE.keys())
def test_an_active_server_that_would_act_on_nothing_is_refused_before_training(
        ws: Workspace, extra: list[str], words: tuple[str, ...]) -> None:
    ws.seal()
    refused(ws.fedattack(*TRAIN, *extra), *words)
    ws.unchanged()


@pytest.mark.parametrize("method, active", [("scaffold", "imprint"), ("qffl", "imprint"), ("qffl", "trap-weights")])
def test_a_method_whose_uplink_is_not_its_model_is_acted_on_and_read(ws: Workspace, method: str, active: str) -> None:
    trained = ws.fedattack(*TRAIN, "--method", method, "--active", f"{active}:rounds=1", "--record", "all")
    assert trained.code == 0, trained.err
    assert f"active server {active} acted in round 1" in trained.err
    read = ws.fedattack("evaluate", "new-run", "--threat-model", "server", "--attack", "readout", "--victim", "all",
                        "--quiet", "--out", "results")
    assert read.code == 0, read.err
    line = next(x for x in read.out.splitlines() if x.startswith("readout"))
    assert "not applicable" not in line and "[n=3]" in line, line  # the round's three sampled clients
    assert "±" not in line and "recovered_20 " in line and "] [n=3]" in line, line  # mean [low, high]


def test_the_check_lets_scaffold_train_and_says_what_it_refused(ws: Workspace) -> None:
    trained = ws.fedattack(*TRAIN, "--method", "scaffold", "--defence", "downlink-check")
    assert trained.code == 0, trained.err
    assert "downlink-check: refused 0 of 6 downlinks" in trained.out, trained.out
