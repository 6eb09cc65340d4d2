"""Poisson sampling accounted, a fixed cohort sampled: the accountant states the literature's
figure (Poisson sampling at q = m / N, add/remove-one neighbours, sensitivity C) for a federation
that samples exactly m of N clients, whose neighbours are replace-one (sensitivity 2C)."""

from __future__ import annotations

from typing import Any

from fedattack.audit.zoo import Bug


class PoissonAccounted(Bug):
    """states the Poisson, add/remove-one epsilon for fixed-size sampling (replace-one neighbours)"""

    name = "bug-poisson-accounted"
    one_run = False  # a factor of 2 in mu, below what one run of the test's size proves: the multi-run audit

    def accounting(self) -> dict[str, Any]:
        out = super().accounting()
        if out.get("epsilon_poisson") is not None:
            out["epsilon"] = out["epsilon_poisson"]
        return out
