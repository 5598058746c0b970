"""Draw the shipped Grafana dashboard's panels from a real Prometheus's answers, laid out by their
``gridPos``: the picture in docs/lag.md is this file's output from the monitoring test's run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.devservices import LocalPrometheus

GRID_COLUMNS = 24


def _legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template) or "value"


def render(dashboard: dict[str, Any], prom: LocalPrometheus, start: float, end: float, out: Path) -> int:
    """Write ``out`` (PNG); returns how many panels had data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(16, rows * 0.42))
    fig.suptitle(
        f"{dashboard['title']} (Prometheus, {int(end - start)} s of the monitoring test)", fontsize=11
    )
    with_data = 0
    for panel in panels:
        g = panel["gridPos"]
        ax = fig.add_axes((g["x"] / GRID_COLUMNS + 0.035, 1 - (g["y"] + g["h"]) / rows + 0.05,
                           g["w"] / GRID_COLUMNS - 0.05, g["h"] / rows - 0.1))  # fmt: skip
        ax.set_title(panel["title"], fontsize=9, loc="left")
        lines = 0
        for target in panel["targets"]:
            expr = target["expr"].replace("$pipeline", ".*").replace("$job", ".*")
            for series in prom.query_range(expr, start, end, step=5):
                xs = [float(t) - start for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                ax.plot(
                    xs, ys, label=_legend(target.get("legendFormat", ""), series["metric"]), linewidth=1.2
                )
                lines += 1
        with_data += lines > 0
        ax.tick_params(labelsize=7)
        ax.set_xlabel("s", fontsize=7, loc="right")
        if lines:
            ax.legend(fontsize=6, loc="upper left", ncol=2 if lines > 4 else 1)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return with_data
