"""The threat-model contract: which messages the adversary observes, and what else it is given.

A threat model is one class that registers itself by defining `name` (in this package, in a
user's file passed with `--plugin`, or through the `fedattack.threat_models` entry point). It
names the channels it observes; the base class builds the `View` from the run directory, so a
threat model cannot hand the adversary anything the wire did not carry, except through
`deployed`, which only an upper-bound threat model overrides.
"""

from __future__ import annotations

from typing import Any, ClassVar

from fedattack.attacks.view import Channel, View
from fedattack.registry import THREAT_MODELS
from fedattack.target import State


class ThreatModel:
    """Base class: override `channels` (and, for an upper bound, `deployed_model`)."""

    name: ClassVar[str] = ""
    observes: ClassVar[str] = ""  # one sentence for results and `fedattack list`
    upper_bound: ClassVar[bool] = False
    attacks_deployed: ClassVar[bool] = False  # attack the deployed model, not one rebuilt from the wire

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            THREAT_MODELS.add(cls.name, cls)

    def channels(self, victim: int) -> list[Channel]:
        raise NotImplementedError

    def deployed_model(self, fed: Any, victim: int) -> State | None:
        """The victim's deployed model; None for every threat model that is not an upper bound."""
        return None

    def view(self, fed: Any, victim: int) -> View:
        """The adversary's view of federation `fed` (a `Federation`) when attacking `victim`."""
        fed.check_client(victim)
        return View(threat_model=self.name, victim=victim, target=fed.target(),
                    channels=tuple(self.channels(victim)), reader=fed.transcript(),
                    deployed=self.deployed_model(fed, victim), upper_bound=self.upper_bound)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "observes": self.observes, "upper_bound": self.upper_bound,
                "attacks": "deployed model" if self.attacks_deployed else "model rebuilt from the wire"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
