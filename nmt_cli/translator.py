"""Translation with a trained model: the front door over loading, search and detokenisation.

`Translator` wraps a model directory (`checkpoint.load_model`), or several as an ensemble,
and turns lines of text into `Translation`s, streaming chunk by chunk; the search over token
ids is `decoding.decode_ids`.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from nmt_cli import checkpoint, decoding
from nmt_cli.batching import collate
from nmt_cli.config import Config
from nmt_cli.data.clean import normalize
from nmt_cli.decoding import SearchOptions, pieces_text
from nmt_cli.errors import ArtifactError, ConfigError
from nmt_cli.model.seq2seq import OutputLayer, Seq2Seq
from nmt_cli.scripts import join_unsegmented
from nmt_cli.search import Hypothesis
from nmt_cli.shortlist import Shortlist
from nmt_cli.specials import EOS_ID, UNK_ID

if TYPE_CHECKING:
    from nmt_cli.data.tokenizer import Tokenizer

__all__ = ["SearchOptions", "Translation", "TranslationStream", "Translator"]


@dataclass
class Translation:
    """One translated line: the text, its pieces, score, and attention over the source pieces."""

    source: str
    text: str
    src_pieces: list[str] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    score: float = 0.0
    # (len(pieces) + 1, len(src_pieces)): a row per step incl. EOS (row t the attention that
    # aligns piece t: of step t, or of step t + align_shift for a guided model)
    attention: np.ndarray | None = None
    alternatives: list[tuple[str, float]] = field(default_factory=list)  # n-best, best first
    truncated: bool = False  # the source was longer than the model's limit and was cut
    cut: bool = False  # the output reached the search's length limit (see `output_limits`)


SALIENCY_CHUNK = 32  # target steps whose saliency one backward pass computes


MAX_LEN_FACTOR = 10  # --max-len at most this many times the training length limit


@dataclass(eq=False)
class Translator:
    """A loaded model directory: model, configuration and tokenizers."""

    model: Seq2Seq
    config: Config
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    device: torch.device
    model_dir: Path
    shortlist: Shortlist | None = None  # see `load(shortlist=True)`
    output: OutputLayer | None = None  # the output layer the shortlist restricts
    partners: list[Translator] = field(default_factory=list)  # the rest of an ensemble
    meta: dict = field(default_factory=dict)  # what training recorded (model.pt's "meta")

    @property
    def unsegmented(self) -> tuple[bool | None, bool | None]:
        """Whether the model's source and target training text were written without spaces
        (Chinese, Japanese); None for a model trained before nmt recorded it."""
        return self.meta.get("src_unsegmented"), self.meta.get("tgt_unsegmented")

    def text_form(self, line: str) -> str:
        """A line as the model's training text was written: normalised as `nmt prepare`
        cleans it (NFC; tabs, no-break spaces and other whitespace runs one space), and
        lowercased when its data was prepared with --lowercase."""
        text = normalize(line)
        return text.lower() if self.meta.get("lowercase") else text

    def _text(self, pieces: list[str]) -> str:
        """A translation's text; for a target written without spaces, without the stray
        spaces a word-starting piece leaves between two of its characters."""
        text = pieces_text(pieces)
        return join_unsegmented(text) if self.unsegmented[1] and not self._word_guided else text

    @property
    def _word_guided(self) -> bool:
        """Trained to align whitespace words: its links count the words its pieces make, so
        its text keeps them (`nmt train` warns about word units over such text)."""
        trained = self.config.train
        return bool(trained.guided_alignment) and trained.align_unit == "word"

    @property
    def align_shift(self) -> int:
        """How many steps after predicting target piece t the model's attention aligns it
        (0 unless trained with guided alignment; see `input_step_offset`)."""
        return self.model.config.align_shift

    @property
    def max_source_pieces(self) -> int:
        return self.config.train.max_len

    @property
    def max_target_pieces(self) -> int:
        """The longest output `--max-len` may ask for, and the most target pieces aligned."""
        return MAX_LEN_FACTOR * self.config.train.max_len

    @classmethod
    def load(
        cls,
        model_dir: Path,
        device: str = "auto",
        quantize: bool = False,
        threads: int = 0,
        shortlist: bool | None = False,
        partners: Sequence[Path] = (),
        bf16: bool = False,
    ) -> Translator:
        """Load a model directory; with `partners`, an ensemble of it and those (same target
        vocabulary), each reading the source with its own tokenizer. `shortlist` None: as the
        model's training found (`checkpoint.shortlist_by_default`), on a CPU and for one model."""
        from nmt_cli.data.tokenizer import Tokenizer  # sentencepiece: imported when used

        if partners and shortlist:
            raise ConfigError(
                "--shortlist works with one model only: drop --shortlist or give one -m"
            )

        loaded = checkpoint.load_model(
            model_dir, device, quantize=quantize, threads=threads, bf16=bf16
        )
        model_dir, config = loaded.model_dir, loaded.config
        src_tok = Tokenizer(model_dir / checkpoint.SRC_SPM)
        tgt_tok = Tokenizer(model_dir / checkpoint.TGT_SPM)
        for tokenizer, name, size in (
            (src_tok, checkpoint.SRC_SPM, config.model.src_vocab_size),
            (tgt_tok, checkpoint.TGT_SPM, config.model.tgt_vocab_size),
        ):
            if tokenizer.vocab_size != size:
                raise ArtifactError(
                    f"{model_dir / name} has {tokenizer.vocab_size:,} pieces but the model "
                    f"was trained with {size:,}: it is another model's tokenizer; copy the "
                    "model directory again, or retrain"
                )
        translator = cls(loaded.model, config, src_tok, tgt_tok, loaded.device, model_dir)
        translator.meta = loaded.meta
        for other in partners:
            _check_same_target(model_dir, Path(other))
            partner = cls.load(other, device, quantize, threads, bf16=bf16)
            _check_same_direction(translator, partner)
            translator.partners.append(partner)
        return translator.use_shortlist(shortlist)

    def use_shortlist(self, shortlist: bool | None) -> Translator:
        """Search with the model's shortlist (True), without (False), or as its training found
        (None: `checkpoint.shortlist_by_default`, on a CPU and for one model)."""
        if shortlist is None:
            shortlist = (
                not self.partners
                and self.device.type == "cpu"
                and checkpoint.shortlist_by_default(self.model_dir, self.meta)
            )
        self.shortlist, self.output = None, None
        if shortlist:
            vocab, path = self.config.model, self.model_dir / checkpoint.SHORTLIST_FILE
            self.shortlist = Shortlist.load(path).check(
                vocab.src_vocab_size, vocab.tgt_vocab_size, path
            )
            self.output = OutputLayer.of(self.model.generator)
        return self

    def check(self, options: SearchOptions) -> SearchOptions:
        """`options` if this model can search with them (ConfigError, exit 2, if not): a beam
        wider than the target vocabulary holds no more hypotheses, only more memory."""
        options.check()
        vocab = self.config.model.tgt_vocab_size
        if options.beam_size > vocab:
            raise ConfigError(
                f"--beam must be at most the target vocabulary of {vocab:,} pieces, got "
                f"{options.beam_size}"
            )
        longest = self.max_target_pieces
        if options.max_len > longest:
            raise ConfigError(
                f"--max-len must be at most {longest:,} pieces ({MAX_LEN_FACTOR}× the longest "
                f"training sentence, {self.config.train.max_len}), got {options.max_len:,}: "
                "a sentence whose output loops (and every one under --exact-stop) runs up to that limit"
            )
        return options

    def translate_lines(
        self,
        lines: Iterable[str],
        options: SearchOptions,
        chunk_size: int = 512,
        replace_unk: bool = False,
        with_attention: bool = False,
    ) -> Iterator[Translation]:
        """Translate lines in chunks (memory stays flat), yielding one Translation per line, in order."""
        self.check(options)
        iterator = iter(lines)
        while chunk := list(itertools.islice(iterator, chunk_size)):
            yield from self.translate_chunk(chunk, options, replace_unk, with_attention)

    def translate_chunk(
        self,
        lines: list[str],
        options: SearchOptions,
        replace_unk: bool = False,
        with_attention: bool = False,
    ) -> list[Translation]:
        encoded = [self._encode_source(line) for line in lines]
        own = [[p._encode_source(line)[0] for line in lines] for p in self.partners]
        # A source repeated within the chunk is decoded once: the search does not depend on
        # the batch it runs in, so every copy gets the same translation.
        slot: dict[tuple[bytes, ...], int] = {}
        unique: list[int] = []  # the first line of each distinct source
        todo: list[tuple[int, int]] = []
        for i, (ids, _) in enumerate(encoded):
            if len(ids):
                key = (ids.tobytes(), *(ids_of[i].tobytes() for ids_of in own))
                if key not in slot:
                    slot[key] = len(unique)
                    unique.append(i)
                todo.append((i, slot[key]))
        nbests = decoding.decode_ids(
            self.model,
            [encoded[i][0] for i in unique],
            self.device,
            options,
            shortlist=self.shortlist,
            with_attention=with_attention or replace_unk,
            output=self.output,
            partners=[
                (p.model, [ids_of[i] for i in unique])
                for p, ids_of in zip(self.partners, own, strict=True)
            ],
        )
        results = [
            Translation(source=line, text="", truncated=encoded[i][1])
            for i, line in enumerate(lines)
        ]
        lengths = torch.tensor([len(ids) for ids, _ in encoded], dtype=torch.long)
        limits = decoding.output_limits(lengths, options).tolist()
        for i, k in todo:
            results[i] = self._finish(lines[i], encoded[i], nbests[k], replace_unk, with_attention)
            results[i].cut = len(nbests[k][0].tokens) >= limits[i]
        return results

    def stream(self, options: SearchOptions, with_attention: bool = False) -> TranslationStream:
        """A running search that lines join at any step and leave once translated (`nmt serve`)."""
        return TranslationStream(self, options, with_attention)

    def _encode_source(self, line: str) -> tuple[np.ndarray, bool]:
        """The line's source ids, cut to the model's limit, and whether they were cut. The line
        is first normalised as `nmt prepare` cleans training text (NFC; tabs, no-break spaces
        and other whitespace runs one space): the model has seen no other whitespace, and a
        word index (`--align`) counts the words `str.split` finds."""
        ids = self.src_tokenizer.encode(self.text_form(line))
        truncated = len(ids) > self.max_source_pieces
        return np.asarray(ids[: self.max_source_pieces], dtype=np.int64), truncated

    def _finish(
        self,
        line: str,
        encoded: tuple[np.ndarray, bool],
        nbest: list[Hypothesis],
        replace_unk: bool,
        with_attention: bool,
    ) -> Translation:
        src_ids, truncated = encoded
        src_pieces = [self.src_tokenizer.id_to_piece(int(i)) for i in src_ids]
        best = nbest[0]
        attention = None
        if best.attention is not None:  # rows span the padded batch: keep this line's pieces
            attention = best.attention[:, : len(src_ids)].numpy()
            if self.align_shift > 1:  # the last piece aligns after the search's last step
                tokens = np.asarray(best.tokens, dtype=np.int64)
                attention = self._forced_rows(src_ids, tokens, self.align_shift - 1)
            if self.align_shift:  # row t: the step that aligns piece t (guided)
                from nmt_cli.alignment import shift_rows

                attention = shift_rows(attention, self.align_shift)[: len(best.tokens) + 1]
        pieces = self._pieces(best, src_pieces, attention if replace_unk else None)
        alternatives = [(self._text(self._pieces(h, src_pieces, None)), h.score) for h in nbest]
        return Translation(
            source=line,
            text=self._text(pieces),
            src_pieces=src_pieces,
            pieces=pieces,
            score=best.score,
            attention=attention if with_attention else None,
            alternatives=alternatives,
            truncated=truncated,
        )

    def _pieces(
        self, hyp: Hypothesis, src_pieces: list[str], attention: np.ndarray | None
    ) -> list[str]:
        pieces = [self.tgt_tokenizer.id_to_piece(t) for t in hyp.tokens]
        if attention is None or not src_pieces:
            return pieces
        # Luong et al. 2015: an unknown word is replaced by the source word attended to most.
        for step, token in enumerate(hyp.tokens):
            if token == UNK_ID:
                pieces[step] = src_pieces[int(attention[step].argmax())]
        return pieces

    def _forced_ids(self, source: str, target: str) -> tuple[np.ndarray, np.ndarray]:
        """Both sides' ids, each normalised first (see `_encode_source`), the source cut to the
        pieces the model reads (`max_source_pieces`), the target to the longest output it may
        write (`max_target_pieces`: a pasted document is not aligned piece by piece)."""
        src_ids = self.src_tokenizer.encode(self.text_form(source))[: self.max_source_pieces]
        tgt_ids = self.tgt_tokenizer.encode(self.text_form(target))[: self.max_target_pieces]
        return np.asarray(src_ids, dtype=np.int64), np.asarray(tgt_ids, dtype=np.int64)

    def _piece_names(self, src_ids: np.ndarray, tgt_ids: np.ndarray) -> tuple[list[str], list[str]]:
        src_pieces = [self.src_tokenizer.id_to_piece(int(i)) for i in src_ids]
        return src_pieces, [self.tgt_tokenizer.id_to_piece(int(i)) for i in tgt_ids]

    def forced_saliency(self, source: str, target: str) -> tuple[list[str], list[str], np.ndarray]:
        """Teacher-forced gradient × input saliency (T+1, S), rows summing to 1.

        Row t is |∂ log p(y_t | y_<t, x) / ∂e_i · e_i| over the source piece embeddings e_i
        (Ding et al. 2019, "Saliency-driven word alignment interpretation for NMT"), normalised:
        how much each source piece moves the probability of the piece actually there. Unlike
        attention it needs no attention layer.

        Copies of the pair are decoded side by side, copy t only as far as step t, and one
        backward pass gives all their rows: copy t contributes only its step t. Copies go in
        chunks of `SALIENCY_CHUNK`, so memory grows with the target length, not its square.
        """
        src_ids, tgt_ids = self._forced_ids(source, target)
        steps = len(tgt_ids) + 1
        rows = []
        # Grad mode even inside a caller's inference_mode; cuDNN runs an RNN backward only in
        # training mode, and the model stays in eval mode (no dropout) here.
        with (
            torch.inference_mode(False),
            torch.enable_grad(),
            torch.backends.cudnn.flags(enabled=False),
        ):
            full = collate([src_ids], [tgt_ids]).to(self.device)
            for first in range(0, steps, SALIENCY_CHUNK):
                index = torch.arange(first, min(steps, first + SALIENCY_CHUNK), device=self.device)
                rows.append(self._saliency_rows(full, index))
        saliency = torch.cat(rows)[:, : len(src_ids)]  # (steps, S)
        total = saliency.sum(dim=1, keepdim=True)
        uniform = 1.0 / max(len(src_ids), 1)
        saliency = torch.where(total > 0, saliency / total.clamp_min(1e-30), uniform)
        return (*self._piece_names(src_ids, tgt_ids), saliency.float().cpu().numpy())

    def _saliency_rows(self, full, index: torch.Tensor) -> torch.Tensor:
        """Unnormalised saliency rows (len(index), S): copy k decodes up to step index[k]."""
        model, copies = self.model, len(index)
        src = full.src.repeat(copies, 1)
        tgt_in = full.tgt_in[:, : int(index[-1]) + 1].repeat(copies, 1)  # the decoder is causal
        embedded = model.encoder.embedding(src).detach().requires_grad_()
        state, memory = model.encode(src, full.src_lengths.repeat(copies), embedded)
        vectors = model.decoder(tgt_in, state, memory)  # (copies, steps so far, O)
        copy = torch.arange(copies, device=src.device)
        log_probs = model.output_log_probs(vectors[copy, index])  # copy k at step index[k]
        chosen = log_probs[copy, full.tgt_out[0, index]]
        (gradient,) = torch.autograd.grad(chosen.sum(), embedded)
        return (gradient * embedded).sum(dim=-1).abs().detach()

    def check_attention(self, fix: str, use: str = "to align with") -> None:
        """ConfigError, ending in `fix`, when the model (an ensemble's first, whose attention
        gives the word links) has no attention for `use`."""
        if self.model.decoder.attention is None:
            raise ConfigError(
                f"{self.model_dir} was trained with --attention none: it has no attention "
                f"{use}; {fix}"
            )

    @torch.inference_mode()
    def forced_attention(
        self, source: str, target: str, extra: int = 0
    ) -> tuple[list[str], list[str], np.ndarray]:
        """Teacher-forced attention (T+1+extra, S) of the model over the given target: a row
        per target piece, one for EOS, and `extra` steps more that read EOS again (a Bahdanau
        decoder's query has read the last piece only two steps after predicting it)."""
        self.check_attention("use --weights saliency")
        src_ids, tgt_ids = self._forced_ids(source, target)
        attention = self._forced_rows(src_ids, tgt_ids, extra)
        return (*self._piece_names(src_ids, tgt_ids), attention)

    @torch.inference_mode()
    def _forced_rows(self, src_ids: np.ndarray, tgt_ids: np.ndarray, extra: int) -> np.ndarray:
        """The attention (T+1+extra, S) of teacher-forced decoding over ids (see above)."""
        batch = collate([src_ids], [tgt_ids]).to(self.device)
        state = self.model.encode(batch.src, batch.src_lengths)
        inputs = batch.tgt_in[0].tolist() + [EOS_ID] * extra
        rows = []
        for token in inputs:
            prev = torch.tensor([token], device=self.device)
            _, state, weights = self.model.step_log_probs(prev, state)
            rows.append(weights[0].float().cpu())
        return torch.stack(rows).numpy()[:, : len(src_ids)]


