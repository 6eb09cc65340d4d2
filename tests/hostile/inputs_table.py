"""The table of hostile inputs tried (issue #13), written from test runs, not by hand.

Run the hostile suite with `HOSTILE_LOG=now.jsonl ... pytest tests/hostile --junitxml=now.xml`,
and the same tests against the code before the fixes (`before.jsonl`, `before.xml`); then

    python tests/hostile/inputs_table.py now.jsonl now.xml before.jsonl before.xml > table.md

Each row is one test id: the command, its exit code and the line it printed, the check of the
user's files that passed, and the outcome: held (passed before the fixes too) or fixed by the
commit that added the test's module with its fixes (what the code printed before is quoted).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any


def outcomes(junit: Path) -> dict[str, bool]:
    """test id -> passed, from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        passed = not any(child.tag in ("failure", "error") for child in case)
        skipped = any(child.tag == "skipped" for child in case)
        found[f"{module}.py::{case.get('name')}"] = passed and not skipped
    return found


def entries(log: Path) -> dict[str, list[dict[str, Any]]]:
    by_test: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        by_test[entry["test"].split("/")[-1]].append(entry)
    return by_test


def added_by(module: str, test: str = "") -> str:
    """The commit that added a test (the first to mention its input's id in its module, with the
    fixes it needed), else the one that added the module."""
    ident = test.split("[", 1)[1].rstrip("]") if "[" in test else test
    if ident:
        done = subprocess.run(["git", "log", "--reverse", "--format=%h", f"-S{ident}", "--",
                               f"tests/hostile/{module}"], capture_output=True, text=True, check=False)
        if done.stdout.split():
            return done.stdout.split()[0]
    done = subprocess.run(["git", "log", "--diff-filter=A", "--format=%h", "--", f"tests/hostile/{module}"],
                          capture_output=True, text=True, check=False)
    return (done.stdout.split() or ["?"])[-1]


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(now_log: Path, now_xml: Path, before_log: Path, before_xml: Path) -> str:
    now, before = outcomes(now_xml), outcomes(before_xml)
    logged, logged_before = entries(now_log), entries(before_log)
    rows = ["| test id | command | exit | the line printed | nothing lost | outcome |",
            "|---|---|---|---|---|---|"]
    counts: dict[str, int] = defaultdict(int)
    for test in sorted(now):
        runs = [e for e in logged[test] if "args" in e]
        checks = [e["check"] for e in logged[test] if "check" in e]
        if not runs:
            continue  # not an input (a consistency check of the suite itself)
        last = runs[-1]
        if not now[test]:
            outcome = "FAILS now"
        elif before.get(test):
            outcome = "held"
        elif test not in before:
            outcome = f"fixed by {added_by(*test.split('::'))} (before: not run against the old code)"
        else:
            was = [e for e in logged_before.get(test, []) if "args" in e]
            said = f"exit {was[-1]['code']}: {was[-1]['line'] or '(nothing)'}" if was else "its check failed"
            outcome = f"fixed by {added_by(*test.split('::'))} (before: {said[:160]})"
        counts["held" if outcome == "held" else outcome.split(" (")[0]] += 1
        counts["inputs"] += 1
        command = " ".join(last["args"]) if last["args"][0] == "python:" else "fedattack " + " ".join(last["args"])
        rows.append(f"| `{cell(test.split('::')[-1])}` | `{cell(command)[:160]}` | "
                    f"{last['code']} | {cell(last['line'] or '(nothing)')[:220]} | "
                    f"{cell(checks[-1]) if checks else '-'} | {cell(outcome)} |")
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    return f"{summary}\n\n" + "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(*(Path(a) for a in sys.argv[1:5])))
