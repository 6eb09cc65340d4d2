"""`fedattack train`: train a federation with a method and save its run directory."""

from __future__ import annotations

from typing import Any

import click

from fedattack.commands.options import Choice, RegistryName, data_root_option, parse_pairs, plugin_option, registry_help
from fedattack.defaults import DEFAULT_DATASET, described
from fedattack.registry import UserError


class NameOrImportPath(RegistryName):
    """A registered name, or `package.module:factory`: the command imports it because the user named it."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value) if ":" in str(value) else super().convert(value, param, ctx)


@click.command("train")
@click.option("--method", type=RegistryName("TARGETS", "methods"), default="fedavg", show_default=True,
              help=registry_help("methods", "Or a --plugin file's."))
@click.option("--dataset", type=NameOrImportPath("DATASETS", "datasets"), default=DEFAULT_DATASET,
              show_default=True, help=registry_help("datasets", "Or the import path of your factory returning "
                                                    "(x_train, y_train, x_test, y_test) or (train, test) PyTorch "
                                                    "datasets, e.g. mypkg.data:load."))
@data_root_option
@click.option("--download", is_flag=True, help="Download the dataset if it is missing.")
@click.option("--partition", type=RegistryName("PARTITIONS", "partitions"), default="shards", show_default=True,
              help=registry_help("partitions"))
@click.option("--partition-opt", "partition_opts", multiple=True, metavar="KEY=VALUE",
              help="Partition option, e.g. classes_per_client=2 (repeatable).")
@click.option("--clients", type=click.IntRange(min=1), default=None,
              help=f"Number of clients. Default: the partition's, per dataset ({described('clients')}).")
@click.option("--model", type=NameOrImportPath("MODELS", "models"), default=None,
              help=registry_help("models", "Or the import path of your nn.Module factory (called with no "
                                 "arguments or with input_shape, num_classes), e.g. mypkg.models:Net. "
                                 f"Default: per dataset ({described('model')})."))
@click.option("--rounds", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--fraction", type=click.FloatRange(0, 1, min_open=True), default=None,
              help=f"Fraction C of clients sampled per round. Default: per dataset ({described('fraction')}).")
@click.option("--epochs", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=None,
              help=f"SGD learning rate. Default: per dataset ({described('lr')}).")
@click.option("--normalize", type=Choice(["dataset", "none"]), default="dataset", show_default=True,
              help="Inputs by the training split's per-channel mean/std inside the model, or none (raw pixels).")
@click.option("--set", "hyper", multiple=True, metavar="KEY=VALUE", help="Method hyperparameter, e.g. mu=1.0.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--record", default="auto", show_default=True,
              help="Which rounds of the wire to keep: auto, all, none, final-per-client, last:K, every:K.")
@click.option("--eval-every", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--executor", default="batched", show_default=True,
              help="how clients train: batched (all sampled clients at once, the default), sequential (one "
                   "at a time, the reference), batched-native (batched, WAFFLe's step compiled; needs gcc)")
@click.option("--device", default="cpu", show_default=True)
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Run directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option("--defence", "defences", multiple=True, metavar="NAME[:KEY=VALUE,...]",
              help="Wrap the method in a defence, e.g. clip-uplink:max_norm=0.5 (repeatable, innermost first).")
@click.option("--active", "active", multiple=True, metavar="NAME[:KEY=VALUE,...]",
              help="A server that acts: what it sends instead of the method's broadcast, e.g. "
                   "imprint:rounds=1-3 (see `fedattack list active-threat-models`). Once: a run has one server.")
@plugin_option("a method, defence, model, dataset, partition or active threat model")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def train_command(method: str, dataset: str, data_root: str | None, download: bool, partition: str,
                  partition_opts: tuple[str, ...], clients: int | None, model: str | None, rounds: int,
                  fraction: float | None, epochs: int, batch_size: int, lr: float | None, hyper: tuple[str, ...],
                  seed: int, record: str, eval_every: int, executor: str, device: str,
                  out: str | None, overwrite: bool, defences: tuple[str, ...], quiet: bool,
                  normalize: str = "dataset", active: tuple[str, ...] = (), plugins: tuple[str, ...] = ()) -> None:
    """Train a federation and save its wire, private states and utility to a run directory."""
    settings, partition_options = parse_pairs(hyper, "--set"), parse_pairs(partition_opts, "--partition-opt")
    if len(active) > 1:
        raise UserError(f"--active given {len(active)} times ({', '.join(active)}): a federation has one server, "
                        "so name one active threat model (its settings after a colon)")
    if device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"unknown device {device!r}; use cpu or cuda[:N]")
    # only now torch: the mistakes above are reported at once
    from fedattack.defences import parse_defence
    from fedattack.federation.active import parse_active
    from fedattack.federation.rundir import Federation
    from fedattack.federation.spec import FederationSpec
    from fedattack.federation.train import train_federation
    from fedattack.interop.plugins import register_dataset, register_model
    from fedattack.registry import TARGETS

    dataset, model = register_dataset(dataset), None if model is None else register_model(model)
    spec = FederationSpec.for_dataset(
        dataset, method=method, hyper=settings, partition=partition, partition_options=partition_options,
        num_clients=clients, model=model, rounds=rounds, fraction=fraction, epochs=epochs, batch_size=batch_size,
        lr=lr, seed=seed, record=record, eval_every=eval_every, executor=executor,
        defences=tuple(parse_defence(d) for d in defences), normalize=normalize,
        active=parse_active(active[0]) if active else None)
    TARGETS.get(method).make_hyper(spec.hyper)  # refuse bad settings before loading any data
    out = out or f"runs/{method}-{dataset}-{partition}-s{seed}"
    path = train_federation(spec, out, data_root, download, overwrite, device, progress=not quiet)
    fed = Federation(path, deep_verify=False)
    from fedattack.metrics import describe_utility

    utility = describe_utility(fed.manifest["utility"], fed.num_clients)
    click.echo(f"{path}: {utility} "
               f"({fed.manifest['seconds']:.1f}s, wire {fed.manifest['recording']['bytes_on_wire'] / 2**20:.1f} MiB, "
               f"recorded: {fed.manifest['recording']['policy']})")
    chance = at_chance(fed, data_root)
    if chance:
        click.secho(chance, fg="yellow", bold=True, err=True)
    if fed.manifest.get("diverged"):
        click.secho(f"warning: the federation diverged: {', '.join(fed.manifest['diverged'][:3])} hold NaN "
                    "or infinite values (lower --lr); attacks on it are refused", fg="yellow", bold=True, err=True)
    acted = fed.manifest.get("active_adversary")
    if acted is not None:
        when = ", ".join(f"round {a['round']} (client {a['victim']})" for a in acted["acted"])
        click.secho(f"active server {acted['name']} acted in {when}" if when else
                    f"warning: active server {acted['name']} acted in no round: no client it would single out was "
                    "sampled in its rounds", fg="yellow", err=True)
    for entry in fed.manifest.get("defences", []):
        if "refused" in entry.get("accounting", {}):  # a client-side check: what it refused, and why
            a = entry["accounting"]
            why = "; ".join(f"{n}: {reason}" for reason, n in a["reasons"].items())
            click.echo(f"{entry['name']}: refused {a['refused']} of {a['checked']} downlinks"
                       + (f" ({why})" if why else ""))
        if "epsilon" in entry.get("accounting", {}):
            a = entry["accounting"]
            eps = "unbounded" if a["epsilon"] is None else f"{a['epsilon']:.3g}"
            click.echo(f"{entry['name']}: epsilon {eps} at delta {a['delta']:g} ({a['accountant']})")


CHANCE_MARGIN = 5.0  # percentage points above chance a trained federation must reach, and 2 standard errors


def at_chance(fed: Any, data_root: str | None) -> str:
    """One warning line if the federation ended no better than always guessing one class, the one
    most common over the clients' test images (or the test split's, where no client holds test
    images), else ''. Not each client's own most common class: a shared model that learnt nothing
    cannot know which class that is, and on a non-IID split it would call a learning model at chance. The
    margin is `CHANCE_MARGIN` points or two binomial standard errors over the test images, the larger."""
    import numpy as np

    from fedattack.data import load_dataset

    utility = fed.manifest["utility"]
    if "mean" not in utility and "test_split" not in utility:
        return ""
    data = load_dataset(fed.spec.dataset, data_root)
    if "mean" in utility:
        tests = [np.asarray(data.y_train)[c.test] for c in fed.partition().clients if len(c.test)]
        reached = float(utility["mean"])
    else:
        tests, reached = [np.asarray(data.y_test)], float(utility["test_split"])
    if not tests:
        return ""
    classes = 1 + max(int(y.max()) for y in tests)
    chance = 100.0 * float(np.mean([np.bincount(y, minlength=classes) / len(y) for y in tests], axis=0).max())
    images = sum(len(y) for y in tests)
    error = 100.0 * (chance / 100 * (1 - chance / 100) / images) ** 0.5
    if reached - chance >= max(CHANCE_MARGIN, 2 * error):
        return ""
    return (f"warning: training ended at chance: {reached:.2f}% against {chance:.2f}% for always guessing the most "
            f"common class of the clients' test images; the model did not learn (check --model "
            f"{fed.spec.model} for {fed.spec.dataset}, --lr, --epochs, --rounds)")


COMMAND = train_command
