"""The data directory that `nmt prepare` writes and `nmt train` reads: its format, checked on load.

Layout (every name is relative to the directory, and prepare.json lists them):

    prepare.json                       format version, options, inputs, every count
    spm.model, spm.vocab               joint tokenizer (or spm.src.* and spm.tgt.* when separate)
    {train,dev,test}.{src,tgt}         cleaned text, one sentence per line
    {split}.{side}.ids.npy / .offsets.npy   token ids (see nmt_cli.data.ids)
    train.{unit}.align                 word links of the training pairs (nmt_cli.guide), added
                                       by `nmt train --guided-alignment`; not in prepare.json
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from nmt_cli.data.ids import TokenIds, ids_paths, read_token_ids
from nmt_cli.errors import ArtifactError

MANIFEST = "prepare.json"
FORMAT_NAME = "nmt-data"
FORMAT_VERSION = 1
SPLITS = ("train", "dev", "test")
SIDES = ("src", "tgt")
_REDO = "re-create it with `nmt prepare`"


def text_name(split: str, side: str) -> str:
    """The file name of a split's cleaned text, e.g. `train.src`."""
    return f"{split}.{side}"


def spm_prefix_name(side: str | None) -> str:
    """The SentencePiece model prefix: `spm` when joint (side None), else `spm.src`/`spm.tgt`."""
    return "spm" if side is None else f"spm.{side}"


def alignments_name(unit: str) -> str:
    """The file of the training pairs' word links over `unit` (word, char or piece), one Pharaoh
    line per pair, e.g. `train.word.align`. Computed once by the guided-alignment teacher and
    kept beside the token ids; prepare.json does not list it, so it changes neither the
    checks on load nor the fingerprint, and `nmt prepare --force` removes it with the rest.
    The char file is `train.char2.align`: char units once split every word into characters,
    and a `train.char.align` written then is not read."""
    return "train.char2.align" if unit == "char" else f"train.{unit}.align"