class TranslationStream:
    """Lines translated by one running search (`decoding.SearchStream`): `add` puts lines in
    between steps, `step` advances the search and returns the lines it finished, each with the
    tag it was added with. A line gets the translation `translate_chunk` gives it."""

    def __init__(self, translator: Translator, options: SearchOptions, with_attention: bool):
        assert translator.shortlist is None, "a stream of translations has no shortlist"
        self.translator, self.with_attention = translator, with_attention
        self.search = decoding.SearchStream(
            translator.model, translator.device, options, with_attention,
            [partner.model for partner in translator.partners],
        )  # fmt: skip
        self._lines: dict[int, tuple[Hashable, str, tuple[np.ndarray, bool]]] = {}
        self._ready: list[tuple[Hashable, Translation]] = []  # empty lines: nothing to search

    @property
    def active(self) -> int:
        """Lines added and not yet returned."""
        return self.search.active + len(self._ready)

    def add(self, items: Sequence[tuple[Hashable, str]]) -> None:
        """Put lines, each with its tag, into the search. If it raises (the encoder ran out of
        memory, say), the stream is as it was: the lines already in it go on."""
        translator, searched, empty = self.translator, [], []
        for tag, line in items:
            encoded = translator._encode_source(line)
            if len(encoded[0]):
                searched.append((tag, line, encoded))
            else:
                empty.append((tag, Translation(source=line, text="", truncated=encoded[1])))
        if searched:
            sources = [[encoded[0] for _, _, encoded in searched]]
            for partner in translator.partners:
                sources.append([partner._encode_source(line)[0] for _, line, _ in searched])
            for sentence, item in zip(self.search.add(sources), searched, strict=True):
                self._lines[sentence] = item
        self._ready += empty

    def step(self) -> list[tuple[Hashable, Translation]]:
        """One search step; the (tag, translation) of every line it finished."""
        done, self._ready = self._ready, []
        if self.search.active:
            for sentence, nbest in self.search.step():
                tag, line, encoded = self._lines.pop(sentence)
                translation = self.translator._finish(
                    line, encoded, nbest, False, self.with_attention
                )
                done.append((tag, translation))
        return done


