"""Turn result JSON files into one markdown table and a bar chart.

Rows are model + method, columns the languages or language pairs of the results, plus
the average; one table per protocol. The chart shows each row's average per protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..errors import InputError


def per_column_scores(record: dict) -> tuple[str, dict[str, float], float]:
    """(metric name, {column: value}, average) of one result record."""
    m = record.get("metrics", {})
    protocol = record.get("protocol")
    if protocol == "align":
        return "P@1", {k: v["p@1"] for k, v in m["pairs"].items()}, m["average"]
    if protocol == "xsr":
        return "P@1", {k: v["mean"] for k, v in m["languages"].items()}, m["average"]
    if protocol == "clir":
        key = m.get("main_measure", "AP")
        return key, {k: v[key] for k, v in m["pairs"].items()}, m["average"]
    if protocol == "xldc":
        return "accuracy", {k: v["accuracy"] for k, v in m["targets"].items()}, m["average"]
    raise InputError(f"unknown protocol {protocol!r} in a result file")


def load_results(paths: Sequence[str | Path]) -> list[dict]:
    records = []
    for p in paths:
        try:
            rec = json.loads(Path(p).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("file not found", path=str(p))
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", str(p), exc.lineno) from exc
        if "protocol" not in rec or "metrics" not in rec:
            raise InputError("not an hmde result file (no protocol/metrics)", path=str(p))
        rec["_file"] = str(p)
        records.append(rec)
    return records


def row_name(rec: dict) -> str:
    variant = rec.get("settings", {}).get("variant")
    name = f"{Path(str(rec.get('model'))).name} / {rec.get('method')}"
    return f"{name} ({variant})" if variant else name


def markdown_tables(records: Sequence[dict], digits: int = 3) -> str:
    out = []
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault((rec["protocol"], rec.get("settings", {}).get("dataset", "")), []).append(rec)
    for (protocol, dataset), recs in groups.items():
        scored = [(row_name(r), *per_column_scores(r)) for r in recs]
        metric = scored[0][1]
        columns = sorted({c for _, _, cols, _ in scored for c in cols})
        title = f"### {protocol}" + (f" — {dataset}" if dataset else "") + f" ({metric})"
        header = "| model / method | " + " | ".join(columns) + " | average |"
        lines = [title, "", header, "|" + "---|" * (len(columns) + 2)]
        for name, _, cols, avg in scored:
            cells = [f"{cols[c]:.{digits}f}" if c in cols else "" for c in columns]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | **{avg:.{digits}f}** |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def bar_chart(records: Sequence[dict], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..ground.atomic import atomic_path

    groups: dict[str, dict[str, float]] = {}
    for rec in records:
        label = rec["protocol"] + (f"\n{rec.get('settings', {}).get('dataset', '')}" if rec.get("settings", {}).get("dataset") else "")
        groups.setdefault(label, {})[row_name(rec)] = per_column_scores(rec)[2]
    rows = sorted({r for g in groups.values() for r in g})
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(groups) + 2), 4))
    for i, row in enumerate(rows):
        ax.bar(x + i * width, [g.get(row, 0.0) for g in groups.values()], width, label=row)
    ax.set_xticks(x + width * (len(rows) - 1) / 2, list(groups))
    ax.set_ylabel("average score")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
