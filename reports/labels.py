"""Point labels that do not print over each other.

On a privacy-against-utility panel the rows of one federation share its utility, and a
method's reconstructions often reach nearly the same AUC, so their labels landed on one spot
and read as one smudge. Labels are placed once the axes know their limits: from the top of the
panel down, a label that would overlap one already placed moves down a line (and is tied to
its point by a thin line once it has moved).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

LINE = 8.5        # points between stacked labels (the labels are 7-point text)
CHAR = 4.0        # points per character, a generous width for 7-point text
OFFSET = (4, 3)   # the label's corner from its point, in points


def place_labels(ax: plt.Axes, notes: list[tuple[str, float, float]], fontsize: int = 7) -> None:
    """Annotate (text, x, y) points of `ax`, moving labels down until none overlaps another."""
    if not notes:
        return
    ax.autoscale_view()
    scale = 72.0 / ax.figure.dpi  # display pixels to points
    placed: list[tuple[float, float, float]] = []  # left, bottom, width, in points
    at = [(note, *(ax.transData.transform((x, y)) * scale), x, y) for note, x, y in notes]
    for note, px, py, x, y in sorted(at, key=lambda a: (-a[2], a[1])):
        left, bottom, width = px + OFFSET[0], py + OFFSET[1], CHAR * len(note)
        while any(_overlap(left, bottom, width, other) for other in placed):
            bottom -= LINE
        placed.append((left, bottom, width))
        moved = bottom != py + OFFSET[1]
        ax.annotate(note, (x, y), xytext=(OFFSET[0], bottom - py), textcoords="offset points",
                    fontsize=fontsize, arrowprops={"arrowstyle": "-", "lw": 0.4, "alpha": 0.5} if moved else None)


def _overlap(left: float, bottom: float, width: float, other: tuple[float, float, float]) -> bool:
    o_left, o_bottom, o_width = other
    return abs(bottom - o_bottom) < LINE and left < o_left + o_width and o_left < left + width
