"""`fedattack audit-flower` (issue #45 item 4): a Flower app whose DP configuration the audit
cannot take at its word is refused in one line, with a non-zero exit, and nothing written.

Each app is a function of tests/interop/flower_dp_apps.py: a DP wrapper told the wrong number
of sampled clients (Flower only warns, and its noise is then for another m), a negative noise
multiplier (Flower's own refusal, made one line), clients weighted unequally (Flower's noise is
calibrated for a uniform mean), a ClientApp that crashes, and a factory that returns no app."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr.supercore.privacy_accounting", reason="the Flower DP audit needs flwr>=1.42 (its accountant)")

from tests.hostile._cli import Workspace, refused  # noqa: E402

APPS = "tests.interop.flower_dp_apps"
REFUSALS = {
    "wrong_sample_count": ("round 1", "num_sampled_clients=33", "34 nodes"),
    "negative_noise": ("Flower refused the app's DP configuration", "non-negative"),
    "unequal_weights": ("round 1", "num-examples from 128 to 256", "uniform mean"),
    "crashing_client": ("ClientApp (partition-id", "raised RuntimeError", "the client's data is missing"),
    "not_an_app": ("returned a str", "FlowerApp"),
    "no_such_function": ("has no 'no_such_function'",),
}


@pytest.mark.parametrize("app", sorted(REFUSALS))
def test_a_bad_flower_dp_configuration_is_refused_in_one_line(ws: Workspace, app: str) -> None:
    ws.seal()
    outcome = ws.fedattack("audit-flower", f"{APPS}:{app}", "--canaries", "32", "--out", "audit.json")
    refused(outcome, *REFUSALS[app])
    ws.unchanged()


def test_an_existing_file_is_not_replaced(ws: Workspace) -> None:
    (ws.root / "audit.json").write_text('{"mine": true}\n')
    ws.seal()
    refused(ws.fedattack("audit-flower", f"{APPS}:server_side", "--out", "audit.json"), "already exists")
    refused(ws.fedattack("audit-flower", f"{APPS}:server_side", "--out", "audit.json", "--overwrite"),
            "is not a fedattack Flower audit")
    ws.unchanged()
