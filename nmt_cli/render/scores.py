"""How `nmt eval` results look: rich tables and bars for people, plain lines and JSON for scripts.

The plain lines on stdout keep sacreBLEU's own wording so existing scripts can grep them:

    BLEU = 30.96 63.9/38.8/27.0/19.4 (BP = 0.966 ratio = 0.967 hyp_len = 12101 ref_len = 12517)
    BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
    BLEU 1–10 words = 35.21 (n = 120)
    A: BLEU = 30.96 (μ = 30.91 ± 1.23) newstest.hyp
    B: BLEU = 32.10 (μ = 32.05 ± 1.20) newstest.hyp2
    BLEU paired bootstrap signature: nrefs:1|bs:1000|seed:12345|case:mixed|…
    verdict: B is better than A (p = 0.001)
"""

from __future__ import annotations

import dataclasses
import json

from rich.table import Table
from rich.text import Text

from nmt_cli.evaluate import BucketScore, Comparison, EvalReport, MetricScore

BAR_WIDTH = 40  # characters of the longest bar in the terminal chart
_EIGHTHS = " ▏▎▍▌▋▊▉"  # partial blocks, so bars resolve 1/8 of a character


# For people (stderr) ----------------------------------------------------------------------


def scores_table(scores: list[MetricScore]) -> Table:
    """Metric, score and signature, one row per metric."""
    table = Table(title="Scores", title_justify="left")
    table.add_column("metric")
    table.add_column("score", justify="right")
    table.add_column("signature", overflow="fold")
    for item in scores:
        table.add_row(item.name, f"{item.score:.2f}", item.signature)
    return table


def bar(value: float, top: float, width: int = BAR_WIDTH, never_empty: bool = False) -> str:
    """A horizontal bar of `value` on a scale where `top` fills `width` characters; with
    `never_empty`, a positive value too small to show gets one eighth."""
    if top <= 0 or value <= 0:
        return ""
    eighths = round(min(value / top, 1.0) * width * 8)
    full, part = divmod(max(eighths, 1) if never_empty else eighths, 8)
    return "█" * full + (_EIGHTHS[part] if part else "")


def length_table(
    buckets: list[BucketScore], unit: str, compared: list[BucketScore] | None = None
) -> Table:
    """Count and BLEU per source-length bucket, with a bar chart of BLEU beside them; with
    `compared` (the second system's buckets) its BLEU too, A's bar above B's."""
    systems = [buckets] if compared is None else [buckets, compared]
    top = max((b.bleu for s in systems for b in s if b.bleu is not None), default=0.0)
    table = Table(title=f"BLEU by source length ({unit})", title_justify="left")
    if compared is not None:
        table.caption, table.caption_justify = "bars: A above B", "left"
    table.add_column("length", justify="right")
    table.add_column("sentences", justify="right")
    for name in ("BLEU",) if compared is None else ("A", "B"):
        table.add_column(name, justify="right")
    table.add_column("", min_width=BAR_WIDTH)
    for row in zip(*systems, strict=True):
        shown = ["–" if b.bleu is None else f"{b.bleu:.2f}" for b in row]
        bars = [
            Text(bar(b.bleu or 0.0, top), style=style) for b, style in zip(row, _BARS, strict=False)
        ]
        chart = Text("\n").join(bars) if any(b.bleu is not None for b in row) else Text("")
        table.add_row(row[0].label, f"{row[0].count:,}", *shown, chart)
    return table


_BARS = ("cyan", "magenta")  # the bars of systems A and B


def comparison_table(comparison: Comparison, name_a: str, name_b: str) -> Table:
    """Both systems' scores, bootstrap means and intervals, and the verdict as caption."""
    table = Table(
        title=f"Paired bootstrap ({comparison.metric})",
        title_justify="left",
        caption=comparison.verdict,
        caption_justify="left",
    )
    table.add_column("system")
    table.add_column("file", overflow="fold")
    table.add_column(comparison.metric, justify="right")
    table.add_column("mean ± 95% CI", justify="right")
    for system, name in ((comparison.a, name_a), (comparison.b, name_b)):
        table.add_row(system.name, Text(name), f"{system.score:.2f}", _mean_ci(system))
    return table


def _mean_ci(system) -> str:
    return f"{system.mean:.2f} ± {system.ci:.2f}"


# For scripts (stdout) ---------------------------------------------------------------------


def plain_lines(report: EvalReport, name_a: str, name_b: str | None) -> list[str]:
    """The report as sacreBLEU-style text lines, in the order of the module docstring."""
    lines = []
    for item in report.metrics:
        lines += [item.text, f"{item.name} signature: {item.signature}"]
    for system, buckets in (("", report.by_length), ("B: ", report.by_length_compare)):
        for b in buckets or []:
            shown = "-" if b.bleu is None else f"{b.bleu:.2f}"
            lines.append(f"{system}BLEU {b.label} {report.length_unit} = {shown} (n = {b.count})")
    if report.comparison is not None:
        lines += _comparison_lines(report.comparison, name_a, name_b or "")
    return lines


def _comparison_lines(comparison: Comparison, name_a: str, name_b: str) -> list[str]:
    metric = comparison.metric
    return [
        *(
            f"{s.name}: {metric} = {s.score:.2f} (μ = {_mean_ci(s)}) {name}"
            for s, name in ((comparison.a, name_a), (comparison.b, name_b))
        ),
        f"{metric} paired bootstrap signature: {comparison.signature}",
        f"verdict: {comparison.verdict}",
    ]


def search_line(search: dict) -> str:
    """How `eval -m` translated (see `report_json`'s "search")."""
    limit = search["max_len"] or "2 × source pieces + 10"
    extras = [name for name in ("quantize", "bf16") if search[name]]
    return (
        f"translated with beam {search['beam']}, length penalty {search['length_penalty']:g}, "
        f"at most {limit} pieces, shortlist {'on' if search['shortlist'] else 'off'}"
        + "".join(f", --{name}" for name in extras)
    )


def report_json(report: EvalReport, files: dict[str, object], search: dict | None = None) -> str:
    """The report as one JSON object; keys are always present, null when not computed
    ("search": how `eval -m` translated, null for --hyp; its max_len null: 2 × the source's
    pieces + 10)."""
    by_length = None
    if report.by_length is not None:
        buckets = [dataclasses.asdict(b) for b in report.by_length]
        compared = report.by_length_compare
        by_length = {
            "unit": report.length_unit,
            "buckets": buckets,  # the second system's, with --compare (else null):
            "buckets_compare": None
            if compared is None
            else [dataclasses.asdict(b) for b in compared],
        }
    comparison = None if report.comparison is None else dataclasses.asdict(report.comparison)
    document = {
        "files": files,
        "metrics": [dataclasses.asdict(m) for m in report.metrics],
        "by_length": by_length,
        "comparison": comparison,
        "search": search,
    }
    return json.dumps(document, ensure_ascii=False, indent=1)