@dataclass(frozen=True)
class DataDir:
    """A checked data directory: its tokenizers, splits and fingerprint."""

    path: Path
    src_spm: Path  # SentencePiece model of the source side (the same file as tgt_spm when joint)
    tgt_spm: Path
    joint: bool
    src_lang: str | None
    tgt_lang: str | None
    src_vocab_size: int
    tgt_vocab_size: int
    fingerprint: str  # short hash of prepare.json and the tokenizer model(s)
    manifest: dict[str, Any] = field(repr=False, compare=False)  # prepare.json as loaded

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits this directory holds, in train/dev/test order."""
        return tuple(split for split in SPLITS if split in self.manifest["splits"])

    @property
    def lowercase(self) -> bool:
        """Whether `nmt prepare --lowercase` lowercased its text."""
        return bool(self.manifest.get("options", {}).get("lowercase"))

    def has_split(self, split: str) -> bool:
        """True when `split` (train, dev or test) was prepared."""
        return split in self.manifest["splits"]

    def unsegmented(self, side: str) -> bool:
        """Whether the training text of `side` is Chinese or Japanese written without spaces
        (`scripts.mostly_unsegmented` over its first lines)."""
        from nmt_cli.scripts import mostly_unsegmented

        with open(self.text("train", side), encoding="utf-8") as lines:
            return mostly_unsegmented(lines)

    def text(self, split: str, side: str) -> Path:
        """The cleaned text file of one side (src/tgt) of one split (train/dev/test)."""
        return self.path / self._entry(split)["text"][_check_side(side)]

    @functools.cached_property
    def dev_references(self) -> list[str]:
        """The dev split's target text (none without a dev split), read once; ArtifactError for
        a file that is damaged or cut short (fewer lines than the dev ids), so that `nmt train`
        fails at its start rather than at its first validation."""
        from nmt_cli.errors import InputError
        from nmt_cli.lines import read_lines

        if not self.has_split("dev"):
            return []
        path = self.text("dev", "tgt")
        fix = f"re-create {self.path} with `nmt prepare`"
        try:
            lines = list(read_lines(path))
        except InputError as exc:
            raise ArtifactError(f"{exc}; the data directory is damaged: {fix}") from None
        expected = len(self.ids("dev", "src"))
        if len(lines) != expected:
            raise ArtifactError(
                f"{path} has {len(lines):,} line{'s' * (len(lines) != 1)} but the dev split has {expected:,} sentences: "
                f"the data directory is damaged: {fix}"
            )
        return lines

    def ids(self, split: str, side: str) -> TokenIds:
        """The token ids of one side of one split, memory-mapped."""
        return read_token_ids(self.path / self._entry(split)["ids"][_check_side(side)])

    def _entry(self, split: str) -> dict[str, Any]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}: expected one of {SPLITS}")
        if not self.has_split(split):
            raise ArtifactError(
                f"{self.path} has no {split} split: prepare it with --{split}-src/--{split}-tgt "
                f"or --{split}-size"
            )
        return self.manifest["splits"][split]


def _check_side(side: str) -> str:
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}: expected one of {SIDES}")
    return side


def load_data_dir(path: Path) -> DataDir:
    """Open a data directory made by `nmt prepare`; ArtifactError naming the problem otherwise."""
    path = Path(path)
    manifest = _read_manifest(path)
    try:
        return _checked_data_dir(path, manifest)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(
            f"{path / MANIFEST} is malformed (bad or missing entry {exc}): {_REDO}"
        ) from None


def _checked_data_dir(path: Path, manifest: dict[str, Any]) -> DataDir:
    """Build the DataDir once every file the manifest names is inside `path` and present."""
    tokenizer = manifest["tokenizer"]
    src_spm = _inside(path, tokenizer["src"]["model"])
    tgt_spm = _inside(path, tokenizer["tgt"]["model"])
    for needed in _listed_files(path, manifest):
        if not needed.is_file():
            raise ArtifactError(f"{needed} is missing: the data directory is incomplete, {_REDO}")
    for prefix in _ids_prefixes(path, manifest):
        read_token_ids(prefix)  # memory-mapped, so cheap: a truncated file fails here, not later
    for side, model in (("src", src_spm), ("tgt", tgt_spm)):
        expected = tokenizer[side].get("model_sha256")  # (data prepared before it was kept: none)
        if expected and hashlib.sha256(model.read_bytes()).hexdigest() != expected:
            raise ArtifactError(
                f"{model} is not the tokenizer model this data directory was prepared with "
                "(its ids come from another): restore that file, or re-create the data "
                "directory with `nmt prepare`"
            )
    return DataDir(
        path=path,
        src_spm=src_spm,
        tgt_spm=tgt_spm,
        joint=bool(tokenizer["joint"]),
        src_lang=manifest.get("src_lang"),
        tgt_lang=manifest.get("tgt_lang"),
        src_vocab_size=int(tokenizer["src"]["vocab_size"]),
        tgt_vocab_size=int(tokenizer["tgt"]["vocab_size"]),
        fingerprint=_fingerprint(path / MANIFEST, src_spm, tgt_spm),
        manifest=manifest,
    )


def _read_manifest(path: Path) -> dict[str, Any]:
    """Parse prepare.json and check that it is ours and of the version we read."""
    if not path.exists():
        raise ArtifactError(
            f"data directory {path} does not exist: run `nmt prepare -o {path}` first"
        )
    if not path.is_dir():
        raise ArtifactError(
            f"{path} is a file, not a data directory: give the directory `nmt prepare -o` wrote"
        )
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise ArtifactError(
            f"{path} has no {MANIFEST}: it is not a data directory made by `nmt prepare` "
            f"(or one that was never finished): {_REDO}"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{manifest_path} is unreadable or corrupt ({exc}): {_REDO}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise ArtifactError(f"{manifest_path} is not an `nmt prepare` manifest: {_REDO}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(
            f"{manifest_path} has data format version {manifest.get('format_version')!r}, "
            f"this nmt reads version {FORMAT_VERSION}: {_REDO}"
        )
    for key in ("tokenizer", "splits"):
        if not isinstance(manifest.get(key), dict):
            raise ArtifactError(f"{manifest_path} has no {key!r} section: {_REDO}")
    return manifest


def _inside(root: Path, name: object) -> Path:
    """`root / name` for a plain file name; refuse anything that could leave `root`."""
    plain = (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and PurePosixPath(name).name == name
        and PureWindowsPath(name).name == name
    )
    if not plain:
        raise ArtifactError(
            f"{root / MANIFEST} names {name!r}, which is not a plain file name inside {root}: "
            f"refusing to read it; {_REDO}"
        )
    return root / name  # type: ignore[operator]


def _listed_files(path: Path, manifest: dict[str, Any]) -> list[Path]:
    """Every file prepare.json says the directory holds, each checked to stay inside it."""
    files = []
    for side in SIDES:
        entry = manifest["tokenizer"][side]
        files += [_inside(path, entry["model"]), _inside(path, entry["vocab"])]
    for split, entry in manifest["splits"].items():
        if split not in SPLITS:
            raise ArtifactError(f"{path / MANIFEST} lists an unknown split {split!r}: {_REDO}")
        for side in SIDES:
            files.append(_inside(path, entry["text"][side]))
            files.extend(ids_paths(_inside(path, entry["ids"][side])))
    return files


def _ids_prefixes(path: Path, manifest: dict[str, Any]) -> list[Path]:
    """The token-id prefix of every side of every split."""
    return [
        _inside(path, entry["ids"][side]) for entry in manifest["splits"].values() for side in SIDES
    ]


def _fingerprint(*files: Path) -> str:
    """A short content hash of the manifest and the tokenizer model(s)."""
    digest = hashlib.sha256()
    for file in dict.fromkeys(files):  # a joint model is hashed once
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]
