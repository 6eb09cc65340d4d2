"""Bad command-line input (issue #13), each through the real `fedattack` entry point.

Every input is refused with exit 2 (1 for a file-system failure), one line on stderr, no
traceback, and the user's folder exactly as it was: no run, no staging folder, no lock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, old_result, refused

TRAIN = ("train", "--dataset", "digits", "--rounds", "1", "--epochs", "1", "--clients", "4", "--quiet")
HUGE = str(2**80)

BAD_TRAIN = {
    "lr-nan": (["--lr", "nan"], "lr=nan"),
    "lr-inf": (["--lr", "inf"], "lr=inf"),
    "lr-overflows-to-inf": (["--lr", "1e400"], "lr=inf"),
    "lr-negative": (["--lr", "-0.1"], "--lr"),
    "lr-zero": (["--lr", "0"], "--lr"),
    "lr-not-a-number": (["--lr", "abc"], "--lr"),
    "rounds-zero": (["--rounds", "0"], "--rounds"),
    "rounds-negative": (["--rounds", "-3"], "--rounds"),
    "rounds-fractional": (["--rounds", "2.5"], "--rounds"),
    "rounds-huge": (["--rounds", HUGE], "rounds="),
    "epochs-zero": (["--epochs", "0"], "--epochs"),
    "epochs-huge": (["--epochs", HUGE], "epochs="),
    "batch-size-zero": (["--batch-size", "0"], "--batch-size"),
    "batch-size-word": (["--batch-size", "ten"], "--batch-size"),
    "batch-size-huge": (["--batch-size", HUGE], "batch_size="),
    "fraction-zero": (["--fraction", "0"], "--fraction"),
    "fraction-above-one": (["--fraction", "1.5"], "--fraction"),
    "fraction-negative": (["--fraction", "-0.5"], "--fraction"),
    "fraction-nan": (["--fraction", "nan"], "fraction=nan"),
    "clients-zero": (["--clients", "0"], "--clients"),
    "clients-more-than-samples": (["--clients", "5000"], "5000 clients"),
    "clients-huge": (["--clients", HUGE], "clients="),
    "seed-negative": (["--seed", "-5"], "seed=-5"),
    "seed-huge": (["--seed", HUGE], "seed="),
    "seed-word": (["--seed", "abc"], "--seed"),
    "eval-every-zero": (["--eval-every", "0"], "--eval-every"),
    "eval-every-huge": (["--eval-every", HUGE], "eval_every="),
    "unknown-method": (["--method", "nosuch"], "unknown method 'nosuch'"),
    "unknown-dataset": (["--dataset", "nosuch"], "unknown dataset 'nosuch'"),
    "unknown-partition": (["--partition", "nosuch"], "unknown partition 'nosuch'"),
    "unknown-model": (["--model", "nosuch"], "unknown model 'nosuch'"),
    "unknown-defence": (["--defence", "nosuch"], "unknown defence 'nosuch'"),
    "defence-setting-nan": (["--defence", "clip:max_norm=nan"], "max_norm"),
    "defence-setting-unknown": (["--defence", "clip:nosuch=1"], "no setting 'nosuch'"),
    "defence-setting-without-value": (["--defence", "clip:max_norm"], "key=value"),
    "unknown-executor": (["--executor", "nosuch"], "unknown executor 'nosuch'"),
    "unknown-recording-policy": (["--record", "bogus"], "recording policy"),
    "recording-last-zero": (["--record", "last:0"], "recording policy"),
    "recording-every-negative": (["--record", "every:-1"], "recording policy"),
    "unknown-normalization": (["--normalize", "zscore"], "--normalize"),
    "set-unknown-key": (["--set", "nosuch=1"], "no setting 'nosuch'"),
    "set-wrong-type": (["--method", "fedprox", "--set", "mu=abc"], "mu must be float"),
    "set-nan": (["--method", "fedprox", "--set", "mu=nan"], "finite"),
    "set-without-value": (["--set", "novalue"], "key=value"),
    "partition-option-unknown": (["--partition-opt", "nosuch=1"], "no option 'nosuch'"),
    "partition-option-zero": (["--partition-opt", "classes_per_client=0"], "classes_per_client"),
    "device-cuda-without-cuda": (["--device", "cuda"], "--device cuda"),
    "device-cuda-batched-without-cuda": (["--device", "cuda", "--executor", "batched"], "CUDA is not available"),
    "device-malformed-batched": (["--device", "cuda:x", "--executor", "batched"], "cuda:x"),
    "device-unknown": (["--device", "tpu"], "unknown device 'tpu'"),
    "dataset-import-path-missing": (["--dataset", "nosuchpkg.data:load"], "cannot import"),
    "model-import-path-missing": (["--model", "nosuchpkg.models:Net"], "cannot import"),
    "unknown-option": (["--bogus"], "No such option"),
    "plugin-missing-file": (["--plugin", "nosuch.py"], "does not exist"),
    "data-root-missing": (["--dataset", "mnist", "--data-root", "no/such/folder"], "mnist is not in"),
    "data-root-without-the-dataset": (["--dataset", "mnist", "--data-root", "thesis"], "mnist is not in"),
    "data-root-is-a-file": (["--dataset", "mnist", "--data-root", "notes.txt"], "--data-root"),
}


@pytest.mark.parametrize("extra, words", BAD_TRAIN.values(), ids=BAD_TRAIN.keys())
def test_train_refuses_a_bad_option(ws: Workspace, extra: list[str], words: str) -> None:
    ws.seal()
    line = refused(ws.fedattack(*TRAIN, "--out", "new-run", *extra), words)
    assert "--download" not in line or "mnist" in line  # only train has --download
    ws.unchanged()


PLUGINS = {
    "plugin-syntax-error": ("def broken(:\n", "SyntaxError"),
    "plugin-import-error": ("import no_such_module_here\n", "no_such_module_here"),
    "plugin-raises": ("raise RuntimeError('plugin exploded')\n", "plugin exploded"),
    "plugin-exits": ("import sys\nsys.exit(0)\n", "plugin file"),
}


@pytest.mark.parametrize("command", ["train", "evaluate"])
@pytest.mark.parametrize("source, words", PLUGINS.values(), ids=PLUGINS.keys())
def test_a_broken_plugin_is_refused(ws: Workspace, run: Path, command: str, source: str, words: str) -> None:
    (ws.root / "mine.py").write_text(source)
    ws.seal()
    args = TRAIN if command == "train" else ("evaluate", "run", "--attack", "membership")
    refused(ws.fedattack(*args, "--plugin", "mine.py", "--out", "new-out"), "plugin file", words)
    ws.unchanged()


BAD_OUT = {
    "out-is-a-file": (["--out", "notes.txt"], "is a file", 2),
    "out-under-a-file": (["--out", "notes.txt/run"], "notes.txt", 1),
    "out-current-directory": (["--out", ".", "--overwrite"], "current directory", 2),
    "out-parent-directory": (["--out", "..", "--overwrite"], "current directory", 2),
    "out-root": (["--out", "/", "--overwrite"], "current directory", 2),
    "out-existing-folder": (["--out", "thesis"], "already exists", 2),
    "overwrite-a-folder-that-is-not-a-run": (["--out", "thesis", "--overwrite"], "is not a run directory", 2),
    "overwrite-through-a-link-to-a-folder": (["--out", "link", "--overwrite"], "is not a run directory", 2),
    "out-existing-run-without-overwrite": (["--out", "run"], "already exists", 2),
}


@pytest.mark.parametrize("extra, words, code", BAD_OUT.values(), ids=BAD_OUT.keys())
def test_train_never_writes_over_what_the_user_has(ws: Workspace, run: Path, extra: list[str], words: str,
                                                   code: int) -> None:
    (ws.root / "link").symlink_to("thesis")
    ws.seal()
    refused(ws.fedattack(*TRAIN, *extra), words, code=code)
    ws.unchanged()


EVALUATE = ("evaluate", "run", "--attack", "membership", "--quiet")
BAD_EVALUATE = {
    "victim-out-of-range": (["--victim", "99"], "client 99 does not exist"),
    "victim-negative": (["--victim", "-1"], "victim -1"),
    "victim-word": (["--victim", "abc"], "victim 'abc'"),
    "victim-fraction": (["--victim", "1.5"], "victim '1.5'"),
    "victim-random-zero": (["--victim", "random:0"], "random:0"),
    "victim-random-word": (["--victim", "random:x"], "random:x"),
    "unknown-threat-model": (["--threat-model", "nosuch"], "unknown threat_model 'nosuch'"),
    "unknown-attack": (["--attack", "nosuch"], "unknown attack 'nosuch'"),
    "unknown-reconstruction": (["--reconstruction", "nosuch"], "unknown reconstruction 'nosuch'"),
    "attack-setting-zero": (["--set", "shadows=0"], "shadows=0"),
    "attack-setting-nan": (["--set", "shadows=nan"], "shadows"),
    "attack-setting-unknown": (["--set", "nosuch=1"], "'nosuch'"),
    "max-queries-zero": (["--max-queries", "0"], "--max-queries"),
    "aux-size-negative": (["--aux-size", "-1"], "--aux-size"),
    "aux-size-huge": (["--aux-size", HUGE], "aux-size"),
    "eval-size-huge": (["--eval-size", HUGE], "eval-size"),
    "seed-negative": (["--seed", "-1"], "seed"),
    "seed-huge": (["--seed", HUGE], "seed"),
    "threads-zero": (["--threads", "0"], "--threads"),
    "unknown-executor": (["--executor", "nosuch"], "unknown executor 'nosuch'"),
    "resume-and-force": (["--resume", "--force"], "pass one"),
    "user-model-import-path-missing": (["--model", "nosuchpkg:Net"], "cannot import"),
    "out-is-a-file": (["--out", "notes.txt"], "is a file"),
    "out-current-directory": (["--out", "."], "current directory"),
    "out-parent-directory": (["--out", ".."], "current directory"),
    "out-root": (["--out", "/"], "current directory"),
}


@pytest.mark.parametrize("extra, words", BAD_EVALUATE.values(), ids=BAD_EVALUATE.keys())
def test_evaluate_refuses_a_bad_option(ws: Workspace, run: Path, extra: list[str], words: str) -> None:
    ws.seal()
    args = [*EVALUATE, *extra] if "--out" in extra else [*EVALUATE, "--out", "results", *extra]
    refused(ws.fedattack(*args), words)
    ws.unchanged()


BAD_RUN_ARGUMENT = {
    "run-dir-missing": ("no-such-run", "is not a directory", 2),
    "run-dir-is-a-file": ("notes.txt", "is a file", 2),
    "run-dir-is-a-users-folder": ("thesis", "federation.json is missing", 2),
}


@pytest.mark.parametrize("where, words, code", BAD_RUN_ARGUMENT.values(), ids=BAD_RUN_ARGUMENT.keys())
def test_evaluate_refuses_what_is_not_a_run(ws: Workspace, where: str, words: str, code: int) -> None:
    ws.seal()
    refused(ws.fedattack("evaluate", where, "--out", "results"), words, code=code)
    ws.unchanged()


EXISTING_OUT = {
    "non-empty-out-without-resume-or-force": ([], "result", "already holds 1 result"),
    "force-keeps-old-results-when-the-evaluation-fails": (["--force", "--victim", "99"], "result", "client 99"),
    "force-never-deletes-a-users-json": (["--force", "--victim", "99"], "users-json", "client 99"),
    "resume-with-a-users-json-in-out": (["--resume", "--victim", "99"], "users-json", "client 99"),
    "users-summary-json-in-out": (["--victim", "0"], "users-summary", "summary.json"),
}


@pytest.mark.parametrize("extra, holds, words", EXISTING_OUT.values(), ids=EXISTING_OUT.keys())
def test_evaluate_keeps_what_out_already_holds(ws: Workspace, run: Path, extra: list[str], holds: str,
                                               words: str) -> None:
    out = ws.root / "results"
    out.mkdir()
    if holds == "result":
        old_result(out)
    elif holds == "users-json":
        (out / "bibliography.json").write_text('{"refs": ["Shokri 2017"]}')
    else:
        (out / "summary.json").write_text('{"mine": true}')
    ws.seal()
    refused(ws.fedattack(*EVALUATE, "--out", "results", *extra), words)
    ws.unchanged()


def test_the_summary_schema_evaluate_checks_is_the_one_written() -> None:
    from fedattack.attacks.evaluation import results_folder
    from fedattack.attacks.evaluation.summary import SUMMARY_SCHEMA

    assert results_folder.SUMMARY_SCHEMA == SUMMARY_SCHEMA  # the folder's check, kept light of summary's imports


MISC = {
    "unknown-command": (["nosuchcommand"], "No such command"),
    "unknown-experiment": (["experiment", "run", "nosuch"], "no experiment named 'nosuch'"),
    "report-nothing": (["report"], "no results given"),
    "report-missing-path": (["report", "no-such-results"], "does not exist"),
    "report-unknown-paper": (["report", "thesis", "--paper", "nosuch"], "unknown paper table"),
    "report-out-is-a-file": (["report", "thesis", "-o", "notes.txt"], "is a file"),
    "report-folder-without-results": (["report", "thesis"], "no fedattack results"),
}


@pytest.mark.parametrize("args, words", MISC.values(), ids=MISC.keys())
def test_other_commands_refuse_bad_arguments(ws: Workspace, args: list[str], words: str) -> None:
    ws.seal()
    refused(ws.fedattack(*args), words)
    ws.unchanged()

