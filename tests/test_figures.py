"""Every registered figure of ours in README.md, docs/ and bench/ matches its results file.

Each `figures.toml` in the repository lists `[[figure]]` entries: the Markdown `doc` that
shows a figure, its `text` with str.format placeholders, the committed JSON `source` the
values come from, the `command` that writes that file, and `values`, dotted paths into the
JSON (list indices allowed). The text formatted with the values must occur verbatim in the
doc, so a figure cannot drift from the run that produced it.
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "runs", "work", ".git", "node_modules", "__pycache__"}
REQUIRED = ("doc", "text", "source", "command", "values")


def registries(root: Path = ROOT) -> list[Path]:
    """Every figures.toml under `root`, outside virtual environments and run outputs."""
    return sorted(
        path
        for path in root.rglob("figures.toml")
        if not SKIP_DIRS.intersection(path.relative_to(root).parts[:-1])
    )


def entries(root: Path = ROOT) -> list[tuple[str, dict]]:
    found = []
    for registry in registries(root):
        with open(registry, "rb") as handle:
            figures = tomllib.load(handle).get("figure", [])
        name = registry.relative_to(root)
        found += [(f"{name}#{index + 1}", entry) for index, entry in enumerate(figures)]
    return found


def lookup(document, dotted: str, where: str):
    """The value at `dotted` ("a.b.3.c") in a JSON document; a missing key fails naming it.

    A key may itself hold dots ("--threshold 0.3 | source→target"): at each level the
    longest run of path parts that is a key of the object is taken.
    """
    value, parts = document, dotted.split(".")
    while parts:
        if isinstance(value, list) and parts[0].lstrip("-").isdigit():
            index = int(parts[0])
            if not -len(value) <= index < len(value):
                raise LookupError(f"{where}: no {parts[0]!r} on the path {dotted!r}")
            value, parts = value[index], parts[1:]
            continue
        if isinstance(value, dict):
            for n in range(len(parts), 0, -1):
                key = ".".join(parts[:n])
                if key in value:
                    value, parts = value[key], parts[n:]
                    break
            else:
                raise LookupError(f"{where}: no {parts[0]!r} on the path {dotted!r}")
            continue
        raise LookupError(f"{where}: no {parts[0]!r} on the path {dotted!r}")
    return value


def expected_text(entry: dict, label: str, root: Path = ROOT) -> str:
    """The entry's text formatted with its values, after checking the entry is complete."""
    missing = [key for key in REQUIRED if key not in entry]
    if missing:
        raise LookupError(f"{label}: missing {', '.join(missing)}")
    source = root / entry["source"]
    if not source.is_file():
        raise FileNotFoundError(f"{label}: results file {entry['source']} does not exist")
    document = json.loads(source.read_text(encoding="utf-8"))
    where = f"{label} ({entry['source']})"
    values = {name: lookup(document, path, where) for name, path in entry["values"].items()}
    used = {field for _, field, _, _ in string.Formatter().parse(entry["text"]) if field}
    if used != set(values):
        raise LookupError(f"{label}: placeholders {sorted(used)} but values {sorted(values)}")
    return entry["text"].format(**values)


def check(entry: dict, label: str, root: Path = ROOT) -> None:
    text = expected_text(entry, label, root)
    doc = root / entry["doc"]
    if not doc.is_file():
        raise FileNotFoundError(f"{label}: doc {entry['doc']} does not exist")
    if text not in doc.read_text(encoding="utf-8"):
        raise AssertionError(f"{label}: {text!r} is not in {entry['doc']}")


def test_docs_registry_exists_and_is_not_empty():
    assert ROOT / "docs" / "figures.toml" in registries()
    assert any(label.startswith("docs/") for label, _ in entries())


@pytest.mark.parametrize(("label", "entry"), entries(), ids=[label for label, _ in entries()])
def test_registered_figure_is_in_its_doc(label, entry):
    check(entry, label)


