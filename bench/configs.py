"""Run-time copies of the configs: the peers' YAML with paths rewritten, our TOML with extras.

The peer YAML files are edited as text, key by key, so that every comment and every value we
do not touch stays as measured in the shared notes. Nested keys are written `section.key`.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from layout import PEER_CONFIG_DIR, PEERS_PLACEHOLDER, REFERENCE_CONFIG

PEER_FILES = {"onmt": "onmt_gru_bahdanau.yaml", "joey": "joey_gru_bahdanau.yaml"}


def _scalar(value: Any) -> str:
    """A YAML/TOML spelling of a plain value (JSON strings are valid in both)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):  # a YAML flow sequence, e.g. [0]
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the last line of the block that begins below line `start`."""
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and not line.lstrip().startswith("#") and _indent(line) <= indent:
            break
        end += 1
    return end


def _find_key(lines: list[str], key: str, lo: int, hi: int, indent: int | None) -> int | None:
    pattern = re.compile(rf"^(\s*){re.escape(key)}:(\s|$)")
    for index in range(lo, hi):
        match = pattern.match(lines[index])
        if match and (indent is None or len(match.group(1)) == indent):
            return index
    return None


def set_key(text: str, dotted: str, value: Any) -> str:
    """Set `section.key: value` in YAML text, adding the key to its section when missing."""
    lines = text.split("\n")
    *sections, key = dotted.split(".")
    lo, hi, indent = 0, len(lines), 0
    for section in sections:
        index = _find_key(lines, section, lo, hi, indent)
        if index is None:
            raise KeyError(f"section {section!r} of {dotted!r} not found")
        lo, hi = index + 1, _block_end(lines, index, indent)
        children = [
            line for line in lines[lo:hi] if line.strip() and not line.lstrip().startswith("#")
        ]
        indent = _indent(children[0]) if children else indent + 4
    index = _find_key(lines, key, lo, hi, indent)
    new = f"{' ' * indent}{key}: {_scalar(value)}"
    if index is None:
        lines.insert(lo, new)
    else:
        lines[index] = new
    return "\n".join(lines)


def peer_config(
    name: str, peers_dir: Path, target: Path, overrides: dict[str, Any] | None = None
) -> Path:
    """Write the shared config of peer `name` with paths under `peers_dir` and `overrides` set."""
    text = (PEER_CONFIG_DIR / PEER_FILES[name]).read_text(encoding="utf-8")
    text = text.replace(PEERS_PLACEHOLDER, str(peers_dir))
    for dotted, value in (overrides or {}).items():
        text = set_key(text, dotted, value)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def _toml_table(name: str, values: dict[str, Any]) -> str:
    body = "".join(f"{key} = {_scalar(value)}\n" for key, value in values.items())
    return f"[{name}]\n{body}"


def nmt_config(target: Path, train_extra: dict[str, Any], source: Path = REFERENCE_CONFIG) -> Path:
    """Write our reference config with `train_extra` merged into its [train] table."""
    with open(source, "rb") as handle:
        config = tomllib.load(handle)
    config.setdefault("train", {}).update(train_extra)
    header = f"# {source.name} with bench settings in [train]: {', '.join(train_extra)}\n"
    tables = "\n".join(_toml_table(name, values) for name, values in config.items())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(header + tables, encoding="utf-8")
    return target
