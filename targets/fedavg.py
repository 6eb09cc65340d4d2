"""FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized
Data", AISTATS 2017).

Wire: the global weights go down; each sampled client's locally trained weights come up.
Private: nothing. What an eavesdropper on one client's uplink holds is that client's whole
model after local training, which is why membership inference is strong against it.
"""

from __future__ import annotations

from fedattack.target import Target


class FedAvg(Target):
    """Local SGD from the global weights, then the n_k-weighted average of the results."""

    name = "fedavg"
    paper = "McMahan et al. 2017"
