"""The defence contract, and how a method is wrapped in its defences.

A `Defence` has two hooks, both identity by default:
  `on_uplink(up, down, ctx)`   client side: the uplink as it leaves the client (clipping,
                               client-side noise, compression); what it returns is recorded
  `on_receive(uplinks, rnd, gen)`  server side: the received messages before the method
                               aggregates them (server-side noise, secure aggregation's sum)
and three declarations: `bind(target)` sees the method it wraps once, after construction (to
refuse, in one line, a method it cannot compose with); `hides_uplinks` says that a recorded
uplink no longer decodes to a client's model (masked uplinks), so the wrapped method's `decode`
answers None; `sums_unweighted` says that its server side uses the plain, unweighted sum of
the uplinks (so a secure aggregation around it must not weight them); `accounting()` is what
the manifest records beside the settings (a DP epsilon). A defence that changes local training
itself (`trains_locally`, DP-SGD) computes each local step's gradients in `local_gradients`;
the method it wraps is then trained client by client (`batchable` False) through the
sequential loop's hook (`fedattack.training.local_gradients`).
Randomness comes from generators keyed by (seed, defence, round, client), so a defended
federation is as reproducible as an undefended one.

`make_target` returns an instance of a subclass of the method's own class, made on the fly,
whose `seal` and `aggregate` run the defences around the method's: it is still that method
(same name, wire, decoding and batching), so executors and attacks need no special case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedattack.options import build_dataclass, named_settings
from fedattack.registry import TARGETS, Registry, UserError
from fedattack.rng import generator
from fedattack.target import ClientContext, State, Target, TargetContext, WireSchema
from fedattack.wire import Message, Payload

DEFENCES: Registry[type[Defence]] = Registry("defence", "fedattack.defences")


@dataclass(frozen=True, kw_only=True)
class NoSettings:
    """A defence without settings."""


class Defence:
    """Base class: set `name` (and `Settings`); override `on_uplink` and/or `on_receive`."""

    name: ClassVar[str] = ""
    Settings: ClassVar[type] = NoSettings
    hides_uplinks: ClassVar[bool] = False
    sums_unweighted: ClassVar[bool] = False  # its server side uses the plain sum (DP-FedAvg)
    trains_locally: ClassVar[bool] = False  # it computes the local steps' gradients (DP-SGD)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            DEFENCES.add(cls.name, cls)

    def __init__(self, settings: Any, ctx: TargetContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.wraps: Target  # the method it wraps, set by `make_target` before `bind`

    def bind(self, target: Target) -> None:
        """Called once with the wrapped method; raise UserError if this defence cannot wrap it."""

    def update_of(self, up: Payload, down: Payload) -> Payload:
        """The client's update in this uplink, as the wrapped method declares it
        (`Target.uplink_update`: for most methods the uplink relative to the downlink)."""
        return self.wraps.uplink_update(down, up)

    def with_update(self, up: Payload, down: Payload, update: Payload) -> Payload:
        """The uplink carrying `update` instead, in the wrapped method's encoding."""
        return self.wraps.with_uplink_update(down, up, update)

    def wire(self, schema: WireSchema) -> WireSchema:
        """The wire schema as this defence leaves it (the dtypes of what it sends instead)."""
        return schema

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        return up

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        return uplinks

    def local_gradients(self, target: Target, params: State, consts: State, batch: Any, noise: State,
                        step: torch.Tensor, ctx: ClientContext) -> list[torch.Tensor | None]:
        """One local step's gradients (only for a defence that `trains_locally`)."""
        raise NotImplementedError

    def client_generator(self, ctx: ClientContext) -> torch.Generator:
        """This defence's own random stream for one client's round."""
        return generator(ctx.seed, f"defence:{self.name}", ctx.round, ctx.client)

    def accounting(self) -> dict[str, Any] | None:
        """What the manifest records beside the settings (e.g. a privacy accountant's epsilon)."""
        return None

    def describe(self) -> dict[str, Any]:
        entry = {"name": self.name, "settings": dataclasses.asdict(self.settings)}
        accounting = self.accounting()
        return entry if accounting is None else {**entry, "accounting": accounting}


