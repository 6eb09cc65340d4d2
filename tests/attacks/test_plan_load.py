"""Issue #46 item 7 and #49 item 5: a plan says what its estimate assumes, and the evaluation says
how it came out against it.

- the probe records the torch threads it ran with (the evaluation's) and how much slower the
  machine's wall clock ran than its free cores;
- the plan's total says the threads, and on a busy machine what to expect at the present load;
- at the end, measured against planned: free cores, and the load at planning time where it mattered.
"""

from __future__ import annotations

import dataclasses

import torch

from fedattack.attacks.planning.cost import Budget, Cost, Decision
from fedattack.attacks.planning.plan import Call, Plan
from fedattack.attacks.planning.probe import measure
from fedattack.registry import ATTACKS, THREAT_MODELS
from tests.attacks.test_default_audit import PROBE, work
from tests.conftest import build


def plan_of(slowdown: float, measured: float | None) -> Plan:
    w = dataclasses.replace(work(100), probe=dataclasses.replace(PROBE, threads=1, slowdown=slowdown, load=4.2))
    call = Call(ATTACKS.get("rmia")(), THREAT_MODELS.get("eavesdropper")(), 0, w, 1, Decision(Cost(100.0, 2**20, "x")))
    call.measured_seconds = measured
    plan = Plan(Budget(2**33, None, "test", "test"), 0)
    plan.calls.append(call)
    return plan


def test_the_probe_records_its_threads_and_the_machines_speed() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        probe = measure(build("fedavg"))
    finally:
        torch.set_num_threads(before)
    assert probe.threads == 1 and probe.slowdown >= 1.0
    assert probe.load is None or probe.load >= 0


def test_a_plan_made_on_free_cores_says_so_and_a_busy_one_what_to_expect() -> None:
    quiet = plan_of(1.0, None).lines()[-1]
    assert "with 1 torch thread on free cores (as they were when planned, load 4.2 per core)" in quiet
    busy = plan_of(3.0, None).lines()[-1]
    assert "this machine is busy (the probe ran 3.0x slower, load 4.2 per core): expect ~5m00s" in busy


def test_the_end_of_an_evaluation_sets_what_it_took_against_the_plan() -> None:
    assert plan_of(1.0, 150.0).outcome() == "measured: the attacks took 2m30s, 1.50x the plan's 1m40s on free cores"
    busy = plan_of(3.0, 330.0).outcome()
    assert busy.endswith("3.30x the plan's 1m40s on free cores; 1.10x what the load at planning time predicted")
    assert plan_of(1.0, None).outcome() == ""  # nothing ran: nothing to say
    assert plan_of(3.0, 330.0).to_json()["probe"] == {"threads": 1, "slowdown": 3.0, "load_per_core": 4.2}