# The checker itself, on a small repository of its own --------------------------------------


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run.json").write_text(
        json.dumps({"test": {"bleu": 92.571}, "rows": [{"aer": 0.1}, {"aer": 0.0882}], "n": 1134})
    )
    (tmp_path / "README.md").write_text("BLEU 92.57 after 1,134 updates; AER 8.82 %.\n")
    return tmp_path


def _entry(**changes) -> dict:
    entry = {
        "doc": "README.md",
        "text": "BLEU {bleu:.2f} after {n:,} updates",
        "source": "results/run.json",
        "command": "make demo",
        "values": {"bleu": "test.bleu", "n": "n"},
    }
    return {**entry, **changes}


def test_checker_accepts_a_figure_that_matches(repo):
    check(_entry(), "t", repo)
    last = _entry(text="AER {aer:.2%}", values={"aer": "rows.-1.aer"})
    with pytest.raises(AssertionError, match="AER 8.82%"):  # the doc has "8.82 %", with a space
        check(last, "t", repo)


def test_checker_fails_when_the_doc_drifts(repo):
    (repo / "README.md").write_text("BLEU 92.58 after 1,134 updates\n")
    with pytest.raises(AssertionError, match="BLEU 92.57 after 1,134 updates"):
        check(_entry(), "t", repo)


def test_checker_names_a_missing_results_file(repo):
    with pytest.raises(FileNotFoundError, match="results/gone.json"):
        check(_entry(source="results/gone.json"), "t", repo)


def test_keys_with_dots_are_found(repo):
    rows = {"rows": {"--threshold 0.3 | mean": {"aer": 12.99}, "--threshold 0": {"aer": 1.0}}}
    assert lookup(rows, "rows.--threshold 0.3 | mean.aer", "t") == 12.99
    assert lookup(rows, "rows.--threshold 0.aer", "t") == 1.0
    with pytest.raises(LookupError, match=re.escape("no '5 | mean'")):
        lookup(rows, "rows.--threshold 0.5 | mean.aer", "t")


def test_checker_names_a_missing_key(repo):
    with pytest.raises(LookupError, match="'chrf'"):
        check(_entry(values={"bleu": "test.chrf", "n": "n"}), "t", repo)
    with pytest.raises(LookupError, match="'5'"):
        check(_entry(text="{bleu}", values={"bleu": "rows.5.aer"}), "t", repo)


def test_checker_refuses_an_incomplete_entry_or_unused_values(repo):
    incomplete = _entry()
    del incomplete["command"]
    with pytest.raises(LookupError, match="missing command"):
        check(incomplete, "t", repo)
    with pytest.raises(LookupError, match="placeholders"):
        check(_entry(text="BLEU {bleu:.2f}"), "t", repo)


def test_registries_are_found_in_subfolders_but_not_in_run_outputs(repo):
    for folder in ("docs", "bench", "runs", ".venv/lib"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "figures.toml").write_text("")
    found = [path.relative_to(repo).as_posix() for path in registries(repo)]
    assert found == ["bench/figures.toml", "docs/figures.toml"]


# The generated tables of docs/alignment-extraction.md, row by row ------------------------------------

ALIGNMENT = ROOT / "docs" / "results" / "alignment-extraction.json"


def test_every_alignment_table_row_matches_the_results_file():
    """`make align-grid` writes the tables and the JSON in one run: every row must agree."""
    results = json.loads(ALIGNMENT.read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "alignment-extraction.md").read_text(encoding="utf-8")
    assert len(results["rows"]) > 100
    for key, row in results["rows"].items():
        flags, kind = key.rsplit(" | ", 1)
        line = (
            f"| `{flags}` | {kind} | {row['aer']:.2f} | {row['precision']:.2f} | "
            f"{row['recall']:.2f} | {row['links']:,} |"
        )
        assert line in doc, line
    for name, row in results["others"].items():
        line = (
            f"| {name} | {row['aer']:.2f} | {row['precision']:.2f} | {row['recall']:.2f} | "
            f"{row['links']:,} |"
        )
        assert line in doc, line
