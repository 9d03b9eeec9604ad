"""Typed configuration: defaults ← TOML config file ← command-line flags, merged in one place.

The defaults suit a small corpus on a laptop CPU. Every key has a one-line comment; an unknown
key is an error that lists the valid ones; the resolved config is saved with the model.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from nmt_cli.device import check_device, check_threads
from nmt_cli.errors import ConfigError

ATTENTIONS = ("dot", "general", "additive", "none")
DECODER_STYLES = ("luong", "bahdanau")
CELLS = ("gru", "lstm")


@dataclass(frozen=True)
class ModelConfig:
    """The architecture; saved inside every checkpoint so inference rebuilds the model from it."""

    cell: str = "gru"  # recurrent cell of encoder and decoder: gru or lstm
    emb_size: int = 256  # embedding size (source and target)
    hidden_size: int = (
        256  # encoder hidden size per direction; the decoder gets 2x when bidirectional
    )
    layers: int = 1  # RNN layers in encoder and decoder
    bidirectional: bool = True  # bidirectional encoder
    attention: str = "general"  # score function: dot, general, additive, none
    decoder_style: str = "luong"  # luong (attend after the RNN step) or bahdanau (before)
    input_feed: bool = False  # luong: feed the previous attentional vector into the next step
    dropout: float = 0.2  # dropout on embeddings and RNN outputs
    tie_embeddings: bool = (
        True  # output layer shares the target embedding matrix (needs emb == output size)
    )
    share_embeddings: bool = True  # one embedding for source and target (joint vocabulary only)
    align_shift: int = 0  # the attention of step t + align_shift aligns target piece t (guided)
    src_vocab_size: int = 0  # filled in from the data directory
    tgt_vocab_size: int = 0  # filled in from the data directory

    @property
    def decoder_size(self) -> int:
        return self.hidden_size * (2 if self.bidirectional else 1)


@dataclass(frozen=True)
class TrainConfig:
    """How to train: batching, optimisation, validation and stopping."""

    batch_tokens: int = 3000  # target tokens per batch (sentences of similar length grouped)
    max_len: int = 100  # skip training pairs with more pieces than this on either side
    lr: float = 0.002  # Adam learning rate at the end of warm-up
    warmup_steps: int = 200  # linear warm-up steps
    schedule: str = "plateau"  # plateau (halve when dev BLEU stalls), inverse_sqrt, or constant
    decay_factor: float = 0.5  # plateau: multiply lr by this when dev BLEU stalls
    min_lr: float = 1e-5  # plateau: never go below this
    clip_norm: float = 1.0  # gradient-norm clipping (0 disables)
    normalization: str = "tokens"  # loss per target token, or per sentence (OpenNMT-py sents)
    label_smoothing: float = 0.1  # label smoothing of the cross-entropy
    max_steps: int = 0  # stop after this many updates (0: no limit)
    max_epochs: int = 30  # stop after this many epochs (0: no limit)
    max_time: float = 0.0  # stop after this many seconds of training (0: no limit)
    valid_every: int = 500  # validate every N updates (and at each epoch's end)
    valid_sentences: int = 500  # dev sentences decoded for BLEU at each validation (0: all)
    patience: int = 8  # stop after this many validations without a better dev BLEU (0: never)
    log_every: int = 20  # report progress every N updates
    keep_checkpoints: int = 0  # weights of the last N validations (nmt average); 0: none
    seed: int = 1234  # seeds batching, initialisation and dropout
    device: str = "auto"  # auto (cuda when available), cpu or cuda
    threads: int = 0  # CPU threads for torch (0: all cores)
    amp: bool = True  # mixed precision on CUDA (bf16 where supported, else fp16); false: float32
    bf16: bool = False  # bfloat16 mixed precision on a CPU with AMX or AVX-512 BF16 (and on CUDA)
    guided_alignment: float = 0.0  # weight of the attention's cross-entropy to word links (0: off)
    alignments: str = ""  # Pharaoh word links of the training pairs ("": computed by the teacher)
    align_unit: str = "word"  # units of those links: word, char (Chinese/Japanese) or piece


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> Config:
        _check_keys(data, {"model", "train"}, source)
        model = _build(ModelConfig, data.get("model", {}), f"{source}: [model]")
        train = _build(TrainConfig, data.get("train", {}), f"{source}: [train]")
        return validate(cls(model=model, train=train))


def _check_keys(
    data: dict[str, Any], valid: set[str], where: str, elsewhere: dict[str, str] | None = None
) -> None:
    """Refuse keys outside `valid`, with a close match or the section (`elsewhere`: key →
    section) where the key belongs. Keys nmt train derives are valid but not listed."""
    unknown = sorted(set(data) - valid)
    if unknown:
        import difflib

        elsewhere = {k: v for k, v in (elsewhere or {}).items() if k not in _DERIVED}
        hints = [f"{key} belongs in [{elsewhere[key]}]" for key in unknown if key in elsewhere]
        others = [key for key in unknown if key not in elsewhere]
        close = [m for key in others for m in difflib.get_close_matches(key, valid, n=1)]
        hints += [f"did you mean {', '.join(close)}?"] if close else []
        guess = f" ({'; '.join(hints)})" if hints else ""
        raise ConfigError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {where}"
            f"{guess}; valid keys: {', '.join(sorted(valid - _DERIVED))}"
        )


def _build(cls: type, values: dict[str, Any], where: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a table of keys, got {type(values).__name__}")
    other, section = (TrainConfig, "train") if cls is ModelConfig else (ModelConfig, "model")
    elsewhere = {f.name: section for f in fields(other)}
    _check_keys(values, {f.name for f in fields(cls)}, where, elsewhere)
    defaults = cls()
    typed = {}
    for name, value in values.items():
        expected = type(getattr(defaults, name))
        if name == "max_time" and isinstance(value, str):  # "20m", as --max-time takes it
            try:
                value = parse_duration(value)
            except ConfigError:
                raise ConfigError(
                    f"{where} max_time must be seconds or look like 90s, 20m or 1.5h, got {value!r}"
                ) from None
        typed[name] = _coerce(value, expected, f"{where} {name}")
    return dataclasses.replace(defaults, **typed)


def _coerce(value: Any, expected: type, where: str) -> Any:
    if expected is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be true or false, got {_as_toml(value)}")
    if expected is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if expected is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if expected is str and isinstance(value, str):
        return value
    kind = {int: "a whole number", float: "a number", str: "a quoted string"}[expected]
    raise ConfigError(f"{where} must be {kind}, got {_as_toml(value)}")


def _as_toml(value: Any) -> str:
    """A value as a TOML file spells it (true, not Python's True)."""
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


MAX_SEED = 2**32 - 1  # the largest seed every generator takes (numpy's, SentencePiece's)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(config: Config) -> Config:
    """Reject values out of range with a message that names the option and the valid range."""
    m, t = config.model, config.train
    for flag, value, valid in (
        ("--cell", m.cell, CELLS),
        ("--attention", m.attention, ATTENTIONS),
        ("--decoder-style", m.decoder_style, DECODER_STYLES),
    ):
        _require(value in valid, f"{flag} must be one of {', '.join(valid)}, got {value!r}")
    for name, top in (("emb_size", 4096), ("hidden_size", 4096), ("layers", 16)):
        value = getattr(m, name)
        _require(1 <= value <= top, f"--{name.replace('_', '-')} must be in 1..{top}, got {value}")
    for flag, value in (("--dropout", m.dropout), ("--label-smoothing", t.label_smoothing)):
        _require(0.0 <= value < 1.0, f"{flag} must be in [0, 1), got {value}")
    _require(0.0 < t.lr <= 10.0, f"--lr must be in (0, 10], got {t.lr}")
    _require(
        1 <= t.batch_tokens <= 10_000_000,
        f"--batch-tokens must be in 1..10000000, got {t.batch_tokens}",
    )
    _require(2 <= t.max_len <= 100_000, f"--max-len must be in 2..100000, got {t.max_len}")
    _require(0 <= t.seed <= MAX_SEED, f"--seed must be in 0..{MAX_SEED}, got {t.seed}")
    _require(
        t.schedule in ("plateau", "inverse_sqrt", "constant"),
        f"--schedule must be plateau, inverse_sqrt or constant, got {t.schedule!r}",
    )
    _require(
        t.normalization in ("tokens", "sentences"),
        f"normalization must be tokens or sentences, got {t.normalization!r}",
    )
    for name in (
        "max_steps",
        "max_epochs",
        "warmup_steps",
        "patience",
        "valid_sentences",
        "keep_checkpoints",
    ):
        value = getattr(t, name)
        _require(0 <= value <= 10**9, f"--{name.replace('_', '-')} must be ≥ 0, got {value}")
    for name in ("valid_every", "log_every"):
        value = getattr(t, name)
        _require(value >= 1, f"--{name.replace('_', '-')} must be ≥ 1, got {value}")
    _require(0.0 < t.decay_factor <= 1.0, f"decay_factor must be in (0, 1], got {t.decay_factor}")
    _require(
        0.0 <= t.min_lr <= t.lr,
        f"min_lr must be in [0, lr], got {t.min_lr:g} with lr {t.lr:g} (min_lr is the floor of "
        "the plateau schedule): lower min_lr ([train] of a --config file) or raise lr (--lr)",
    )
    _require(
        0.0 <= t.clip_norm < float("inf"),
        f"clip_norm must be a finite number ≥ 0, got {t.clip_norm}",
    )
    _require(t.max_time >= 0, f"--max-time must be ≥ 0, got {t.max_time}")
    _require(
        math.isfinite(t.guided_alignment) and t.guided_alignment >= 0,
        f"--guided-alignment must be a finite weight ≥ 0 (0: off), got {t.guided_alignment}",
    )
    _require(
        not t.guided_alignment or m.attention != "none",
        "--guided-alignment trains the attention, and --attention none has none: "
        "choose dot, general or additive, or drop --guided-alignment",
    )
    if t.align_unit != "word":  # (alignment is not imported by plain translation)
        from nmt_cli.alignment import UNITS

        _require(
            t.align_unit in UNITS,
            f"--align-unit must be one of {', '.join(UNITS)}, got {t.align_unit!r}",
        )
    check_threads(t.threads)
    check_device(t.device)
    return config


def load_toml(path: Path) -> dict[str, Any]:
    from nmt_cli.lines import check_regular, stdin_not_read

    check_regular(path, "config file ")
    try:
        with open(path, "rb") as handle:
            # a UTF-8 BOM (Windows editors write one) is no part of TOML: dropped, as in text
            return tomllib.loads(handle.read().removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except FileNotFoundError:
        if str(path) == "-":
            raise stdin_not_read("the config file", pipes=False) from None
        raise ConfigError(
            f"config file {path} does not exist: check the path or drop --config"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory; give a .toml file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


_DERIVED = frozenset({"src_vocab_size", "tgt_vocab_size", "align_shift"})  # set by nmt train


def _resolve(
    config_file: Path | None,
    overrides: dict[str, dict[str, Any]],
    base: dict[str, Any] | None = None,
) -> Config:
    data: dict[str, Any] = load_toml(config_file) if config_file else dict(base or {})
    source = str(config_file) if config_file else "config"
    belongs = {f.name: "model" for f in fields(ModelConfig)}  # a key outside any section
    belongs |= {f.name: "train" for f in fields(TrainConfig)}
    _check_keys(data, {"model", "train"}, source, belongs)
    for section in ("model", "train"):
        if not isinstance(data.get(section, {}), dict):
            raise ConfigError(
                f"{source}: [{section}] must be a table of keys, e.g. [{section}] then key = value lines"
            )
    derived = sorted(_DERIVED & set(data.get("model", {}))) if config_file else []
    if derived:  # a saved config.json (resume) holds them; a user's file may not
        raise ConfigError(
            f"{source}: [model] sets {', '.join(derived)}, which nmt train derives (the "
            "vocabulary sizes from the data directory, align_shift from the decoder style under "
            f"guided alignment): remove {'it' if len(derived) == 1 else 'them'}"
        )
    if config_file is not None:  # every value of the file of its type, a flag over it or not
        for section, cls in (("model", ModelConfig), ("train", TrainConfig)):
            _build(cls, data.get(section, {}), f"{source}: [{section}]")
    from_file = {section: set(data.get(section, {})) for section in ("model", "train")}
    for section, values in overrides.items():
        merged = dict(data.get(section, {}))
        given = {k: v for k, v in values.items() if v is not None}
        merged.update(given)
        data[section] = merged
        from_file[section] = from_file.get(section, set()) - set(given)
    try:
        return Config.from_dict(data, source)
    except ConfigError as error:
        if config_file is None:
            raise
        raise _named_in_file(error, config_file, from_file) from None


def resolve(
    config_file: Path | None,
    overrides: dict[str, dict[str, Any]],
    base: dict[str, Any] | None = None,
) -> Config:
    """Merge defaults ← config file (or a saved config) ← flags ({section: {key: value}}; None = unset)."""
    try:
        return _resolve(config_file, overrides, base)
    except ConfigError as error:
        if config_file is None:
            raise
        raise _with_line(error, config_file) from None


# "model.toml: [model] emb_size must …", "unknown key dropout in model.toml: [train] …"
_ABOUT_KEY = (
    re.compile(r"^(?P<path>.+?): \[(?P<section>model|train)\] (?:sets )?(?P<key>[a-z0-9_]+)\b"),
    re.compile(r"^unknown keys? (?P<key>[^\s,]+)(?:,.*?)? in (?P<path>.+?): \[(?P<section>\w+)\]"),
)


def _with_line(error: ConfigError, path: Path) -> ConfigError:
    """`error` about a key of the config file at `path`, with the line that sets the key."""
    message = str(error)
    for pattern in _ABOUT_KEY:
        match = pattern.match(message)
        if match and match["path"] == str(path):
            number = _key_line(path, match["section"], match["key"])
            if number is not None:
                at = match.start("path"), match.end("path")
                return ConfigError(f"{message[: at[1]]} line {number}{message[at[1] :]}")
    return error


def _key_line(path: Path, section: str, key: str) -> int | None:
    """The line of `path` that sets `key` in [section] (None where it cannot be told)."""
    header = re.compile(r"^\s*\[\s*([A-Za-z0-9_\-]+)\s*\]")
    setting = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    current = None
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    inside = None  # the quotes of a multi-line string being read, whose lines set nothing
    for number, line in enumerate(text.split("\n"), start=1):  # TOML ends lines at \n only
        if inside is not None:
            inside = None if line.count(inside) % 2 else inside
        elif match := header.match(line):
            current = match[1]
        elif current == section and setting.match(line):
            return number
        else:
            opened = [quotes for quotes in ('"""', "'''") if line.count(quotes) % 2]
            inside = opened[0] if opened else None
    return None


_CHECKED = re.compile(r"(?:--)?([a-z][a-z0-9_-]*) must ")


def _named_in_file(error: ConfigError, path: Path, from_file: dict[str, set[str]]) -> ConfigError:
    """`error` about a value that came from the config file (not a flag) as the file's key:
    "model.toml: [train] lr must be in (0, 10], got -1.0" rather than "--lr must …"."""
    message = str(error)
    match = _CHECKED.match(message)
    if match:
        key = match.group(1).replace("-", "_")
        section = next((name for name, keys in from_file.items() if key in keys), None)
        if section is not None:
            return ConfigError(f"{path}: [{section}] {key} {message[match.end(1) :].lstrip()}")
    return error


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_duration(text: str) -> float:
    """Parse '90', '90s', '20m', '1.5h' into seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"--max-time must be seconds or look like 90s, 20m or 1.5h, got {text!r}")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return float(match.group(1)) * scale
