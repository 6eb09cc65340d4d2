"""The reconstruction setting of docs/defences.md: its table and its three panels of the figure.

Read by `defences_figure.py` (run that one) from FOLDER/recon, the output of
`fedattack experiment run fedattack/experiments/defences-reconstruction.toml --out FOLDER/recon`.
The setting differs from the membership one (50 i.i.d. images a client, 600 clients), so its
utility, its accountant and its attack sit in a table and panels of their own; the page's main
table borrows only the attack's column, said in its header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from defences_figure import fmt_acc, fmt_eps, fmt_inv, sigma_text, t_interval
from matplotlib.axes import Axes

STYLE = {"ls": "-.", "marker": "^"}  # the reconstruction setting's lines in every panel


def reconstruction_table(rs: list[dict[str, Any]]) -> str:
    lines = ["| method | m | sigma | mean local accuracy (%) | accountant epsilon: the models / each uplink | "
             "recovered > 20 dB; mean PSNR [95% CI over victims] | victims, images | per victim (% > 20 dB) | "
             "attack s / victim |", "| " + " | ".join(["---"] * 9) + " |"]
    for r in rs:
        inv, acc = r["inversion"], r["accounting"]
        flag = " (diverged: NaN weights)" if r["diverged"] else ""
        per = ", ".join(f"{v}: {100 * s:.0f}" for v, s in sorted(inv["per_victim"].items())) if inv else "-"
        sizes = f"{inv['victims']}, {inv['images']}" if inv else "-"
        secs = ", ".join(f"{s:.0f}" for s in inv["seconds"] if s is not None) if inv else "-"
        cell = "not applicable (diverged)" if r["diverged"] else fmt_inv(inv)
        lines.append(f"| {r['method']} | {r['m']} | {sigma_text(r['sigma'])} | {fmt_acc(r['accuracy'])}{flag} | "
                     f"{fmt_eps(acc.get('epsilon'))} / {fmt_eps(acc.get('epsilon_every_message'))} | {cell} | "
                     f"{sizes} | {per} | {secs} |")
    return "\n".join(lines)


def draw_reconstruction(rs: list[dict[str, Any]], util: Axes, inv: Axes, inv_util: Axes, psnr: Axes,
                        color: Callable[[str], str], no_dp: float) -> None:
    """Utility against sigma on (a); the share above 20 dB against sigma (c) and against the
    setting's own utility (e, the privacy-utility curve, each point labelled with its sigma); the
    mean PSNR of the matched pairs against sigma (f). Intervals: 95% over clients (utility) and
    over victims (attack)."""
    for method in sorted({r["method"] for r in rs}):
        mine = [r for r in rs if r["method"] == method and len(r["accuracy"]) > 1]
        style = {"color": color(method), **STYLE}
        label = f"{method}, 50-image clients"
        xs = [r["sigma"] or no_dp for r in mine]
        acc = [t_interval(r["accuracy"]) for r in mine]
        util.errorbar(xs, [a[0] for a in acc], yerr=[a[1] for a in acc], capsize=3, label=label, **style)
        pts = [(x, a[0], r) for x, a, r in zip(xs, acc, mine) if r["inversion"]]
        if not pts:
            continue
        share = [100 * r["inversion"]["share"] for _, _, r in pts]
        err = [[s - 100 * r["inversion"]["share_ci"][0] for s, (_, _, r) in zip(share, pts)],
               [100 * r["inversion"]["share_ci"][1] - s for s, (_, _, r) in zip(share, pts)]]
        inv.errorbar([x for x, _, _ in pts], share, yerr=err, capsize=3, label=label, **style)
        inv_util.errorbar([a for _, a, _ in pts], share, yerr=err, capsize=3, label=label, **style)
        for (_, a, r), s in zip(pts, share):
            text = "no DP" if r["sigma"] is None else f"σ={r['sigma']:g}"
            inv_util.annotate(text, (a, s), fontsize=7, textcoords="offset points", xytext=(3, 4))
        mean = [r["inversion"]["psnr"] for _, _, r in pts]
        perr = [[m - r["inversion"]["psnr_ci"][0] for m, (_, _, r) in zip(mean, pts)],
                [r["inversion"]["psnr_ci"][1] - m for m, (_, _, r) in zip(mean, pts)]]
        psnr.errorbar([x for x, _, _ in pts], mean, yerr=perr, capsize=3, label=label, **style)
    for ax in (inv, inv_util):
        ax.set_ylim(-5, 105)
    inv.set(ylabel="training images recovered > 20 dB (%)",
            title="(c) update inversion, first layer (50-image clients)")
    inv_util.set(xlabel="mean local test accuracy (%), 50-image clients", ylabel="recovered > 20 dB (%)",
                 title="(e) reconstruction against utility (its own setting)")
    inv_util.legend(fontsize=7)
    psnr.axhline(20.0, color="grey", lw=0.8, ls=":", label="20 dB")
    psnr.set(ylabel="mean PSNR of the matched pairs (dB)", title="(f) update inversion: mean PSNR (95% CI)")
