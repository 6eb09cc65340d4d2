"""Rounds under-counted: the accountant is created afresh in every round, so the epsilon it
reports is one round's, not the composition of all of them."""

from __future__ import annotations

import dataclasses
from typing import Any

from fedattack.audit.zoo import Bug


class AccountantReset(Bug):
    """the accountant is re-created every round and reports one round's epsilon, not all rounds'"""

    name = "bug-accountant-reset"
    rounds = 12  # the gap grows as sqrt(rounds): 12 rounds at sigma 3 put the truth 3.5x the claim's mu
    exposing = {"noise_multiplier": 3.0}

    def accounting(self) -> dict[str, Any]:
        full = self.ctx
        self.ctx = dataclasses.replace(full, rounds=1)
        try:
            return {**super().accounting(), "rounds": full.rounds}
        finally:
            self.ctx = full
