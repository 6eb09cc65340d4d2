"""Where an experiment's cells run: `sequential`, `local` (processes), `ray` (a cluster).

Each backend is one file here (or a plugin's, behind the entry point `fedattack.backends`)
holding a `Backend` subclass that registers itself in `BACKENDS` by defining `name`; `fedattack
experiment run --backend NAME` and `fedattack list backends` read the registry, so adding one
needs no edit elsewhere. Every backend runs the same tasks
(`base.execute`), so the same sweep gives the same bytes on each.
"""

from fedattack.experiments.backends.base import (
                                                 BACKENDS,
                                                 Backend,
                                                 CellFailed,
                                                 Outcome,
                                                 Task,
                                                 execute,
                                                 make_backend,
                                                 run_tasks,
)

__all__ = ["BACKENDS", "Backend", "CellFailed", "Outcome", "Task", "execute", "make_backend", "run_tasks"]
