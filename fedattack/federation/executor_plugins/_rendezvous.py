"""Gather the `ctx.train` calls of several client updates so they can be served together.

A target's `client_update` is ordinary code that calls `ctx.train(...)` somewhere in the middle
(possibly more than once, e.g. a global and a personal model). To batch those calls without
asking targets to restructure, each client update runs in its own thread, but only one thread
ever runs at a time: a client runs until it asks to train (or returns), then hands control
back. When every client is paused or done, all pending train requests are served in one batch
and the paused clients continue. Clients therefore execute their code in the same order as the
sequential executor, just interleaved at the `train` calls.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence


class _Aborted(BaseException):
    """Raised inside a paused client when another client failed and the batch is abandoned."""


class _Client(threading.Thread):
    def __init__(self, work: Callable[["_Client"], Any], baton: threading.Semaphore) -> None:
        super().__init__(daemon=True)
        self.work, self.baton = work, baton
        self.go = threading.Semaphore(0)
        self.request: Any = None
        self.reply: Any = None
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.aborted = False

    def run(self) -> None:
        self.go.acquire()
        try:
            if not self.aborted:
                self.outcome = self.work(self)
        except _Aborted:
            pass
        except BaseException as err:  # noqa: BLE001 - re-raised in the coordinating thread
            self.error = err
        self.done = True
        self.baton.release()

    def ask(self, request: Any) -> Any:
        """Called from the client's own code: pause until the coordinator serves `request`."""
        self.request = request
        self.baton.release()
        self.go.acquire()
        if self.aborted:
            raise _Aborted()
        reply, self.reply = self.reply, None
        return reply

    def resume(self) -> None:
        self.go.release()
        self.baton.acquire()


def run_gathered(works: Sequence[Callable[[Any], Any]],
                 serve: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """Run every `work(ask)`; each `ask(request)` is answered by one batched `serve` call.

    `serve` receives the pending requests in client order and returns one reply per request.
    The first exception raised by any work (or by `serve`) is raised here.
    """
    baton = threading.Semaphore(0)
    clients = [_Client(lambda c, w=w: w(c.ask), baton) for w in works]
    for c in clients:
        c.start()
    try:
        runnable = list(clients)
        while runnable:
            for c in runnable:
                c.resume()
                if c.error is not None:
                    raise c.error
            waiting = [c for c in clients if not c.done]
            if not waiting:
                break
            replies = serve([c.request for c in waiting])
            for c, reply in zip(waiting, replies):
                c.request, c.reply = None, reply
            runnable = waiting
    finally:
        _abort(clients)
    return [c.outcome for c in clients]


def _abort(clients: list[_Client]) -> None:
    """Release every client that is still paused or never started, and wait for it to exit."""
    for c in clients:
        if not c.done:
            c.aborted = True
            c.resume()
    for c in clients:
        c.join()
