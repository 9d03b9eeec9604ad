"""Translations as output lines: plain text, text with alignments, n-best lists, JSON.

Word links come from the caller (`aligner.TranslationAligner`, the model's own extraction);
this module only writes them out."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nmt_cli.alignment import Link


def _pharaoh(links: set[Link]) -> str:
    # Here, not at the top: plain-text output does not need it.
    from nmt_cli.alignment import format_pharaoh

    return format_pharaoh(links)


def as_text(translation, links: set[Link] | None = None) -> str:
    """The translation on one line; with `links`, `translation ||| 0-0 1-2`."""
    text = " ".join(translation.text.split("\n"))
    return text if links is None else f"{text} ||| {_pharaoh(links)}"


def as_nbest(index: int, translation) -> str:
    """n-best lines as Moses numbers them, without its feature field: `index ||| translation |||
    score`, best first."""
    if not translation.alternatives:
        return f"{index} ||| {translation.text} ||| {0.0:.4f}\n"  # as every other score
    return "".join(
        f"{index} ||| {text} ||| {score:.4f}\n" for text, score in translation.alternatives
    )


def as_json(translation, links: set[Link]) -> str:
    return json.dumps(as_record(translation, links), ensure_ascii=False)


def as_record(translation, links: set[Link]) -> dict:
    """The JSON object of a translation (`translate --json`, `nmt serve`'s /translate), with
    its word links in Pharaoh form."""
    return {
        "source": translation.source,
        "translation": translation.text,
        "score": round(float(translation.score), 4),
        "src_pieces": translation.src_pieces,
        "pieces": translation.pieces,
        "alignment": _pharaoh(links),
        "attention": None
        if translation.attention is None
        else [[round(float(w), 4) for w in row] for row in translation.attention],
        "nbest": [  # an empty line has no search, and its one (empty) translation
            {"translation": t, "score": round(float(s), 4)}
            for t, s in translation.alternatives or [(translation.text, translation.score)]
        ],
        "truncated": translation.truncated,
    }
