"""Which losses the hand-written steps compute: the default one, or it plus a proximal pull.

FedProx's local objective is the default cross-entropy plus (mu/2)|w - w^t|^2. Its gradient is
the default one plus mu (w - w^t), so the MLP and CNN steps (`_mlp_fast`, `_cnn_fast`) train it
by adding that term, where otherwise FedProx fell back to `vmap(grad(local_loss))` (measured
1.4x slower on the Fashion-MNIST CNN, in benchmarks/README.md, for the reference models).

A target declares the pull with `proximal_mu()`, keeping the anchor of parameter `n` in its
problem's consts as `anchor.<n>`. The declaration counts only when the class that declares it is
also the one whose `local_loss` is in force: a subclass that changes the loss without
re-declaring falls back to the vmap path instead of being trained on the wrong objective.
"""

from __future__ import annotations

from fedattack.target import LocalProblem, State, Target

ANCHOR = "anchor."
Pull = tuple[float, State]  # (mu, each parameter's anchor, stacked like the parameters)


def _owner(cls: type, name: str) -> type | None:
    return next((c for c in cls.__mro__ if name in c.__dict__), None)


def pull_strength(target: Target) -> float | None:
    """0 for the default loss, mu for the default loss plus (mu/2)|w - anchor|^2, None for any
    other loss (the hand-written steps do not compute it)."""
    cls = type(target)
    if cls.local_loss is Target.local_loss:
        return 0.0
    declare = getattr(target, "proximal_mu", None)
    if not callable(declare) or _owner(cls, "proximal_mu") is not _owner(cls, "local_loss"):
        return None
    return float(declare())


def anchors(problem: LocalProblem) -> State:
    """The anchor of each parameter, by the parameter's name."""
    return {k[len(ANCHOR):]: v for k, v in problem.consts.items() if k.startswith(ANCHOR)}


def has_anchors(problem: LocalProblem) -> bool:
    """Whether every parameter has its anchor (and the consts hold nothing else)."""
    return set(problem.consts) == {ANCHOR + k for k in problem.params}


def plain_or_pulled(target: Target, problem: LocalProblem) -> bool:
    """Whether a hand-written step computes this target's loss: the default one, or a declared
    pull whose anchors the problem carries."""
    mu = pull_strength(target)
    return mu == 0.0 or (mu is not None and has_anchors(problem))


def first(pull: Pull | None, a: int) -> Pull | None:
    """The pull of the first `a` stacked clients (those still training at a step)."""
    return None if pull is None else (pull[0], {k: v[:a] for k, v in pull[1].items()})
