"""AER of attention alignments for every extraction choice, one direction and symmetrised.

Reads the attention and the gradient saliency of a source→target model and of a target→source
model once per test pair (teacher-forced, as `nmt align --src --tgt` does), then extracts links
with each choice that `nmt align` offers — attention, saliency or both (`--weights`), argmax or
a weight threshold, the attention of step t or t+1 (`--shift`), end-of-sentence kept or
skipped — for each direction alone and for both symmetrised
(intersection, grow-diag-final-and, union), and scores them against gold links (AER,
precision, recall). Optional Pharaoh files from other aligners (e.g. eflomal) are scored in
the same table. Writes a Markdown report.

    python scripts/align_grid.py --forward runs/demo/model --backward runs/demo-zh-en/model \\
        --src data/demo/test.en --tgt data/demo/test.zh --gold data/demo/test.align \\
        --other "eflomal (grow-diag-final-and)=runs/eflomal/test.gdfa" --out docs/alignment-extraction.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nmt_cli.aligner import (  # noqa: E402
    AlignOptions,
    PairWeights,
    average_weights,
    combine_directions,
    directional_links,
    forced_weights,
    link_pairs,
    word_weights,
)
from nmt_cli.alignment import (  # noqa: E402
    parse_pharaoh,
    read_gold,
    score_alignments,
    transpose_links,
)
from nmt_cli.translator import Translator  # noqa: E402

METHODS = (
    ("argmax", None),
    ("mutual", None),
    ("threshold", 0.5),
    ("threshold", 0.3),
    ("threshold", 0.2),
)
WEIGHTS = ("attention", "saliency", "both")
# Grow thresholds and the corpus prior's share were picked on the dev split.
GROWN = (("argmax", None, 0.15), ("mutual", None, 0.2), ("threshold", 0.3, 0.15))
PRIOR_SHARE = 0.5
SYMMETRIZATIONS = ("intersection", "grow-diag-final-and", "union", "mean")


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def weights_of(translator: Translator, pairs: list[tuple[str, str]], kind: str) -> list:
    return [forced_weights(translator, source, target, kind) for source, target in pairs]


def mean_raw(first: list, second: list) -> list:
    """Piece-level weights averaged pair by pair: what `--weights both` reads."""
    return [average_weights(a, b) for a, b in zip(first, second, strict=True)]


def directional(raw, options: AlignOptions) -> list:
    """(words, links) per pair for one direction and one extraction choice."""
    return [directional_links(pair, options) for pair in raw]


def score_choice(flags, fwd, bwd, options: AlignOptions, gold) -> list:
    """(flags, alignment, score, links) for each direction and each symmetrisation of one
    choice, combined as `nmt align --reverse-model` does."""
    forward_links = [links for _, links in fwd]
    backward_links = [transpose_links(links) for _, links in bwd]
    rows = [
        (flags, "source→target", score_alignments(forward_links, gold), forward_links),
        (flags, "target→source", score_alignments(backward_links, gold), backward_links),
    ]
    for name in SYMMETRIZATIONS:
        combined = replace(options, symmetrize=name)
        merged = [
            combine_directions(*forward, *backward, combined)[3]
            for forward, backward in zip(fwd, bwd, strict=True)
        ]
        rows.append((flags, f"symmetrised: {name}", score_alignments(merged, gold), merged))
    return rows


def score_with_prior(flags, forward_raw, backward_raw, options: AlignOptions, gold, pairs):
    """Rows of one choice with `--corpus-prior`: the two-pass extraction of `nmt align`, for
    the source→target model alone and for each symmetrisation."""
    fwd = [word_weights(raw, options) for raw in forward_raw]
    bwd = [word_weights(raw, options) for raw in backward_raw]
    alone = [PairWeights(s, t, words) for (s, t), words in zip(pairs, fwd, strict=True)]
    links = [pair.links for pair in link_pairs(alone, options)]
    rows = [(flags, "source→target", score_alignments(links, gold), links)]
    both = [
        PairWeights(s, t, words, back) for (s, t), words, back in zip(pairs, fwd, bwd, strict=True)
    ]
    for name in SYMMETRIZATIONS:
        links = [pair.links for pair in link_pairs(both, replace(options, symmetrize=name))]
        rows.append((flags, f"symmetrised: {name}", score_alignments(links, gold), links))
    return rows


def error_split(predicted: list[set], gold: list, pairs: list[tuple[str, str]]) -> str:
    """How the wrong links of one alignment divide: those touching a word the gold leaves
    unaligned, and those between two aligned words; plus the sure links missed."""
    touching, between, missed = 0, 0, 0
    words: dict[str, int] = {}
    for links, reference, (source, target) in zip(predicted, gold, pairs, strict=True):
        src, tgt = source.split(), target.split()
        src_aligned = {i for i, _ in reference.possible}
        tgt_aligned = {j for _, j in reference.possible}
        for i, j in links - set(reference.possible):
            if i in src_aligned and j in tgt_aligned:
                between += 1
                continue
            touching += 1
            word = src[i] if i not in src_aligned else tgt[j]
            words[word] = words.get(word, 0) + 1
        missed += len(set(reference.sure) - links)
    common = ", ".join(f"{w} {n}" for w, n in sorted(words.items(), key=lambda x: -x[1])[:6])
    return (
        f"{touching + between:,} wrong links: {touching:,} touch a word the gold leaves "
        f"unaligned (most often: {common}), {between:,} join two aligned words; "
        f"{missed:,} sure links are missed."
    )


def choice_flags(
    method: str,
    threshold: float | None,
    shift: int,
    include_eos: bool,
    weights: str,
    grow: float | None = None,
    prior: float | None = None,
) -> str:
    flags = [] if weights == "attention" else [f"--weights {weights}"]
    flags.append(f"--method {method}")
    if threshold is not None:
        flags.append(f"--threshold {threshold}")
    if grow is not None:
        flags.append(f"--grow-threshold {grow}")
    if prior is not None:
        flags.append(f"--corpus-prior {prior}")
    if weights == "attention":  # the grid shifts the attention alone; its `both` rows read
        flags.append(f"--shift {shift}")  # unshifted attention: unguided models' default
    if include_eos:
        flags.append("--include-eos")
    return " ".join(flags)


def percent(value: float) -> str:
    return f"{value * 100:.2f}"


NOTES_HEADING = "## What the figures show"


def _notes(out: Path) -> str:
    """The hand-written section of an existing report, from its heading to the end."""
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    start = text.find(NOTES_HEADING)
    return text[start:].rstrip() if start >= 0 else NOTES_HEADING + "\n\n(to be written)"


def _scores(score) -> dict:
    """AER, precision and recall in percent as the tables round them, and the link count."""
    return {
        "aer": float(percent(score.aer)),
        "precision": float(percent(score.precision)),
        "recall": float(percent(score.recall)),
        "links": score.predicted,
    }


def _row(row) -> dict:
    flags, kind, score, _ = row
    return {"flags": flags, "alignment": kind, **_scores(score)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forward", type=Path, required=True, help="source→target model")
    parser.add_argument("--backward", type=Path, required=True, help="target→source model")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--tgt", type=Path, required=True)
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument(
        "--other",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="Pharaoh alignments of another aligner to score beside ours",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "alignment-extraction.md")
    parser.add_argument(
        "--results", type=Path, help="also write every figure as JSON here (docs/figures.toml)"
    )
    args = parser.parse_args()

    pairs = list(zip(read_lines(args.src), read_lines(args.tgt), strict=True))
    gold = read_gold(args.gold)
    forward, backward = Translator.load(args.forward), Translator.load(args.backward)
    reversed_pairs = [(t, s) for s, t in pairs]
    started = time.monotonic()
    raw = {"attention": (weights_of(forward, pairs, "attention"),
                         weights_of(backward, reversed_pairs, "attention"))}  # fmt: skip
    seconds = {"attention": time.monotonic() - started}
    started = time.monotonic()
    raw["saliency"] = (weights_of(forward, pairs, "saliency"),
                       weights_of(backward, reversed_pairs, "saliency"))  # fmt: skip
    seconds["saliency"] = time.monotonic() - started
    raw["both"] = (
        mean_raw(raw["attention"][0], raw["saliency"][0]),
        mean_raw(raw["attention"][1], raw["saliency"][1]),
    )

    rows = []
    eos_differs = []
    for weights in WEIGHTS:
        forward_raw, backward_raw = raw[weights]
        for method, threshold in METHODS:
            for shift in (0, 1) if weights == "attention" else (0,):
                flags = choice_flags(method, threshold, shift, False, weights)
                options = AlignOptions(
                    method=method, threshold=threshold or 0.5, shift=shift, weights=weights
                )
                fwd = directional(forward_raw, options)
                bwd = directional(backward_raw, options)
                rows += score_choice(flags, fwd, bwd, options, gold)
                if weights != "attention":
                    continue
                eos = replace(options, include_eos=True)
                with_eos = score_choice(
                    flags, directional(forward_raw, eos), directional(backward_raw, eos), eos, gold
                )
                eos_differs += [
                    (f"{flags} --include-eos", kind, score, links)
                    for (_, kind, score, links), (_, _, plain, _) in zip(
                        with_eos, rows[-len(with_eos) :], strict=True
                    )
                    if score != plain
                ]
    for weights in WEIGHTS:
        forward_raw, backward_raw = raw[weights]
        for method, threshold, grow in GROWN:
            flags = choice_flags(method, threshold, 0, False, weights, grow)
            options = AlignOptions(
                method=method, threshold=threshold or 0.5, weights=weights, grow_threshold=grow
            )
            fwd, bwd = directional(forward_raw, options), directional(backward_raw, options)
            rows += score_choice(flags, fwd, bwd, options, gold)
    for weights in WEIGHTS:
        forward_raw, backward_raw = raw[weights]
        for method, threshold, grow in GROWN:
            flags = choice_flags(method, threshold, 0, False, weights, grow, PRIOR_SHARE)
            options = AlignOptions(
                method=method,
                threshold=threshold or 0.5,
                weights=weights,
                grow_threshold=grow,
                corpus_prior=PRIOR_SHARE,
            )
            rows += score_with_prior(flags, forward_raw, backward_raw, options, gold, pairs)
    rows += eos_differs
    others = []
    for spec in args.other:
        name, _, path = spec.partition("=")
        predicted = [parse_pharaoh(line) for line in read_lines(Path(path))]
        others.append((name, score_alignments(predicted, gold)))

    best = min(rows, key=lambda row: row[2].aer)
    lines = [
        "| extraction (`nmt align` flags) | alignment | AER % | precision % | recall % | links |",
        "|---|---|---|---|---|---|",
    ]
    for flags, kind, score, _ in rows:
        lines.append(
            f"| `{flags}` | {kind} | {percent(score.aer)} | {percent(score.precision)} | "
            f"{percent(score.recall)} | {score.predicted:,} |"
        )
    best_attention = min(
        (row for row in rows if "--weights" not in row[0]), key=lambda row: row[2].aer
    )
    other_lines = [
        "| aligner | AER % | precision % | recall % | links |",
        "|---|---|---|---|---|",
    ]
    for name, row in (("nmt, best with attention", best_attention), ("nmt, best of all", best)):
        other_lines.append(
            f"| {name} (`{row[0]}`, {row[1]}) | {percent(row[2].aer)} | "
            f"{percent(row[2].precision)} | {percent(row[2].recall)} | {row[2].predicted:,} |"
        )
    symmetrize = " --symmetrize mean" if best[1] == "symmetrised: mean" else ""
    for name, score in others:
        other_lines.append(
            f"| {name} | {percent(score.aer)} | {percent(score.precision)} | "
            f"{percent(score.recall)} | {score.predicted:,} |"
        )
    errors = error_split(best[3], gold, pairs)
    report = [
        "# Word alignments from attention and saliency, scored against gold links",
        "",
        f"{len(pairs):,} test pairs (`{args.src}`, `{args.tgt}`), gold `{args.gold}` "
        f"({sum(len(g.sure) for g in gold):,} sure links). Models: `{args.forward}` "
        f"(source→target) and `{args.backward}` (target→source); reading the attention of both "
        f"over every pair took {seconds['attention']:.1f} s, their gradient saliency "
        f"{seconds['saliency']:.1f} s. AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) "
        "(Och & Ney 2003), counts summed over the corpus. Regenerate with `make align-grid`: "
        "scripts/align_grid.sh holds every command (both models' prepare and train, eflomal, "
        "this report); the best row of the tables below is, from the shell, "
        f"`nmt align -m {args.forward} --reverse-model {args.backward} --src {args.src} "
        f"--tgt {args.tgt} --gold {args.gold} {best[0]}{symmetrize}` "
        "(grow-diag-final-and is the default --symmetrize).",
        "",
        "## Beside other aligners",
        "",
        *other_lines,
        "",
        f"Errors of the best choice: {errors}",
        "",
        "## Every extraction choice",
        "",
        "`--weights` chooses what is read: the attention (default), the gradient × input "
        "saliency of each source word for each target word (`saliency`), or the mean of the two "
        "(`both`); `--shift` moves the attention's rows (in `both`, before the mean; this grid "
        "tries it with the attention alone). `--grow-threshold G` then adds, "
        "around each link, neighbouring cells (diagonals included) of weight at least G while "
        "one of their two words is unaligned, as grow-diag does with the union (G was "
        "chosen on the dev split). `--method mutual` links only cells that are the strongest of "
        "both their row and their column. `--corpus-prior 0.5` is a second pass: every word "
        "pair's link rate over all the pairs aligned (links / (meetings + 5) in the first pass) "
        "is averaged with the weights, and links are drawn again. With a reverse model, "
        "`nmt align --reverse-model M --symmetrize NAME` combines the two "
        "directions; `mean` averages their word-level weights and extracts links from that with "
        "the same `--method`. "
        + (
            "`--include-eos` changed no score: the encoder reads no end-of-sentence, so no "
            "word can be drawn to one on the source side, and the links of the target's "
            "end-of-sentence step are dropped as links to the NULL word."
            if not eos_differs
            else "Rows with `--include-eos` are listed where it changed a score."
        ),
        "",
        *lines,
        "",
    ]
    report += [_notes(args.out), ""]  # the hand-written reading of the figures is kept
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.results:
        one_pass = [row for row in rows if "--corpus-prior" not in row[0]]
        document = {
            "command": "make align-grid",
            "pairs": len(pairs),
            "sure_links": sum(len(g.sure) for g in gold),
            "seconds": {key: round(value, 1) for key, value in seconds.items()},
            "best": _row(best),
            "best_errors": errors,
            "best_attention": _row(best_attention),
            "best_one_pass": _row(min(one_pass, key=lambda row: row[2].aer)),
            "best_one_pass_attention": _row(
                min((r for r in one_pass if "--weights" not in r[0]), key=lambda r: r[2].aer)
            ),
            "others": {name: _scores(score) for name, score in others},
            "rows": {f"{flags} | {kind}": _scores(score) for flags, kind, score, _ in rows},
        }
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n")
    args.out.write_text("\n".join(report), encoding="utf-8")
    print("\n".join(other_lines), file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
