"""The defence contract, and how a method is composed with its defences.

A `Defence` has two hooks, both identity by default:
  `on_uplink(up, down, ctx)`   client side: the uplink as it leaves the client (clipping,
                               client-side noise, compression); what it returns is recorded
  `on_receive(uplinks, rnd, gen)`  server side: the received messages before the method
                               aggregates them (server-side noise, secure aggregation's sum)
  `on_downlinks(rnd, downlinks)`  client side, before training: the round's downlinks, for
                               clients that compare theirs with each other (gossiped digests)
and declarations: `bind(target)` sees the method it wraps once, when the two are composed (to
refuse, in one line, a method it cannot compose with); `hides_uplinks` says that a recorded
uplink no longer decodes to a client's model (masked uplinks); `sums_unweighted` says that its
server side uses the plain, unweighted sum of the uplinks (so a secure aggregation around it
must not weight them); `wire(schema)` the dtypes it sends instead; `accounting()` is what the
manifest records beside the settings (a DP epsilon). A defence that changes local training
itself (`trains_locally`, DP-SGD) computes each local step's gradients in `local_gradients`;
the method it wraps is then trained client by client, through the sequential loop.
Randomness comes from generators keyed by (seed, defence, round, client), so a defended
federation is as reproducible as an undefended one.

The composition is declared, not made: `make_target` builds the defences first, into the
context the method is built from (`TargetContext.defences`, innermost first), then the method
of its own class from that context, and composes each defence with it once (`Defence.serve`).
The method's base class runs them where the contract says (`Target.seal`, `Target.receive` and
`server_step`, `recorded_schema`, `uplinks_hidden` and `read_uplink`, `trains_in_stacks`), and
the sequential loop takes a training defence's gradients (`fedattack.training.local_gradients`),
so the method is still itself (name, class, wire, decoding, batching) and executors and attacks
need no special case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, final

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
        self.ctx = ctx  # what the method is built from (its defences are added beside this one)
        self._wraps: Target | None = None

    @final
    def serve(self, target: Target) -> None:
        """Compose this defence with `target`, the method built around it (`make_target` calls
        it once, before anything runs), and let it refuse the method (`bind`)."""
        if self._wraps is not None:
            raise UserError(f"defence {self.name} already serves {self._wraps.name}; build one per method")
        self._wraps = target
        self.bind(target)

    @property
    def wraps(self) -> Target:
        """The method this defence serves."""
        if self._wraps is None:
            raise UserError(f"defence {self.name} serves no method yet; build it with make_target")
        return self._wraps

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

    def on_downlinks(self, rnd: int, downlinks: Mapping[int, Payload]) -> None:
        """Client side, before anyone trains: the round's downlinks by receiver, for a defence whose
        clients compare what they received with each other (`consistency-check`'s gossiped digests)."""

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


def sent_through(defences: Sequence[Defence], schema: WireSchema) -> WireSchema:
    """`schema` as `defences` send it (innermost first): the dtypes each puts on the wire
    instead. Also for tensors added beside a method's own (an active server's module)."""
    for defence in defences:
        schema = defence.wire(schema)
    return schema


def make_target(method: str, hyper: Mapping[str, Any], ctx: TargetContext,
                defences: Sequence[Mapping[str, Any]] = ()) -> Target:
    """Method `method` with hyperparameters `hyper`, composed with `defences` (innermost first):
    the defences are built into its context, then the method, and each defence serves it."""
    cls = TARGETS.get(method)
    built = tuple(build_defence(d, ctx) for d in defences)
    local = [d.name for d in built if d.trains_locally]
    if len(local) > 1:
        raise UserError(f"{' and '.join(local)} both train the clients; choose one")
    target = cls(cls.make_hyper(hyper), dataclasses.replace(ctx, defences=built))
    for defence in built:
        defence.serve(target)
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
