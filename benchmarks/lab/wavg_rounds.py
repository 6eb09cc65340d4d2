"""Round by round of a recorded WAFFLE (`waffle-wavg`) run: each agent's weight and update size.

    python benchmarks/lab/wavg_rounds.py RUN --from 17 --to 32

For a run trained with `--record all`: per round, the server's weights (Algorithm 1, before
smoothing, from `server.pt`), the norm of Alice's model and of c on her downlink, the agents
flagged at weight 0 (`zero_weight = freeze | reset`), and each agent's |dy| and |dc| uplink
norms. This is how `docs/lab/reproduction-waffle-cgau.md` traced WAFFLE's divergence to agents whose
weights are tiny but not 0. A diverged round's tensors are refused by the transcript reader, so
stop `--to` at the last finite round.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fedattack.federation.rundir import Federation  # noqa: E402
from fedattack.federation.storage import load_tensors  # noqa: E402
from fedattack.targets.waffle_wavg import HISTORY, ZERO  # noqa: E402


def norm(payload: dict[str, torch.Tensor], prefix: str) -> float:
    parts = [t.double().flatten() for k, t in payload.items() if k.startswith(prefix)]
    return float(torch.cat(parts).norm()) if parts else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--from", dest="first", type=int, default=1)
    p.add_argument("--to", dest="last", type=int, default=None)
    args = p.parse_args()
    fed = Federation(args.run)
    alpha = load_tensors(args.run / "server.pt")[HISTORY]
    last = args.last or len(alpha)
    names = [k for k in fed.manifest["wire_schema"]["downlink"] if not k.startswith(("c.", "waffle."))]
    messages = fed.transcript().load(rounds=set(range(args.first, last + 1))).messages
    for rnd in range(args.first, last + 1):
        down = {m.receiver: m.payload for m in messages if m.round == rnd and m.kind == "downlink"}
        up = {m.sender: m.payload for m in messages if m.round == rnd and m.kind == "uplink"}
        if not down:
            continue
        alice = down[min(down)]
        model = float(torch.cat([alice[k].double().flatten() for k in names]).norm())
        flags = "".join(str(int(float(down[k][ZERO][0]))) if ZERO in down[k] else "-" for k in sorted(down))
        print(f"round {rnd:3d}  |x| {model:8.2f}  |c| {norm(alice, 'c.'):8.3f}  at zero {flags}")
        print("  weight " + " ".join(f"{a:7.4f}" for a in alpha[rnd - 1].tolist()))
        print("  |dy|   " + " ".join(f"{norm(up[k], 'dy.'):7.3g}" for k in sorted(up)))
        print("  |dc|   " + " ".join(f"{norm(up[k], 'dc.'):7.3g}" for k in sorted(up)))


if __name__ == "__main__":
    main()
