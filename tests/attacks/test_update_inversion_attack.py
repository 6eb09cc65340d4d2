"""The registered update-inversion attacks (#15): `gradient-inversion` and `update-inversion`.

The hand-built adversaries below hold exactly what a threat model would hand over (the victim's
downlink and uplink, the decoded model, its knowledge); the scorer gets the real images only
afterwards. Whole evaluations run on the attack tests' tiny digits federations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from fedattack.attacks.base import Adversary, NotApplicable
from fedattack.attacks.data_reconstruction.image_metrics import psnr_matrix
from fedattack.attacks.data_reconstruction.inversion_family import UpdateInversionFamily
from fedattack.attacks.data_reconstruction.levels import pixel_levels
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS, Reconstructed, Reconstructor
from fedattack.attacks.view import Channel, Knowledge, Observation, View, Wire
from fedattack.data import load_dataset
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, UserError
from fedattack.results import AttackResult
from fedattack.target import Recipe, State, Target, initial_weights
from fedattack.wire import SERVER, Message
from tests.conftest import build

NAMES = sorted(n for n, cls in ATTACKS.items() if issubclass(cls, UpdateInversionFamily))
EMPTY = Samples(torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long))


@pytest.fixture(scope="module")
def digits() -> Samples:
    data = load_dataset("digits")
    return Samples(data.x_train[:8], data.y_train[:8])


def sgd_step(target: Target, down: State, x: torch.Tensor, y: torch.Tensor) -> State:
    """One plain SGD step on the batch-mean loss: the client's uplink for one step."""
    live = {k: v.clone().requires_grad_(True) for k, v in down.items()}
    grads = torch.autograd.grad(F.cross_entropy(target.forward(live, x), y), list(live.values()))
    return {k: (v - target.recipe.lr * g).detach() for (k, v), g in zip(live.items(), grads)}


def adversary(target: Target, down: State, up: State, n: int, *, labels: list[int] | None = None,
              size_known: bool = True, recipe_known: bool = True, aux: Samples = EMPTY) -> Adversary:
    """What an eavesdropper on victim 0's round-1 channel holds (the uplink reports n)."""
    knowledge = Knowledge(aux=aux, queries=EMPTY, victim_size=n if size_known else None,
                          victim_class_counts=labels or [], labels_known=labels is not None,
                          recipe_known=recipe_known)
    reader = SimpleNamespace(index=[], load=lambda **_: [Message(1, 0, SERVER, "uplink", up, samples=n)])
    view = View("eavesdropper", 0, target, Wire(reader, (Channel(0, "uplink"), Channel(0, "downlink"))))
    strategy = RECONSTRUCTIONS.get("decoded")()
    model = Reconstructed("decoded", dict(up))
    return Adversary(view, knowledge, Observation(1, down, up), model,
                     Reconstructor(strategy, target, knowledge, 0, 0))


def attack(name: str, **settings: Any) -> Any:
    return ATTACKS.get(name).from_options(settings)


def one_step_case(digits: Samples, n: int) -> tuple[Target, State, State]:
    target = build("fedavg", recipe=Recipe(epochs=1, batch_size=n, lr=0.1))
    down = initial_weights(target.model, torch.Generator().manual_seed(0))
    return target, down, sgd_step(target, down, digits.x[:n], digits.y[:n])


@pytest.mark.parametrize("name", NAMES)
def test_one_image_one_step_is_recovered_with_its_label(name: str, digits: Samples) -> None:
    target, down, up = one_step_case(digits, 1)
    chosen = attack(name, iterations=300)
    guesses = chosen.run(adversary(target, down, up, 1), torch.Generator().manual_seed(0))
    truth: Any = SimpleNamespace(members=Samples(digits.x[:1], digits.y[:1]), deployed={})
    scored = chosen.score(guesses, truth)  # the scorer's side, after the guess
    assert guesses.info["labels"]["source"].startswith("iDLG")
    assert scored.metrics["label_accuracy"] == 1.0 and scored.metrics["matched_label_accuracy"] == 1.0
    assert scored.metrics["psnr_mean"] > 30 and scored.metrics["share_recovered"] == 1.0
    assert torch.equal(scored.images["matched"], digits.x[:1])


