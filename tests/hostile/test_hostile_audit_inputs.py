"""The DP audit's inputs added by issue #45 (`fedattack audit --white-box`, `--runs N` on a sweep
`--backend`/`--workers`, `--plant BUG`), each through the real `fedattack` entry point (issue #43
item 6): one line, a non-zero exit, before any canary federation trains, and the user's folder
(a dp-fedavg run among their own files) as it was.

Accepted without a word before: `--backend ray` or `--workers 2` on a one-run audit (ignored: the
audit trained its one federation here), `--workers` on the sequential backend (ignored), and
`--plant` twice (the last won). A manifest forged to say `"defences": "dp"` ended in
"unexpected AttributeError"; it is now a run directory with a spec this version cannot read.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from fedattack.federation.train import train_federation
from fedattack.target import Recipe
from tests.conftest import tiny_spec
from tests.hostile._cli import Workspace, refused

DP = {"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 8.0}}


@pytest.fixture(scope="module")
def dp_trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, recipe=Recipe(epochs=1, batch_size=16, lr=0.1),
                     defences=(DP,))
    return train_federation(spec, tmp_path_factory.mktemp("dp") / "run", progress=False)


@pytest.fixture
def dp_run(ws: Workspace, dp_trained: Path) -> Path:
    return Path(shutil.copytree(dp_trained, ws.root / "run"))


BAD_AUDIT = {
    "plant-an-unknown-bug": (["--white-box", "--plant", "bug-nothing"], ("unknown dp-bug 'bug-nothing'",)),
    "plant-a-bug-without-its-prefix": (["--plant", "noise-missing"], ("did you mean 'bug-noise-missing'",)),
    "plant-twice": (["--white-box", "--plant", "bug-noise-missing", "--plant", "bug-noise-unscaled"],
                    ("--plant given 2 times", "plant one")),
    "white-box-at-example-level": (["--white-box", "--level", "example"], ("drop --level example",)),
    "runs-below-ten": (["--runs", "5"], ("--runs", "5")),
    "runs-on-an-unknown-backend": (["--runs", "10", "--backend", "nope"], ("unknown backend 'nope'",)),
    "runs-with-no-workers": (["--runs", "10", "--workers", "0"], ("--workers",)),
    "backend-without-runs": (["--white-box", "--backend", "ray"], ("--backend", "--runs N")),
    "workers-without-runs": (["--workers", "2"], ("--workers", "--runs N")),
    "workers-on-the-sequential-backend": (["--runs", "10", "--backend", "sequential", "--workers", "3"],
                                          ("--workers 3", "sequential")),
    "white-box-canaries-past-the-models-coordinates": (["--white-box", "--canaries", "100000"],
                                                        ("100000 white-box canaries", "at most")),
    "white-box-over-a-users-file": (["--white-box", "--out", "notes.txt", "--overwrite"],
                                    ("not a fedattack audit",)),
    "runs-over-a-users-file": (["--runs", "10", "--out", "notes.txt"], ("already exists",)),
}


@pytest.mark.parametrize("extra, words", BAD_AUDIT.values(), ids=BAD_AUDIT.keys())
def test_a_bad_dp_audit_input_is_one_line_before_any_canary_trains(ws: Workspace, dp_run: Path, extra: list[str],
                                                                  words: tuple[str, ...]) -> None:
    ws.seal()
    refused(ws.fedattack("audit", "run", "--canaries", "8", *extra), *words)
    ws.unchanged()


def test_a_bug_planted_into_a_run_without_dp_names_what_it_needs(ws: Workspace, run: Path) -> None:
    ws.seal()
    refused(ws.fedattack("audit", "run", "--white-box", "--plant", "bug-noise-missing", "--out", "a.json"),
            "replaces the run's dp-fedavg", "--defence dp-fedavg")
    ws.unchanged()


def test_a_multirun_audit_on_ray_without_ray_names_the_extra(ws: Workspace, dp_run: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    ws.seal()
    refused(ws.fedattack("audit", "run", "--runs", "10", "--backend", "ray", "--out", "a.json"), "Ray")
    ws.unchanged()


FORGED_SPEC = {
    "defences-a-string": ("dp", "defences must be a list"),
    "defence-settings-a-list": ([{"name": "dp-fedavg", "settings": [1.0, 8.0]}], "defences must be a list"),
    "dp-noise-negative": ([{**DP, "settings": {**DP["settings"], "noise_multiplier": -1.0}}], "noise_multiplier >= 0"),
    "dp-noise-nan": ([{**DP, "settings": {**DP["settings"], "noise_multiplier": float("nan")}}], "finite number"),
}


@pytest.mark.parametrize("defences, words", FORGED_SPEC.values(), ids=FORGED_SPEC.keys())
def test_a_forged_manifests_defences_are_refused_by_the_white_box_audit(ws: Workspace, dp_run: Path,
                                                                        defences: object, words: str) -> None:
    manifest = json.loads((dp_run / "federation.json").read_text())
    manifest["spec"]["defences"] = defences  # the manifest is not under its own checksums: no reseal needed
    (dp_run / "federation.json").write_text(json.dumps(manifest))
    ws.seal()
    refused(ws.fedattack("audit", "run", "--white-box", "--canaries", "8", "--out", "a.json"), words)
    ws.unchanged()
