"""Interrupts are honoured, even inside third-party code that swallows them.

scikit-learn's `MLPClassifier.fit` catches `KeyboardInterrupt` and returns a part-trained model
with only a warning, so a Ctrl-C or SIGTERM during an attack used to end in exit code 0 and
membership numbers that silently differ from an uninterrupted run. `honour_interrupts()` notes
every SIGINT/SIGTERM that arrives while its block runs (raising `KeyboardInterrupt` at that
point, as Python does), and raises it again when the block ends if one arrived, so a swallowed
interrupt can no longer turn into a wrong result. Outside the main thread signals cannot be
handled, and the block runs as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def honour_interrupts() -> Iterator[None]:
    with _noted(raise_at_once=True):
        yield


@contextmanager
def held_interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (a few moves of files that belong together:
    an evaluation's victim published whole), then interrupt as Ctrl-C does. Outside the main
    thread the block runs as it is."""
    with _noted(raise_at_once=False):
        yield


@contextmanager
def _noted(raise_at_once: bool) -> Iterator[None]:
    """SIGINT and SIGTERM noted while the block runs (and raised at once, or not), and raised
    again as `KeyboardInterrupt` when it ends if one arrived."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        if raise_at_once:
            raise KeyboardInterrupt

    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if seen:
        raise KeyboardInterrupt


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler that stops as Ctrl-C does: a scheduler's or `kill`'s SIGTERM then cleans
    up (atomic writes remove their hidden partial folders and locks) instead of killing."""
    raise KeyboardInterrupt


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `KeyboardInterrupt` while the block runs, so a scheduler's or `kill`'s stop
    cleans up as Ctrl-C does (a run or evaluation written atomically removes its hidden partial
    folder and lock) instead of killing the process where it stands. For library callers (a
    user's script calling `train_federation`); the CLI sets this for the whole process. A
    handler the caller installed is left alone, and outside the main thread nothing changes."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
