"""Translations as output lines: plain text, text with alignments, n-best lists, JSON."""

from __future__ import annotations

import json


def word_links(translation) -> str:
    """Word-level Pharaoh links (source word − target word, 0-based) from the attention."""
    # Here, not at the top: plain-text output does not need it, and it takes a while to load.
    from nmt_cli.aligner import translation_links
    from nmt_cli.alignment import format_pharaoh

    return format_pharaoh(translation_links(translation))


def as_text(translation, align: bool) -> str:
    text = " ".join(translation.text.split("\n"))
    return f"{text} ||| {word_links(translation)}" if align else text


def as_nbest(index: int, translation) -> str:
    """Moses n-best lines: `index ||| translation ||| score`, best first."""
    if not translation.alternatives:
        return f"{index} ||| {translation.text} ||| 0.0\n"
    return "".join(
        f"{index} ||| {text} ||| {score:.4f}\n" for text, score in translation.alternatives
    )


def as_json(translation) -> str:
    return json.dumps(as_record(translation), ensure_ascii=False)


def as_record(translation) -> dict:
    """The JSON object of a translation (`translate --json`, `nmt serve`'s /translate)."""
    return {
        "source": translation.source,
        "translation": translation.text,
        "score": round(float(translation.score), 4),
        "src_pieces": translation.src_pieces,
        "pieces": translation.pieces,
        "alignment": word_links(translation),
        "attention": None
        if translation.attention is None
        else [[round(float(w), 4) for w in row] for row in translation.attention],
        "nbest": [
            {"translation": t, "score": round(float(s), 4)} for t, s in translation.alternatives
        ],
        "truncated": translation.truncated,
    }