class _Defended:
    """Mixed in before a method's class: its defences run around `seal` and `aggregate`, and
    each says what it does to the wire schema."""

    defences: list[Defence]
    ctx: TargetContext

    def seal(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        up = super().seal(up, down, ctx)  # type: ignore[misc]  # the method's own seal
        for defence in self.defences:
            up = defence.on_uplink(up, down, ctx)
        return up

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        return super().aggregate(server, self.receive(uplinks, rnd), rnd)  # type: ignore[misc]  # the method's own

    def receive(self, uplinks: list[Message], rnd: int) -> list[Message]:
        """The round's uplinks as the method gets them: every defence's server side, outermost
        first (under secure aggregation, m messages that all carry the aggregate)."""
        for defence in reversed(self.defences):
            gen = generator(self.ctx.seed, f"defence:{defence.name}:server", rnd)
            uplinks = defence.on_receive(uplinks, rnd, gen)
        return uplinks

    @property
    def uplinks_hidden(self) -> str | None:
        """Why a recorded uplink decodes to nothing (a defence masks it), or None."""
        hiding = [d.name for d in self.defences if d.hides_uplinks]
        return f"{', '.join(hiding)} masks every uplink" if hiding else None

    def wire_schema(self) -> WireSchema:
        return sent_through(self.defences, super().wire_schema())  # type: ignore[misc]  # the method's own

    def decode(self, down: Payload | None, up: Payload) -> State | None:
        if self.uplinks_hidden:
            return None
        return super().decode(down, up)  # type: ignore[misc]  # the method's own


def sent_through(defences: Sequence[Defence], schema: WireSchema) -> WireSchema:
    """`schema` as `defences` send it (innermost first): the dtypes each puts on the wire
    instead. Also for tensors added beside a method's own (an active server's module)."""
    for defence in defences:
        schema = defence.wire(schema)
    return schema


class _DefendedTraining(_Defended):
    """A defence computes the local steps' gradients, so only the sequential loop may train it."""

    batchable = False

    def local_gradients(self, params: State, consts: State, batch: Any, noise: State,
                        step: torch.Tensor, ctx: ClientContext) -> list[torch.Tensor | None]:
        trainer = next(d for d in self.defences if d.trains_locally)
        return trainer.local_gradients(self, params, consts, batch, noise, step, ctx)  # type: ignore[arg-type]


def make_target(method: str, hyper: Mapping[str, Any], ctx: TargetContext,
                defences: Sequence[Mapping[str, Any]] = ()) -> Target:
    """Method `method` with hyperparameters `hyper`, wrapped in `defences` (innermost first)."""
    cls = TARGETS.get(method)
    built = [build_defence(d, ctx) for d in defences]
    if not built:
        return cls(cls.make_hyper(hyper), ctx)
    local = [d.name for d in built if d.trains_locally]
    if len(local) > 1:
        raise UserError(f"{' and '.join(local)} both train the clients; choose one")
    mixin = _DefendedTraining if local else _Defended
    wrapped = type(f"Defended{cls.__name__}", (mixin, cls), {"__module__": __name__})
    target = wrapped(cls.make_hyper(hyper), ctx)
    target.defences = built
    for defence in built:
        defence.wraps = target
        defence.bind(target)
    return target


def defence_entries(target: Target) -> list[dict[str, Any]]:
    """The manifest's record of a target's defences: name, typed settings, accounting."""
    return [d.describe() for d in target.defences]


def build_defence(entry: Mapping[str, Any], ctx: TargetContext) -> Defence:
    cls, settings = _settings(entry)
    return cls(settings, ctx)


def _settings(entry: Mapping[str, Any]) -> tuple[type[Defence], Any]:
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise UserError(f"a defence entry must name its defence, got {entry!r}")
    cls = DEFENCES.get(str(entry["name"]))
    return cls, build_dataclass(cls.Settings, dict(entry.get("settings", {})), f"defence {cls.name}")


def normalise_defence(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A defence entry with every setting typed and its default made explicit (for manifests)."""
    cls, settings = _settings(entry)
    return {"name": cls.name, "settings": dataclasses.asdict(settings)}


def parse_defence(text: str) -> dict[str, Any]:
    """`clip:max_norm=1.0,norm=l2` -> {"name": "clip", "settings": {"max_norm": "1.0", ...}}."""
    name, settings = named_settings(text, "--defence", "clip:max_norm=1.0")
    return normalise_defence({"name": name, "settings": settings})
