"""SentencePiece subword models: training them quietly and robustly, and using them.

Every model has the same special ids (PAD 0, UNK 1, BOS 2, EOS 3), so the rest of the code
can name them as constants.

Normalisation is `identity`: the text arrives NFC- and whitespace-normalised by the cleaner,
and SentencePiece's default NFKC would fold full-width punctuation ("，" "？" "！" → "," "?"
"!"), changing about 1 Chinese line in 5 (Tatoeba) so that decoded output no longer matches
the references; on Multi30k NFKC changes no line at all, so nothing is lost there.

Vocabulary fallback: a corpus too small for the requested vocabulary makes SentencePiece
refuse ("Vocabulary size too high (8000). Please set it to a value <= 1234."). We retry with
the largest size it names (and, should that fail too, with a soft limit), and report the size
actually used in `TrainedTokenizer.vocab_size`, so the caller can record it and warn.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.atomic import write_bytes, write_text
from nmt_cli.errors import ArtifactError, ConfigError, NmtError
from nmt_cli.specials import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmt_cli.threads import run_in_threads

MODEL_TYPES = ("unigram", "bpe")
MIN_VOCAB_SIZE = 8
# SentencePiece takes a 32-bit size and, given one near that limit, did not come back on a
# tiny corpus; NMT vocabularies are some thousands to a few hundred thousand pieces
MAX_VOCAB_SIZE = 1_000_000
# SentencePiece's advice for rich character sets (Chinese, Japanese) and for the others.
CJK_CHARACTER_COVERAGE = 0.9995
DEFAULT_CHARACTER_COVERAGE = 1.0
_TRAINING_SENTENCE_CAP = 2_000_000  # sampled (shuffled) beyond this: memory and time stay bounded
_TRAINING_THREADS = 2
_DROPPED_IDS = frozenset((PAD_ID, BOS_ID, EOS_ID))
_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_SMALL = re.compile(r"smaller than required_chars\. (\d+) vs (\d+)")


class Tokenizer:
    """A loaded SentencePiece model with nmt's special ids."""

    def __init__(self, model_path: Path) -> None:
        import sentencepiece as spm

        self.path = Path(model_path)
        if not self.path.is_file():
            what = "is not a file" if self.path.exists() else "does not exist"
            raise ArtifactError(
                f"tokenizer model {self.path} {what}: re-create it with `nmt prepare`"
            )
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(self.path))
        except (OSError, RuntimeError):
            raise ArtifactError(
                f"{self.path} is not a SentencePiece model (unreadable or corrupt): "
                "re-create it with `nmt prepare`"
            ) from None
        specials = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ArtifactError(
                f"{self.path} uses special ids pad/unk/bos/eos = {specials}, not (0, 1, 2, 3): "
                "re-create it with `nmt prepare`"
            )

    @property
    def vocab_size(self) -> int:
        """The number of pieces, special ones included."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """The piece ids of `text`, without BOS/EOS."""
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: list[str], num_threads: int = 2) -> list[list[int]]:
        """The piece ids of many texts at once, encoded by SentencePiece's C++ threads."""
        return self._sp.encode(texts, out_type=int, num_threads=num_threads)

    def encode_pieces(self, text: str) -> list[str]:
        """The pieces of `text` as strings (words start with `▁`)."""
        return self._sp.encode(text, out_type=str)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`, skipping PAD, BOS and EOS wherever they appear."""
        return self._sp.decode([int(i) for i in ids if int(i) not in _DROPPED_IDS])

    def id_to_piece(self, i: int) -> str:
        """The piece string of id `i`."""
        return self._sp.id_to_piece(int(i))

    def piece_to_id(self, piece: str) -> int:
        """The id of `piece`, UNK_ID when it is not in the vocabulary."""
        return self._sp.piece_to_id(piece)

    def vocab_listing(self) -> str:
        """Every piece and its score, one `piece<TAB>score` line each (SentencePiece's .vocab)."""
        sp = self._sp
        return "".join(
            f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(self.vocab_size)
        )


@dataclass(frozen=True)
class TrainedTokenizer:
    """What training produced: the files and the settings actually used."""

    model: Path
    vocab: Path
    vocab_size: int  # what the model has; smaller than requested after a fallback
    requested_vocab_size: int
    model_type: str
    character_coverage: float

    @property
    def fell_back(self) -> bool:
        """True when the corpus was too small for the requested vocabulary."""
        return self.vocab_size != self.requested_vocab_size

    def to_json(self) -> dict[str, object]:
        """File names (relative to the model's directory), settings and the model's SHA-256
        (a data directory's ids hold only with this model), for prepare.json."""
        import hashlib

        return {
            "model": self.model.name,
            "model_sha256": hashlib.sha256(self.model.read_bytes()).hexdigest(),
            "vocab": self.vocab.name,
            "vocab_size": self.vocab_size,
            "requested_vocab_size": self.requested_vocab_size,
            "vocab_fallback": self.fell_back,
            "model_type": self.model_type,
            "character_coverage": self.character_coverage,
        }


def auto_character_coverage(*sides: Iterable[str]) -> float:
    """0.9995 when any one language side is mostly (≥ 50 %) CJK or Hangul, else 1.0."""
    from nmt_cli.data.clean import rich_charset_share

    rich = any(rich_charset_share(side) >= 0.5 for side in sides)
    return CJK_CHARACTER_COVERAGE if rich else DEFAULT_CHARACTER_COVERAGE


def check_training_options(vocab_size: int, model_type: str, coverage: float | None) -> None:
    """Raise ConfigError for values SentencePiece would reject less clearly."""
    if vocab_size < MIN_VOCAB_SIZE:
        raise ConfigError(f"--vocab-size {vocab_size} is too small: use at least {MIN_VOCAB_SIZE}")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ConfigError(
            f"--vocab-size {vocab_size:,} is too large: use at most {MAX_VOCAB_SIZE:,} (8,000 to "
            "64,000 pieces is usual)"
        )
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"--model-type {model_type!r} is unknown: use {' or '.join(MODEL_TYPES)}")
    if coverage is not None and not 0.9 <= coverage <= 1.0:
        raise ConfigError(f"--character-coverage {coverage} is out of range: use 0.9 to 1.0")


_TRAINING_LINE_BYTES = 1 << 20  # longer lines (a whole book on one line) stay out of training


def train_tokenizer(
    sentences: Iterable[str] | Path | Sequence[Path],
    model_prefix: Path,
    vocab_size: int,
    model_type: str = "unigram",
    character_coverage: float | None = None,
    seed: int = 1,
) -> TrainedTokenizer:
    """Train a SentencePiece model on sentences (or text files), falling back to a smaller vocab."""
    check_training_options(vocab_size, model_type, character_coverage)
    files = _as_files(sentences)
    texts = None if files is not None else _reiterable(sentences)  # type: ignore[arg-type]
    if character_coverage is None:
        character_coverage = auto_character_coverage(_sample_lines(files) if files else texts)
    settings = _trainer_settings(model_type, character_coverage, files)
    proto = _train_with_fallback(settings, texts, vocab_size, seed)
    model, vocab = Path(f"{model_prefix}.model"), Path(f"{model_prefix}.vocab")
    write_bytes(model, proto)
    tokenizer = Tokenizer(model)
    write_text(vocab, tokenizer.vocab_listing())
    return TrainedTokenizer(
        model=model,
        vocab=vocab,
        vocab_size=tokenizer.vocab_size,
        requested_vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
    )


def _as_files(sentences: Iterable[str] | Path | Sequence[Path]) -> list[Path] | None:
    """The training files when `sentences` names files, None when it holds sentences."""
    if isinstance(sentences, Path):
        return [sentences]
    if isinstance(sentences, list | tuple) and sentences and isinstance(sentences[0], Path):
        return list(sentences)  # type: ignore[arg-type]
    return None


def _reiterable(sentences: Iterable[str]) -> Iterable[str]:
    """`sentences` itself when it can be iterated again (a list, a sample read from disk),
    else a list of them: a retry with a smaller vocabulary needs them a second time."""
    return list(sentences) if iter(sentences) is sentences else sentences


def _sample_lines(files: list[Path], per_file: int = 20_000) -> list[str]:
    """The first lines of each training file, enough to judge the character set."""
    sample: list[str] = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            sample.extend(line for _, line in zip(range(per_file), handle, strict=False))
    return sample


def _trainer_settings(model_type: str, coverage: float, files: list[Path] | None) -> dict:
    """SentencePieceTrainer keywords shared by every attempt."""
    settings = dict(
        model_type=model_type,
        character_coverage=coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        normalization_rule_name="identity",  # decode(encode(text)) == text, see above
        minloglevel=2,  # the C++ trainer otherwise logs pages of INFO lines to stderr
        num_threads=_TRAINING_THREADS,
        input_sentence_size=_TRAINING_SENTENCE_CAP,
        shuffle_input_sentence=True,
        # SentencePiece leaves lines over 4,192 bytes out of training without a word; with
        # --max-len 0 such lines are wanted (they are encoded, and their pieces should exist).
        max_sentence_length=_TRAINING_LINE_BYTES,
    )
    if files is not None:
        if any("," in str(path) for path in files):
            # SentencePiece splits `input` at commas; such a path would be read as two files.
            raise ConfigError(f"cannot train on {files}: SentencePiece file names may not hold ','")
        settings["input"] = ",".join(str(path) for path in files)
    return settings


def _train_with_fallback(
    settings: dict, texts: Iterable[str] | None, vocab_size: int, seed: int
) -> bytes:
    """Train, retrying with the vocabulary size SentencePiece says it can reach."""
    for _ in range(3):
        try:
            return _train_once(settings, texts, vocab_size, seed, hard_limit=True)
        except RuntimeError as exc:
            vocab_size = _smaller_vocab_or_raise(str(exc), vocab_size)
    return _train_once(settings, texts, vocab_size, seed, hard_limit=False)


def _train_once(
    settings: dict, texts: Iterable[str] | None, vocab_size: int, seed: int, hard_limit: bool
) -> bytes:
    """One training run; the model comes back as bytes, so no temporary path ends up inside it."""
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)
    extra = {} if texts is None else {"sentence_iterator": iter(texts)}
    writer = io.BytesIO()
    try:
        # The abandoned thread of an interrupted training writes only to memory.
        run_in_threads(
            [
                lambda stop: spm.SentencePieceTrainer.train(
                    **settings,
                    **extra,
                    model_writer=writer,
                    vocab_size=vocab_size,
                    hard_vocab_limit=hard_limit,
                )
            ],
            wait_on_interrupt=False,
        )
    except RuntimeError as exc:
        if hard_limit:
            raise
        raise NmtError(f"SentencePiece training failed: {_short(exc)}") from None
    return writer.getvalue()


def _smaller_vocab_or_raise(message: str, vocab_size: int) -> int:
    """The size to retry with after a 'too high' refusal; ConfigError for a vocab too small."""
    if too_high := _TOO_HIGH.search(message):
        return int(too_high.group(2))
    if too_small := _TOO_SMALL.search(message):
        needed = int(too_small.group(2))
        raise ConfigError(
            f"--vocab-size {vocab_size} is too small: the training text needs at least {needed} "
            "pieces for its characters and special symbols: raise --vocab-size or lower "
            "--character-coverage"
        )
    raise NmtError(f"SentencePiece training failed: {_short(message)}")


def _short(message: object) -> str:
    """SentencePiece's message without its C++ source location."""
    return re.sub(r"^.*?\) \[.*?\] ", "", str(message))