def test_the_first_layer_start_reads_the_image_and_says_how(digits: Samples) -> None:
    """start=first-layer: the image straight off the first layer's update, certified by its integer
    levels; a second run of the same attack object (another reconstruction strategy of the same
    victim) reuses the linear programs and returns the same images bit for bit. The pixel grid
    (digits: 16 levels) is read off the auxiliary images: the 8-bit default certifies nothing."""
    target, down, once = one_step_case(digits, 1)
    up = sgd_step(target, once, digits.x[:1], digits.y[:1])  # two local steps: unmix, not SPEAR
    target = build("fedavg", recipe=Recipe(epochs=2, batch_size=1, lr=0.1))
    chosen = attack("update-inversion", start="first-layer", labels="recovered")
    public = load_dataset("digits")
    aux = Samples(public.x_test[:100], public.y_test[:100])
    runs = [chosen.run(adversary(target, down, up, 1, aux=aux), torch.Generator().manual_seed(0)) for _ in range(2)]
    assert torch.allclose(runs[0].images, digits.x[:1], atol=1e-4) and torch.equal(runs[0].images, runs[1].images)
    assert runs[0].info["inverted_by"].startswith("the first layer's update (unmix:")
    assert "certified (integer levels at the bias's scale) after each round: 1" in runs[0].info["inverted_by"]


def test_a_one_step_batch_is_read_exactly_by_spear(digits: Samples) -> None:
    """SPEAR (one step, a small batch, a ReLU after the first layer): exact, and said so."""
    target, down, up = one_step_case(digits, 4)
    guesses = attack("update-inversion", start="first-layer", labels="recovered").run(
        adversary(target, down, up, 4), torch.Generator().manual_seed(0))
    assert guesses.info["inverted_by"].startswith("SPEAR: 4 inputs")
    assert float(psnr_matrix(guesses.images, digits.x[:4]).max(1).min()) > 60


def test_the_pixel_grid_is_read_off_public_images(digits: Samples) -> None:
    eight_bit = torch.randint(0, 256, (20, 1, 8, 8), generator=torch.Generator().manual_seed(0)) / 255
    assert pixel_levels(digits.x.numpy()) == 16 and pixel_levels(eight_bit.numpy()) == 255
    assert pixel_levels(torch.zeros(3, 1, 2, 2).numpy()) == 255  # no gap to read: the 8-bit default


def chance_db(real: torch.Tensor, gen: torch.Generator) -> float:
    """What guessing scores: the better of uniform noise and mid grey, matched to the real images."""
    noise = torch.rand(real.shape, generator=gen)
    grey = torch.full_like(real, 0.5)
    return max(float(psnr_matrix(guess, real).max(1).mean()) for guess in (noise, grey))


@pytest.mark.parametrize("name", NAMES)
def test_a_random_update_recovers_nothing_better_than_chance(name: str, digits: Samples) -> None:
    target, down, real_up = one_step_case(digits, 4)
    gen = torch.Generator().manual_seed(1)
    up = {k: v + (real_up[k] - v).std() * torch.randn(v.shape, generator=gen) for k, v in down.items()}
    chosen = attack(name, iterations=100)
    guesses = chosen.run(adversary(target, down, up, 4), torch.Generator().manual_seed(0))
    truth: Any = SimpleNamespace(members=Samples(digits.x[:4], digits.y[:4]), deployed={})
    scored = chosen.score(guesses, truth)
    chance = chance_db(digits.x[:4], gen)
    print(f"{name}: random update {scored.metrics['psnr_mean']:.1f} dB, chance {chance:.1f} dB")
    assert scored.metrics["psnr_mean"] < chance + 2 and scored.metrics["share_recovered"] == 0.0


def test_what_is_not_known_is_assumed_and_said(digits: Samples) -> None:
    target, down, up = one_step_case(digits, 2)
    adv = adversary(target, down, up, 2, size_known=False, recipe_known=False)
    guesses = attack("update-inversion", iterations=2).run(adv, torch.Generator().manual_seed(0))
    info = guesses.info
    assert info["recipe"]["source"].startswith("assumed") and info["recipe"]["epochs"] == Recipe().epochs
    assert info["samples"] == {"n": 2, "source": "the sample count the uplink reports"}
    assert info["labels"]["source"].startswith("counted") and len(info["labels"]["guessed"]) == 2
    assert guesses.images.shape == (2, 1, 8, 8)


