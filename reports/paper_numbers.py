"""The seed papers' published numbers, so a report can print them beside ours.

Each number is keyed by (paper table, dataset, partition, method, metric). Metrics use our
names and display units (percent; PSNR in dB; variance in percent squared), methods our
registry ids, partitions our partitioner names. These are references to compare against,
never targets: nothing in fedattack reads them except the report.

Sources (../shared/papers): WAFFLe's tables are numbered as in its IEEE Access 2022 version
(003), the one the docs cite and the only one with Table 4: Table 1 is the multimodal
sub-populations, Table 2 the local test accuracy for Z = 2 (the ICLR 2021 submission, 000,
numbers these two the other way round; each title says both), Table 3 membership inference
(the same number in both), Table 4 model inversion. WAFFLE table 1 from 001/002; its CIFAR-10
half prints fractions with a percent sign ("0.771%"), read here as 77.1 %, and has no standard
deviations (one seed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedattack.registry import UserError
from fedattack.suggest import did_you_mean


@dataclass(frozen=True)
class PaperTable:
    key: str
    title: str
    kind: str                   # "utility" or the attack's name
    metrics: tuple[str, ...]
    source: str
    note: str = ""


@dataclass(frozen=True)
class PaperNumber:
    table: str
    dataset: str
    partition: str | None       # None: the paper does not tie the number to a partition
    method: str
    metric: str
    mean: float
    std: float | None = None

    def text(self) -> str:
        return f"{self.mean:.2f}" + ("" if self.std is None else f" ± {self.std:.2f}")


TABLES: dict[str, PaperTable] = {}
NUMBERS: list[PaperNumber] = []


def table(key: str, title: str, kind: str, metrics: tuple[str, ...], source: str, note: str = "") -> None:
    TABLES[key] = PaperTable(key, title, kind, metrics, source, note)


def numbers(key: str, dataset: str, partition: str | None, method: str,
            values: Mapping[str, float | tuple[float, float]]) -> None:
    for metric, value in values.items():
        mean, std = value if isinstance(value, tuple) else (value, None)
        NUMBERS.append(PaperNumber(key, dataset, partition, method, metric, mean, std))


def lookup(key: str) -> tuple[PaperTable, list[PaperNumber]]:
    if key not in TABLES:
        raise UserError(f"unknown paper table {key!r}{did_you_mean(key, TABLES)}; "
                        f"choose one of: {', '.join(sorted(TABLES))}")
    return TABLES[key], [n for n in NUMBERS if n.table == key]


def _waffle_ibp() -> None:
    t2, t1 = "waffle-ibp:table2", "waffle-ibp:table1"  # local accuracy, sub-populations (IEEE Access numbers)
    table(t2, "WAFFLe Table 2 (IEEE Access 2022; Table 1 of the ICLR 2021 submission): local test accuracy "
          "for Z = 2", "utility", ("mean",), "003_0ae5b1962c37745a.txt Table 2 (= 000 Table 1)")
    table(t1, "WAFFLe Table 1 (IEEE Access 2022; Table 2 of the ICLR 2021 submission): sub-population local "
          "test performance (multimodal)", "utility", ("majority", "minority", "gap", "variance"),
          "003_0ae5b1962c37745a.txt Table 1 (= 000 Table 2)")
    local = {  # dataset -> method -> (unimodal, multimodal), mean ± std
        "mnist": {"fedavg": ((94.46, .84), (91.57, 1.42)), "fedprox": ((94.44, 1.15), (91.53, 1.05)),
                  "qffl": ((91.46, 1.07), (88.42, 1.24)), "waffle-ibp": ((96.23, .31), (95.41, .36))},
        "fmnist": {"fedavg": ((83.96, .91), (83.43, 2.27)), "fedprox": ((84.19, .99), (83.59, 2.30)),
                   "qffl": ((83.10, .36), (85.73, .21)), "waffle-ibp": ((87.12, .89), (86.09, .92))},
        "cifar10": {"fedavg": ((52.54, .14), (45.46, 1.69)), "fedprox": ((52.36, .11), (44.95, 1.17)),
                    "qffl": ((43.82, .52), (38.25, 1.12)), "waffle-ibp": ((71.30, .92), (66.35, .72))},
    }
    for dataset, methods in local.items():
        for method, (uni, multi) in methods.items():
            numbers(t2, dataset, "shards", method, {"mean": uni})
            numbers(t2, dataset, "multimodal", method, {"mean": multi})
    sub: dict[str, dict[str, tuple[tuple[float, float], ...]]] = {  # majority, minority, gap, variance
        "mnist": {"fedavg": ((96.63, .70), (67.40, 11.26), (29.23, 11.79), (199, 106)),
                  "fedprox": ((96.43, .67), (68.60, 9.44), (27.83, 10.03), (186, 92)),
                  "qffl": ((94.93, .31), (54.20, 7.37), (40.73, 7.55), (355, 117)),
                  "waffle-ibp": ((95.93, .16), (93.87, .66), (2.07, .77), (26, 6))},
        "fmnist": {"fedavg": ((89.75, 1.76), (68.05, 4.43), (21.70, 4.21), (231, 35)),
                   "fedprox": ((89.95, 1.73), (67.50, 4.50), (22.45, 4.38), (233, 42)),
                   "qffl": ((88.73, .17), (69.40, 1.48), (19.33, 1.43), (212, 19)),
                   "waffle-ibp": ((88.91, 2.07), (79.67, 1.52), (9.25, .61), (145, 27))},
        "cifar10": {"fedavg": ((51.98, 1.69), (16.83, 4.42), (35.15, 4.12), (338, 59)),
                    "fedprox": ((51.26, 1.44), (16.56, 3.32), (32.70, 6.99), (318, 36)),
                    "qffl": ((42.00, .29), (18.14, 3.05), (23.87, 3.00), (220, 17)),
                    "waffle-ibp": ((68.37, 1.01), (55.00, 6.00), (13.37, 2.61), (182, 27))},
    }
    for dataset, rows in sub.items():
        for method, values in rows.items():
            numbers(t1, dataset, "multimodal", method, dict(zip(("majority", "minority", "gap", "variance"), values)))
    table("waffle-ibp:table3", "WAFFLe Table 3: membership inference (CIFAR-10, LeNet, 3 shadow models)",
          "membership", ("accuracy", "f1"), "003_0ae5b1962c37745a.txt Table 3 (= 000 Table 3)",
          "The paper's adversary intercepts the training update; it does not say how WAFFLe's "
          "factor selection was guessed.")
    numbers("waffle-ibp:table3", "cifar10", None, "fedavg", {"accuracy": (83.85, 1.62), "f1": (83.72, 2.19)})
    numbers("waffle-ibp:table3", "cifar10", None, "waffle-ibp", {"accuracy": (56.20, 1.40), "f1": (54.39, 1.85)})
    table("waffle-ibp:table4", "WAFFLe Table 4: model inversion (Fashion-MNIST)", "inversion",
          ("psnr", "attack_accuracy"), "003_0ae5b1962c37745a.txt Table 4 (IEEE Access version only)",
          "The paper's evaluation classifier reached 96.67 %.")
    numbers("waffle-ibp:table4", "fmnist", None, "fedavg", {"psnr": 12.46, "attack_accuracy": 60.63})
    numbers("waffle-ibp:table4", "fmnist", None, "waffle-ibp", {"psnr": 10.22, "attack_accuracy": 40.78})


def _waffle_wavg() -> None:
    key = "waffle-wavg:table1"
    table(key, "WAFFLE Table 1: agent 0's (Alice's) best local test accuracy over 100 rounds", "utility",
          ("agent0_best",), "001_d7ed34949b85e84d.txt / 002 Table 1",
          "MNIST: mean ± std over five seeds; CIFAR-10: one seed, printed as fractions in the paper.")
    methods = ("local", "fedavg", "scaffold", "weight-erosion", "waffle-wavg", "apfl")
    mnist = {
        "A": ((96.88, .47), (98.99, .08), (99.03, .08), (99.01, .16), (98.93, .1), (97.55, .13)),
        "B": ((99.38, .09), (98.97, .18), (99.24, .17), (99.69, .07), (99.69, .03), (99.36, .09)),
        "C": ((98.54, .1), (98.56, .1), (98.77, .1), (99.0, .08), (99.0, .08), (98.45, .08)),
        "A*": ((96.56, .27), (13.37, 3.21), (19.93, 5.95), (98.09, .26), (97.99, .26), (96.24, .22)),
        "B*": ((99.47, .07), (45.26, 4.1), (57.51, 4.02), (99.67, .09), (99.63, .11), (99.44, .07)),
    }
    cifar = {
        "A": (77.1, 92.5, 92.7, 91.2, 90.7, 77.6), "B": (88.8, 88.4, 85.0, 93.5, 93.1, 89.5),
        "C": (83.2, 85.7, 86.8, 90.7, 91.4, 80.9), "A*": (76.3, 24.8, 25.9, 87.7, 90.0, 78.0),
        "B*": (87.6, 78.2, 47.6, 93.7, 92.6, 87.8),
    }
    pairs: tuple[tuple[str, dict[str, tuple[Any, ...]]], ...] = (("mnist", mnist), ("cifar10", cifar))
    for dataset, rows in pairs:
        for dist, values in rows.items():
            for method, value in zip(methods, values):
                numbers(key, dataset, f"label-distribution:{dist}", method, {"agent0_best": value})


_waffle_ibp()
_waffle_wavg()
