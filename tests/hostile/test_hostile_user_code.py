"""User code named by import path (issue #39): `--model` / `--dataset module:factory`.

A factory that raises, a module with a syntax error (or one that raises on import), a model
whose output is not one score per class, a dataset with NaN pixels: each ended in "unexpected
... this is a fedattack bug"; each is now one line naming the user's factory and what is wrong,
for `train` and for `evaluate`, and nothing is written.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, finish, refused, spawn

TRAIN = ("train", "--rounds", "1", "--epochs", "1", "--clients", "4", "--quiet", "--out", "new-run")
NET = "import torch\nfrom torch import nn\n"
MODULES = {
    "model-factory-raises": (NET + "def make():\n    raise RuntimeError('no GPU here')\n", "model",
                             ("make", "RuntimeError: no GPU here", "fix the factory")),
    "model-module-syntax-error": ("def make(:\n    pass\n", "model", ("syntax error", "line 1")),
    "model-module-raises-on-import": ("raise ValueError('config missing')\n", "model",
                                      ("ValueError: config missing", "fix the module")),
    "model-three-outputs-for-ten-classes": (
        NET + "def make():\n    return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))\n", "model",
        ("make", "[2, 3]", "10 classes")),
    "model-fails-on-the-images": (NET + "def make():\n    return nn.Linear(5, 10)\n", "model",
                                  ("make", "fails on a batch of [1, 8, 8] images")),
    "dataset-factory-raises": ("def load():\n    raise FileNotFoundError('/data/mine')\n", "dataset",
                               ("load", "FileNotFoundError: /data/mine")),
    "dataset-nan-pixels": (
        NET + "def load():\n    x = torch.rand(40, 1, 8, 8)\n    x[3, 0, 2, 2] = float('nan')\n"
        "    y = torch.arange(40) % 4\n    return x, y, torch.rand(20, 1, 8, 8), torch.arange(20) % 4\n",
        "dataset", ("load", "train images hold NaN", "1 of 2560")),
}
COUNTER = itertools.count()
GOOD = {"model": NET + "def make():\n    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))\n",
        "dataset": NET + "def load():\n    g = torch.Generator().manual_seed(0)\n"
                   "    x, t = torch.rand(40, 1, 8, 8, generator=g), torch.rand(20, 1, 8, 8, generator=g)\n"
                   "    return x, torch.arange(40) % 4, t, torch.arange(20) % 4\n"}


@pytest.fixture(scope="module")
def user_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs trained (in another process) on a working user model and a working user dataset, whose
    modules the tests then break under the same name, as a user's edit would."""
    where = tmp_path_factory.mktemp("user-runs")
    (where / "code").mkdir()
    for kind, source in GOOD.items():
        (where / "code" / f"users_good_{kind}.py").write_text(source)
    for kind, name in (("model", "make"), ("dataset", "load")):
        args = (*TRAIN[:-1], f"run-{kind}", f"--{kind}", f"users_good_{kind}:{name}")
        env_path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = f"{where / 'code'}{os.pathsep}{env_path}"
        try:
            done = finish(spawn(*args, cwd=where), args)
        finally:
            os.environ["PYTHONPATH"] = env_path
        assert done.code == 0, done.err
    return where


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize("source, kind, words", MODULES.values(), ids=MODULES.keys())
def test_broken_user_code_is_named_in_one_line_by_train(ws: Workspace, monkeypatch: pytest.MonkeyPatch,
                                                         source: str, kind: str, words: tuple[str, ...]) -> None:
    code = ws.root.parent / "code"
    code.mkdir(exist_ok=True)
    module = f"users_{kind}_{next(COUNTER)}"  # a fresh name: Python caches what it imported
    (code / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(code))
    factory = f"{module}:{'make' if kind == 'model' else 'load'}"
    ws.seal()
    args = (*TRAIN, f"--{kind}", factory) + (("--dataset", "digits") if kind == "model" else ())
    line = refused(ws.fedattack(*args), *words)
    assert factory.split(":")[0] in line
    ws.unchanged()


EVALUATED = ["model-factory-raises", "model-module-syntax-error", "model-three-outputs-for-ten-classes",
             "dataset-nan-pixels"]


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize("case", EVALUATED)
def test_broken_user_code_is_named_in_one_line_by_evaluate(ws: Workspace, user_runs: Path,
                                                            monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """The run was trained on the user's code; the code broke since (an edit): evaluate says where."""
    source, kind, words = MODULES[case]
    module = f"users_good_{kind}"
    code = ws.root.parent / "code"
    code.mkdir(exist_ok=True)
    (code / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.delitem(sys.modules, module, raising=False)
    shutil.copytree(user_runs / f"run-{kind}", ws.root / "run")
    factory = f"{module}:{'make' if kind == 'model' else 'load'}"
    ws.seal()
    line = refused(ws.fedattack("evaluate", "run", "--attack", "membership", "--quiet", "--out", "results",
                                f"--{kind}", factory), *words)
    assert module in line
    ws.unchanged()