def test_known_labels_come_from_the_class_counts_and_runs_repeat(digits: Samples) -> None:
    target, down, up = one_step_case(digits, 3)
    counts = torch.bincount(digits.y[:3], minlength=10).tolist()
    runs = [attack("update-inversion", iterations=5).run(adversary(target, down, up, 3, labels=counts),
                                                         torch.Generator().manual_seed(0)) for _ in range(2)]
    assert runs[0].info["labels"] == {"source": "known", "guessed": sorted(digits.y[:3].tolist())}
    assert torch.equal(runs[0].images, runs[1].images)  # same seed, same images, bit for bit


def test_labels_recovered_ignores_the_known_class_counts(digits: Samples) -> None:
    target, down, up = one_step_case(digits, 3)
    counts = torch.bincount(digits.y[:3], minlength=10).tolist()
    adv = adversary(target, down, up, 3, labels=counts)
    guesses = attack("update-inversion", iterations=2, labels="recovered").run(adv, torch.Generator().manual_seed(0))
    assert guesses.info["labels"]["source"].startswith("counted from the output bias")
    assert len(guesses.info["labels"]["guessed"]) == 3


def test_settings_are_checked_in_one_line() -> None:
    with pytest.raises(UserError, match="prior"):
        attack("update-inversion", prior="median")
    with pytest.raises(UserError, match="selection"):
        attack("gradient-inversion", selection="guess")
    with pytest.raises(UserError, match="labels"):
        attack("gradient-inversion", labels="unknown")
    with pytest.raises(UserError, match="rank"):
        attack("gradient-inversion", rank="brightest")
    with pytest.raises(UserError, match="peel"):
        attack("update-inversion", peel=-1)
    with pytest.raises(UserError, match="slack"):
        attack("update-inversion", slack=float("nan"))


def evaluate(run: Path, out: Path, **settings: Any) -> list[AttackResult]:
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=tuple(NAMES), victims=("random:1",),
                          reconstruction="auto", aux_size=100, eval_size=60, max_queries=20,
                          settings={"iterations": 2, **settings})
    return [AttackResult.load(p) for p in evaluate_run(run, spec, out, progress=False)]


def test_the_local_method_is_not_applicable(conformance_run: Callable[[str], Path], tmp_path: Path) -> None:
    results = evaluate(conformance_run("local"), tmp_path)
    assert results and all(not r.applicable and "nothing" in r.note for r in results)


def test_a_hidden_selection_is_optimised_with_the_images(conformance_run: Callable[[str], Path],
                                                         tmp_path: Path) -> None:
    results = evaluate(conformance_run("waffle-ibp"), tmp_path, selection="adaptive")
    assert {r.attack for r in results} == set(NAMES)
    for r in results:
        match = r.extra["reconstruction_match"]
        assert r.applicable and match["selection"] == "optimised with the images"
        start = r.extra["reconstruction"]["details"]["factors_on"]
        assert set(match["selection_found"]) == {f"{layer}.b" for layer in start}
        assert set(r.extra["selection_score"]) == set(match["selection_found"])
        assert (tmp_path / r.artifacts["reconstructions"]).is_file()
        assert (tmp_path / r.artifacts["matched"]).is_file()


@pytest.mark.parametrize("name", NAMES)
def test_what_cannot_be_inverted_is_refused_in_one_line(name: str, digits: Samples) -> None:
    target, down, up = one_step_case(digits, 1)
    unseen = adversary(target, down, up, 1)
    unseen.obs = Observation(1, None, up)
    undecodable = adversary(target, down, {}, 1)  # an uplink that decodes to nothing (e.g. masked)
    for adv, why in ((unseen, "no downlink observed"), (undecodable, "does not decode")):
        with pytest.raises(NotApplicable, match=why) as refused:
            attack(name, iterations=2).run(adv, torch.Generator())
        assert "\n" not in str(refused.value)
