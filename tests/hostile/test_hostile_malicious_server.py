"""The malicious-server threat model in `fedattack evaluate` (issue #44, in the default audit)
and its acting attacks, `acting-imprint` and `acting-trap-weights`, given bad victims and
settings (issue #43 item 6): one line, a non-zero exit, before any victim is attacked, and the
user's folder (a run among their own files) as it was, on this process and on a sweep backend.

Accepted without a word before: `--set bins=N` for `acting-trap-weights` alone (trap weights
have no units to choose; the setting was ignored), and `--workers` on the sequential backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, refused

ACTING = ("evaluate", "run", "--threat-model", "malicious-server", "--out", "results", "--quiet")

BAD_ACTING = {
    "acting-victim-past-the-last-client": (["--attack", "acting-imprint", "--victim", "999"],
                                           ("client 999 does not exist", "0..9")),
    "acting-victim-negative": (["--attack", "acting-imprint", "--victim", "-1"], ("victim -1",)),
    "acting-victims-more-than-clients": (["--attack", "acting-trap-weights", "--victim", "random:11"],
                                         ("random:11", "10 clients")),
    "acting-victims-a-list": (["--attack", "acting-imprint", "--victim", "1,1"], ("'1,1' is not a client id",)),
    "acting-bins-one": (["--attack", "acting-imprint", "--victim", "1", "--set", "bins=1"],
                        ("bins=1", "at least 2")),
    "acting-bins-negative": (["--attack", "acting-imprint", "--victim", "1", "--set", "bins=-4"], ("bins=-4",)),
    "acting-bins-not-a-number": (["--attack", "acting-imprint", "--victim", "1", "--set", "bins=lots"],
                                 ("bins must be int", "'lots'")),
    "acting-bins-past-the-memory-budget": (["--attack", "acting-imprint", "--victim", "1", "--set",
                                            "bins=100000000000"], ("refused before starting", "acting-imprint")),
    "acting-trap-weights-given-bins": (["--attack", "acting-trap-weights", "--victim", "1", "--set", "bins=100"],
                                       ("no chosen attack has the setting 'bins'",)),
    "acting-unknown-setting": (["--attack", "acting-imprint", "--victim", "1", "--set", "rounds=3"],
                               ("'rounds'",)),
    "acting-bins-on-local-workers": (["--attack", "acting-imprint", "--victim", "1", "--set", "bins=1",
                                      "--backend", "local", "--workers", "2"], ("bins=1",)),
}


@pytest.mark.parametrize("extra, words", BAD_ACTING.values(), ids=BAD_ACTING.keys())
def test_a_bad_acting_round_is_one_line_before_any_victim(ws: Workspace, run: Path, extra: list[str],
                                                          words: tuple[str, ...]) -> None:
    ws.seal()
    refused(ws.fedattack(*ACTING, *extra), *words)
    ws.unchanged()
