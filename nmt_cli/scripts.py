"""Writing systems without spaces between words (Chinese, Japanese): one table for every use.

Cleaning counts their characters as tokens (`data/clean.py`), evaluation measures such
sources in characters (`evaluate.length_unit`). Hangul is left out on purpose: Korean
separates words with spaces.
"""

from __future__ import annotations

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
