"""Point labels on a crowded panel are moved apart, and a lone label stays by its point."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedattack.reports.labels import LINE, OFFSET, place_labels  # noqa: E402


def _offsets(notes: list[tuple[str, float, float]]) -> list[tuple[float, float]]:
    fig, ax = plt.subplots()
    ax.plot([n[1] for n in notes], [n[2] for n in notes], "o")
    place_labels(ax, notes)
    order = {t: i for i, (t, _, _) in enumerate(notes)}
    out = [tuple(a.xyann) for a in sorted(ax.texts, key=lambda a: order[a.get_text()])]
    plt.close(fig)
    return out  # type: ignore[return-value]


def test_labels_of_nearly_the_same_point_stack_a_line_apart() -> None:
    notes = [("factors-all-on", 82.7, 0.5380), ("factors-prior-mean", 82.7, 0.5381),
             ("factors-fitted", 82.7, 0.5379), ("decoded", 38.6, 0.626)]  # the last sets the scale
    ys = sorted(y for _, y in _offsets(notes)[:3])
    assert all(b - a >= LINE - 1.0 for a, b in zip(ys, ys[1:]))


def test_labels_far_apart_stay_at_their_points() -> None:
    assert _offsets([("a", 10.0, 0.5), ("b", 90.0, 0.9)]) == [OFFSET, OFFSET]
