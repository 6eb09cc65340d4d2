"""`fedattack audit-flower APP`: a Flower app's differential-privacy claim against one canaried run.

APP is the import path of a function returning a `fedattack.interop.flower_dp.FlowerApp` (the
app's strategy with Flower's DP wrappers, its ClientApp and the mods it runs). The audit runs the
app once with canary nodes (fedattack/audit/flower.py), prints Flower's claim, the audited
epsilon of each view and a verdict line, and writes its JSON to --out and nothing else; an
existing --out is replaced only with --overwrite, and only when it is an earlier Flower audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fedattack.commands.options import data_root_option


@click.command("audit-flower")
@click.argument("app")
@click.option("--canaries", type=click.IntRange(min=2), default=64, show_default=True,
              help="m: canary nodes, each included with probability 1/2.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="Confidence of the lower bound.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the canaries and of Flower's noise.")
@data_root_option
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="JSON file to write. Default: <function>.audit-flower.json in the current folder.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it holds an earlier Flower audit.")
def audit_flower_command(app: str, canaries: int, confidence: float, seed: int, data_root: str | None,
                         out: str | None, overwrite: bool) -> None:
    """Audit the Flower app that APP (package.module:function, returning a FlowerApp) declares:
    run it once with canary nodes and print Flower's claimed epsilon, the audited one and a verdict."""
    import os

    from fedattack.atomic import write_json
    from fedattack.interop.plugins import import_object
    from fedattack.registry import UserError

    try:
        from fedattack.audit.flower import audit_flower_app
    except ImportError as exc:
        raise UserError(f"auditing a Flower app needs Flower 1.42 or later, with its privacy accountant ({exc}); "
                        "pip install 'fedattack[flower,dp]' 'flwr>=1.42'") from None
    path = Path(out) if out else Path.cwd() / f"{app.rpartition(':')[2]}.audit-flower.json"
    claim_file(path, overwrite)
    if data_root:
        os.environ["FEDATTACK_DATA"] = data_root  # the app's ClientApp loads its data itself
    factory = import_object(app, "the Flower app")
    try:
        declared = factory()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's factory: one line, whatever it raised
        raise UserError(f"the Flower app {app} raised {type(exc).__name__}: {exc}; fix the factory") from None
    result = audit_flower_app(declared, canaries, confidence, seed)
    claim_file(path, overwrite)  # and again: a file may have appeared meanwhile
    write_json(path, result)
    echo(result)
    click.echo(f"wrote {path} ({result['seconds']:.1f}s)")


def echo(result: dict[str, Any]) -> None:
    claim = result["claimed"]
    if claim["wrapper"] is None or claim["epsilon"] is None:
        click.echo(f"claimed: {claim['note']}")
    else:
        click.echo(f"claimed: epsilon {claim['epsilon']:.3g} at delta {claim['delta']:g} ({claim['wrapper']}, "
                   f"noise multiplier {claim['noise_multiplier']:.3g}, clipping norm {claim['clipping_norm']:g}, "
                   f"{claim['num_sampled_clients']} of {claim['population']} nodes a round, {claim['rounds']} rounds; "
                   f"{claim['accountant']})")
    for view, v in result["views"].items():
        click.echo(f"{view}: audited epsilon >= {v['epsilon']:.3g} at {v['confidence']:.0%} confidence "
                   f"({v['correct']}/{v['guesses']} guesses right, m={v['canaries']}, AUC {v['auc']:.2f})")
    click.echo(f"verdict: {result['verdict']}")


def claim_file(path: Path, overwrite: bool) -> None:
    """The audit's rule for an existing --out (`audit_cmd.claim_file`), for a Flower audit's file."""
    from fedattack.audit.flower import SCHEMA
    from fedattack.commands.audit_cmd import claim_file as claim

    claim(path, overwrite, SCHEMA, "Flower audit")


COMMAND = audit_flower_command
