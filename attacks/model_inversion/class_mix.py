"""What model inversion tells about one client: its class mix, beyond what the population gives away.

A class representative rebuilt from a model says something about a client only where that model
is the client's own: on an IID federation every client's model rebuilds the same digits, which
any model of the population would give (so attack accuracy, the papers' score, is declared
`client=False`). What inversion can reveal about *this* client is which classes it holds more of
than the population does (on a federation whose clients hold classes of their own, which
classes those are). The measure, `class_mix_excess`:

- the adversary ranks the classes by how firmly the victim's model holds its own reconstruction
  of each: the log-odds of the class at the best input (`log_odds`, what the inversion drives
  up; unlike the probability it does not saturate at 1);
- the half of the classes ranked highest hold some share of the victim's training images; the
  population puts its own share in the same classes (its class mix as the evaluation pool shows
  it: test-split data no client holds, public);
- the excess is the victim's share less the population's, in [-1, 1].

An adversary that knows only the population, whatever ranking it picks, scores 0 on average
over victims drawn from it (each victim's expected class mix is the population's), so 0 is the
chance level and an interval above it is learnt about the client. On an IID client the excess
cannot exceed the distance of the client's mix from the population's (a point or two on a client
of thousands of images); on a client holding 2 of 10 classes it reaches 50 points (both its
classes ranked in the top half: 100% of its images, against the population's 50%).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ClassMix:
    """One victim's class-mix inference: the classes ranked highest and the shares they hold."""

    top: list[int]            # the half of the classes the inversion ranks highest
    victim_share: float       # of the victim's training images in them
    population_share: float   # of the population's
    excess: float             # victim_share - population_share

    def to_json(self) -> dict[str, object]:
        return {"top": self.top, "victim_share": self.victim_share, "population_share": self.population_share}


def log_odds(logits: torch.Tensor) -> torch.Tensor:
    """log p_c / (1 - p_c) of each row c's own class c, from (classes, classes) logits, computed
    as logit_c - logsumexp of the others, so a probability of 1 in float32 still ranks."""
    own = logits.diagonal()
    others = logits.masked_fill(torch.eye(len(logits), dtype=torch.bool), float("-inf")).logsumexp(1)
    return own - others


def class_mix(scores: list[float], victim_counts: list[int], population_counts: list[int]) -> ClassMix:
    """The measure (see the module docstring) from the adversary's per-class scores."""
    classes = len(scores)
    ranked = sorted(range(classes), key=lambda c: (-scores[c], c))
    top = sorted(ranked[:max(1, classes // 2)])
    victim, population = _shares(victim_counts, top), _shares(population_counts, top)
    return ClassMix(top, victim, population, victim - population)


def _shares(counts: list[int], classes: list[int]) -> float:
    total = sum(counts)
    return float(sum(counts[c] for c in classes if c < len(counts)) / total) if total else float("nan")
