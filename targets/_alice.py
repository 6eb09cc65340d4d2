"""Server bookkeeping shared by the methods that personalise one model for agent `alice`
(`weight-erosion`, `waffle-wavg`): checking that Alice exists, and knowing whose uplink is whose.

Not a method itself (no `name`, so nothing registers here). A class lists `ForAlice` before its
`Target` base, so `broadcast` notes the receiver and then sends what the base would.
"""

from __future__ import annotations

from fedattack.registry import UserError
from fedattack.target import State
from fedattack.wire import Payload


class SenderLog:
    """Which agents the server sent to this round, in order: their uplinks come back in that order.

    The server of a personalising method must know whose update is Alice's; it knows whom it
    sent the model to, which is what this records (server-side bookkeeping, not on the wire).
    """

    def __init__(self) -> None:
        self._round: int = -1
        self._sent: list[int] = []

    def note(self, client: int, rnd: int) -> None:
        if rnd != self._round:
            self._round, self._sent = rnd, []
        self._sent.append(client)

    def senders(self, rnd: int, count: int) -> list[int]:
        if rnd != self._round or len(self._sent) != count:
            raise RuntimeError(f"round {rnd}: {count} uplinks but the server sent to {self._sent}")
        return list(self._sent)


class ForAlice:
    """Mixin: the sender log, Alice's validity check and her position among a round's uplinks."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.log = SenderLog()

    def check_alice(self) -> None:
        alice, n = self.hyper.alice, self.num_clients  # type: ignore[attr-defined]
        if not 0 <= alice < n:
            raise UserError(f"alice={alice} is not an agent; use 0..{n - 1}")

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        self.log.note(client, rnd)
        return super().broadcast(server, client, rnd)  # type: ignore[misc]

    def alice_among(self, rnd: int, count: int) -> tuple[list[int], int | None]:
        """This round's senders in uplink order, and Alice's index among them (None: absent)."""
        senders = self.log.senders(rnd, count)
        alice = self.hyper.alice  # type: ignore[attr-defined]
        return senders, (senders.index(alice) if alice in senders else None)
