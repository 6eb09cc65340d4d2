"""Client-level privacy accounting for DP-FedAvg, through Google's `dp-accounting` (optional).

One round releases the sum of m clipped client updates plus Gaussian noise of std sigma * C.
The federation samples a fixed number m of its N clients without replacement, so the exact
account is the subsampled Gaussian under the *replace-one* relation (N is public; Wang, Balle
and Kasiviswanathan 2019): replacing one client's update moves the sum by up to 2C, so the
noise multiplier relative to that sensitivity is sigma / 2. The literature's usual figure
(McMahan et al. 2018, TensorFlow Federated, Opacus) treats sampling as Poisson with q = m / N
under add/remove-one, where the sensitivity is C; it is recorded too, as `epsilon_poisson`,
so numbers compare with papers, but it is not a bound for fixed-size sampling.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fedattack.registry import UserError

INSTALL = "the privacy accountant needs dp-accounting: pip install 'fedattack[dp]'"
# RDP orders: the library's default set gives the same epsilons here at half the cost
ORDERS = [1.5, 1.75, *[float(a) for a in range(2, 33)], 40.0, 48.0, 64.0, 96.0, 128.0, 256.0]


def _dp() -> Any:
    try:
        import dp_accounting  # type: ignore[import-untyped]  # optional extra, no type information
    except ImportError:
        raise UserError(INSTALL) from None
    logging.getLogger("absl").setLevel(logging.ERROR)  # orders it cannot evaluate are skipped anyway
    return dp_accounting


def epsilon_fixed_size(sigma: float, sampled: int, population: int, rounds: int,
                       delta: float) -> float:
    """Epsilon after `rounds` rounds of m-of-N sampling without replacement (replace-one, RDP)."""
    dp = _dp()
    relation = dp.NeighboringRelation.REPLACE_ONE
    event = dp.SampledWithoutReplacementDpEvent(population, sampled, dp.GaussianDpEvent(sigma / 2))
    accountant = dp.rdp.RdpAccountant(ORDERS, relation)
    return float(accountant.compose(event, rounds).get_epsilon(delta))


def epsilon_poisson(sigma: float, q: float, rounds: int, delta: float, kind: str = "rdp") -> float:
    """Epsilon of the Poisson-subsampled Gaussian (add/remove-one), by RDP or PLD accounting."""
    dp = _dp()
    event = dp.PoissonSampledDpEvent(q, dp.GaussianDpEvent(sigma)) if q < 1 else dp.GaussianDpEvent(sigma)
    if kind == "pld":
        accountant: Any = dp.pld.PLDAccountant()
    else:
        accountant = dp.rdp.RdpAccountant(ORDERS)
    return float(accountant.compose(event, rounds).get_epsilon(delta))


def epsilon_every_message(sigma_each: float, rounds: int, delta: float) -> float:
    """Epsilon for an adversary that sees one client's own noised uplink in every round.

    No amplification by sampling (the adversary sees who sends) and replace-one sensitivity 2C:
    the worst case, a client sampled in all `rounds` rounds.
    """
    dp = _dp()
    accountant = dp.rdp.RdpAccountant(ORDERS, dp.NeighboringRelation.REPLACE_ONE)
    return float(accountant.compose(dp.GaussianDpEvent(sigma_each / 2), rounds).get_epsilon(delta))


def finite(value: float) -> float | None:
    """JSON has no infinity: an unbounded epsilon is recorded as null."""
    return value if math.isfinite(value) else None


def epsilon_dp_sgd(sigma: float, batch: int, size: int, epochs: int, delta: float,
                   amplified: bool) -> float:
    """Sample-level epsilon of a client's local DP-SGD over `epochs` passes over `size` samples.

    Each pass visits every sample once, in one batch of `batch` (shuffled epochs). Without
    amplification (`amplified` False) that is, per pass, one Gaussian mechanism on the sample's
    batch (replace-one, sensitivity 2C: multiplier sigma / 2), the other batches not seeing it:
    a valid bound for shuffling. `amplified` treats every step as an independent fixed-size
    sample of `batch` out of `size` (the usual DP-SGD figure; shuffling is not that, Chua et al.
    2024), composed over all steps.
    """
    dp = _dp()
    accountant = dp.rdp.RdpAccountant(ORDERS, dp.NeighboringRelation.REPLACE_ONE)
    if not amplified or batch >= size:
        return float(accountant.compose(dp.GaussianDpEvent(sigma / 2), epochs).get_epsilon(delta))
    steps = epochs * math.ceil(size / batch)
    event = dp.SampledWithoutReplacementDpEvent(size, batch, dp.GaussianDpEvent(sigma / 2))
    return float(accountant.compose(event, steps).get_epsilon(delta))


def check_gaussian(defence: str, clip_norm: float, noise_multiplier: float, delta: float) -> None:
    """The settings every Gaussian mechanism shares (dp-fedavg, dp-sgd), refused alike."""
    if not clip_norm > 0 or noise_multiplier < 0:
        raise UserError(f"{defence} needs clip_norm > 0 and noise_multiplier >= 0")
    if not 0 < delta < 1:
        raise UserError(f"{defence} delta={delta} must be in (0, 1)")