def _check_same_direction(first: Translator, other: Translator) -> None:
    """Refuse an ensemble member that translates between other languages than the first, as
    their data directories recorded them: the two directions of one joint vocabulary share
    every SentencePiece file, so the vocabulary check alone lets a zh→en model average its
    log-probabilities into an en→zh one's."""
    pairs = [(t.meta.get("src_lang"), t.meta.get("tgt_lang")) for t in (first, other)]
    if None in pairs[0] or None in pairs[1] or pairs[0] == pairs[1]:
        return  # unknown languages (not given to nmt prepare, nor found): nothing to compare
    (src, tgt), (other_src, other_tgt) = pairs
    raise ArtifactError(
        f"{other.model_dir} translates {other_src}→{other_tgt} and {first.model_dir} "
        f"{src}→{tgt}: an ensemble needs models of one direction"
    )


def _check_same_target(first: Path, other: Path) -> None:
    """Refuse an ensemble member whose target vocabulary (SentencePiece file) is not the first's."""
    checkpoint.check_model_dir(other)
    mine, theirs = first / checkpoint.TGT_SPM, other / checkpoint.TGT_SPM
    if theirs.read_bytes() != mine.read_bytes():
        raise ArtifactError(
            f"{theirs} differs from {mine}: an ensemble needs models with the same target "
            "vocabulary (trained on one data directory)"
        )
