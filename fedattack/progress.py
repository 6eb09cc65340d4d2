"""Progress that means something: the evaluation's bar in planned seconds, and a bar under it
for whatever long step the current call is in (reference models, iterations, linear programs,
rounds), each with its count and an estimate of the time left.

Code that does long work wraps its loop in `steps(iterable, "reference models", total)`; it
costs nothing when no evaluation is reporting (tests, the Python API by default), and needs no
object handed down: the reporter an evaluation starts is found through a context variable.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")
_REPORTER: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("fedattack_progress", default=None)


class Reporter:
    """The evaluation's bar: its total is the plan's seconds, so its rate and time left come
    from how fast the calls go against their estimates, not from a count of unequal calls."""

    def __init__(self, planned_seconds: float, desc: str = "evaluate", disable: bool = False) -> None:
        self.disable = disable
        self.bar = tqdm(total=max(1.0, round(planned_seconds, 1)), desc=desc, unit="s", leave=False,
                        disable=disable, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} planned s "
                                   "[{elapsed}<{remaining}]{postfix}")

    @contextlib.contextmanager
    def call(self, label: str, planned: float) -> Iterator[None]:
        """One call: named on the bar while it runs, the bar advanced by its planned seconds after."""
        self.bar.set_postfix_str(label, refresh=True)
        try:
            yield
        finally:
            if planned == planned:  # not NaN (an attack that declared no cost)
                self.advance(planned)

    def advance(self, planned: float) -> None:
        """Move the bar by a call's planned seconds, never past its total: float sums of the calls'
        estimates can overshoot a rounded total by a hair, and tqdm then warns on the user's terminal."""
        self.bar.n = min(float(self.bar.total), float(self.bar.n) + max(0.0, planned))
        self.bar.refresh()

    def inner(self, what: str, total: int | None) -> Any:
        return tqdm(total=total, desc=f"  {what}", leave=False, disable=self.disable, position=1,
                    dynamic_ncols=True)

    def close(self) -> None:
        self.bar.close()


@contextlib.contextmanager
def reporting(planned_seconds: float, desc: str = "evaluate", disable: bool = False) -> Iterator[Reporter]:
    """Start the evaluation's bar; `steps` inside reports under it."""
    reporter = Reporter(planned_seconds, desc, disable)
    token = _REPORTER.set(reporter)
    try:
        yield reporter
    finally:
        _REPORTER.reset(token)
        reporter.close()


def current() -> Reporter | None:
    return _REPORTER.get()


@contextlib.contextmanager
def current_call(label: str, planned: float) -> Iterator[None]:
    """`Reporter.call` on the evaluation's bar, if one is reporting."""
    reporter = _REPORTER.get()
    if reporter is None:
        yield
        return
    with reporter.call(label, planned):
        yield


def steps(iterable: Iterable[T], what: str, total: int | None = None) -> Iterator[T]:
    """`iterable`, reporting each item as one step of `what` under the evaluation's bar."""
    reporter = _REPORTER.get()
    if reporter is None or reporter.disable:
        yield from iterable
        return
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    bar = reporter.inner(what, total)
    try:
        for item in iterable:
            yield item
            bar.update()
    finally:
        bar.close()
