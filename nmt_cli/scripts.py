"""Writing systems without spaces between words (Chinese, Japanese): one table for every use.

Cleaning counts their characters as tokens (`data/clean.py`), evaluation measures such
sources in characters (`evaluate.length_unit`). Hangul is left out on purpose: Korean
separates words with spaces.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

UNSPACED_RANGES = (
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # half-width and full-width forms
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
# The same ranges as the inside of a regular-expression character class.
UNSPACED_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in UNSPACED_RANGES)


def is_unspaced(ch: str) -> bool:
    """Whether `ch` belongs to a script written without spaces between words."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in UNSPACED_RANGES)


# Letters of those scripts (ideographs and kana), no punctuation or full-width forms.
UNSPACED_LETTER_CLASS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
)
_UNSPACED_LETTER = re.compile(f"[{UNSPACED_LETTER_CLASS}]")
# Word-segmented Chinese averages under two such letters a whitespace word (the demo corpus:
# 1.5); text written without spaces runs a clause or a sentence together.
UNSEGMENTED_LETTERS_PER_WORD = 3
_SPACE_BETWEEN = re.compile(f"(?<=[{UNSPACED_CLASS}]) +(?=[{UNSPACED_CLASS}])")


def is_unsegmented(text: str) -> bool:
    """Whether `text` is Chinese or Japanese written without spaces between words: its
    whitespace words that hold such letters hold UNSEGMENTED_LETTERS_PER_WORD of them or more
    on average."""
    if text.isascii():
        return False
    counts = [len(_UNSPACED_LETTER.findall(word)) for word in text.split()]
    letters, holding = sum(counts), sum(1 for count in counts if count)
    return bool(holding) and letters >= UNSEGMENTED_LETTERS_PER_WORD * holding


def mostly_unsegmented(lines: Iterable[str], sample: int = 1000) -> bool:
    """Whether most of the first `sample` lines are `is_unsegmented`: a side of a corpus, or a
    model's training text, judged as a whole (one line with a long word proves nothing)."""
    first = list(itertools.islice(lines, sample))
    # lines of one or two such letters (谢谢！, はい。) say nothing either way
    voting = [line for line in first if len(_UNSPACED_LETTER.findall(line)) >= 3]
    return 2 * sum(map(is_unsegmented, voting)) > len(voting)


def join_unsegmented(text: str) -> str:
    """`text` without the spaces between two characters of those scripts, for the output of a
    model whose target text is written without spaces: a piece that starts a word (▁) in
    the middle of a sentence decodes to a stray space. Spaces beside other text (a Latin
    name) stay."""
    return _SPACE_BETWEEN.sub("", text) if " " in text else text
