"""Translation with a trained model: batching by length, search, detokenisation, order kept.

`decode_ids` is the core over token ids (used by validation too); `Translator` wraps a model
directory and turns lines of text into `Translation`s, streaming chunk by chunk.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from nmt_cli import checkpoint
from nmt_cli.batching import collate
from nmt_cli.config import Config
from nmt_cli.errors import ArtifactError, ConfigError
from nmt_cli.model.seq2seq import BOS_ID, EOS_ID, UNK_ID, Seq2Seq
from nmt_cli.search import Hypothesis, beam_search, greedy_search
from nmt_cli.shortlist import SHORTLIST_FILE, Shortlist


@dataclass
class SearchOptions:
    """How to search: beam size, n-best, length normalisation, output length limit."""

    beam_size: int = 5  # 1 = greedy search
    nbest: int = 1  # hypotheses returned per sentence (≤ beam size)
    alpha: float = 1.0  # GNMT length penalty exponent ((5+len)/6)^alpha
    max_len_ratio: float = 2.0  # at most ratio × source pieces + max_len_extra target pieces
    max_len_extra: int = 10
    max_len: int = 0  # > 0: at most this many target pieces for every sentence (not the ratio)
    batch_size: int = 64  # sentences per batch
    early_stop: bool = False  # beam: stop a sentence once a step's best extension ends it

    def check(self) -> SearchOptions:
        if self.beam_size < 1:
            raise ConfigError(f"--beam must be ≥ 1, got {self.beam_size}")
        if not 1 <= self.nbest <= self.beam_size:
            raise ConfigError(
                f"--nbest must be between 1 and --beam ({self.beam_size}), got {self.nbest}"
            )
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be ≥ 1, got {self.batch_size}")
        if self.max_len < 0:
            raise ConfigError(f"--max-len must be ≥ 0, got {self.max_len}")
        if self.max_len_ratio <= 0 or self.max_len_extra < 0:
            raise ConfigError("--max-len-ratio must be > 0 and the extra length ≥ 0")
        if self.alpha < 0:
            raise ConfigError(f"--length-penalty must be ≥ 0, got {self.alpha}")
        return self


def _search_batch(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    device: torch.device,
    options: SearchOptions,
    shortlist: Shortlist | None = None,
    with_attention: bool = True,
) -> list[list[Hypothesis]]:
    batch = collate(sources, [np.empty(0, dtype=np.int64)] * len(sources))
    src, lengths = batch.src.to(device), batch.src_lengths.to(device)
    state = model.encode(src, lengths)
    max_lengths = (lengths.float() * options.max_len_ratio + options.max_len_extra).long()
    if options.max_len:  # one fixed limit, as the peers' max_length (bench/ compares at it)
        max_lengths = torch.full_like(lengths, options.max_len)
    step, bos, eos, ids = model.step_log_probs, BOS_ID, EOS_ID, None
    if shortlist is not None:  # the search runs over columns of `ids`
        ids, allowed = _shortlist_columns(shortlist, sources)
        step = model.shortlist_step(torch.from_numpy(ids).to(device), allowed.to(device))
        bos, eos = int(np.searchsorted(ids, BOS_ID)), int(np.searchsorted(ids, EOS_ID))
    if not with_attention:  # the search then keeps no attention trail (copied at every step)
        step = _without_attention(step)
    if options.beam_size == 1:
        best = greedy_search(step, model.reorder, state, len(sources), bos, eos, max_lengths)
        nbests = [[h] for h in best]
    else:
        nbests = beam_search(
            step,
            model.reorder,
            state,
            len(sources),
            bos,
            eos,
            max_lengths,
            beam_size=options.beam_size,
            nbest=options.nbest,
            alpha=options.alpha,
            early_stop=options.early_stop,
        )
    if ids is None:
        return nbests
    return [[replace(h, tokens=ids[h.tokens].tolist()) for h in nbest] for nbest in nbests]


def _without_attention(step):
    """`step` with its attention dropped: hypotheses then carry none."""

    def without(prev: torch.Tensor, state):
        log_probs, state, _ = step(prev, state)
        return log_probs, state, None

    return without


def _shortlist_columns(shortlist: Shortlist, sources: Sequence[np.ndarray]):
    """The batch's target ids (K,), sorted, and which of them each sentence may produce (B, K)."""
    lists = [shortlist.ids_for([source]) for source in sources]
    ids = np.unique(np.concatenate([*lists, [BOS_ID, EOS_ID]])).astype(np.int64)
    allowed = np.zeros((len(sources), len(ids)), dtype=bool)
    for row, own in enumerate(lists):
        allowed[row, np.searchsorted(ids, own)] = True
    allowed[:, np.searchsorted(ids, EOS_ID)] = True
    return ids, torch.from_numpy(allowed)


@torch.inference_mode()
def decode_ids(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    device: torch.device,
    options: SearchOptions | None = None,
    batch_size: int | None = None,
    shortlist: Shortlist | None = None,
    with_attention: bool = True,
) -> list[list[Hypothesis]]:
    """n-best lists for source id sequences, batched longest first, returned in input order;
    with a `shortlist`, each sentence is scored over its own lexical shortlist only; without
    `with_attention`, hypotheses carry no attention (less work per step)."""
    options = options or SearchOptions(beam_size=1)
    size = batch_size or options.batch_size
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        for row, nbest in zip(
            rows,
            _search_batch(
                model, [sources[i] for i in rows], device, options, shortlist, with_attention
            ),
            strict=True,
        ):
            results[row] = nbest
    return results


@dataclass
class Translation:
    """One translated line: the text, its pieces, score, and attention over the source pieces."""

    source: str
    text: str
    src_pieces: list[str] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    score: float = 0.0
    attention: np.ndarray | None = (
        None  # (len(pieces) + 1, len(src_pieces)): a row per step incl. EOS
    )
    alternatives: list[tuple[str, float]] = field(
        default_factory=list
    )  # n-best (text, score), best first
    truncated: bool = False  # the source was longer than the model's limit and was cut


SALIENCY_CHUNK = 32  # target steps whose saliency one backward pass computes


class Translator:
    """A loaded model directory: model, configuration and tokenizers."""

    def __init__(
        self,
        model: Seq2Seq,
        config: Config,
        src_tokenizer,
        tgt_tokenizer,
        device: torch.device,
        model_dir: Path,
    ):
        self.model = model
        self.config = config
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.device = device
        self.model_dir = model_dir
        self.max_source_pieces = config.train.max_len
        self.shortlist: Shortlist | None = None  # see `load(shortlist=True)`

    @classmethod
    def load(
        cls,
        model_dir: Path,
        device: str = "auto",
        quantize: bool = False,
        threads: int = 0,
        shortlist: bool = False,
    ) -> Translator:
        from nmt_cli.data.tokenizer import Tokenizer
        from nmt_cli.device import pick_device

        model_dir = Path(model_dir)
        checkpoint.check_model_dir(model_dir)
        if threads:
            torch.set_num_threads(threads)
        payload = checkpoint.load(model_dir / checkpoint.MODEL_FILE)
        model, config = build_model(payload, model_dir / checkpoint.MODEL_FILE)
        torch_device = pick_device(device)
        if quantize:
            if torch_device.type != "cpu":
                raise ConfigError("--quantize is for CPU inference; add --device cpu")
            model = quantize_model(model)
        model.to(torch_device).eval()
        src_tok = Tokenizer(model_dir / checkpoint.SRC_SPM)
        tgt_tok = Tokenizer(model_dir / checkpoint.TGT_SPM)
        translator = cls(model, config, src_tok, tgt_tok, torch_device, model_dir)
        if shortlist:
            path = model_dir / SHORTLIST_FILE
            translator.shortlist = Shortlist.load(path).check(
                config.model.src_vocab_size, config.model.tgt_vocab_size, path
            )
        return translator

    def translate_lines(
        self,
        lines: Iterable[str],
        options: SearchOptions,
        chunk_size: int = 512,
        replace_unk: bool = False,
        with_attention: bool = False,
    ) -> Iterator[Translation]:
        """Translate lines in chunks (memory stays flat), yielding one Translation per line, in order."""
        options.check()
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
        # A source repeated within the chunk is decoded once: the search does not depend on
        # the batch it runs in, so every copy gets the same translation.
        slot: dict[bytes, int] = {}
        unique: list[np.ndarray] = []
        todo: list[tuple[int, int]] = []
        for i, (ids, _) in enumerate(encoded):
            if len(ids):
                key = ids.tobytes()
                if key not in slot:
                    slot[key] = len(unique)
                    unique.append(ids)
                todo.append((i, slot[key]))
        nbests = decode_ids(
            self.model,
            unique,
            self.device,
            options,
            shortlist=self.shortlist,
            with_attention=with_attention or replace_unk,
        )
        results = [
            Translation(source=line, text="", truncated=encoded[i][1])
            for i, line in enumerate(lines)
        ]
        for i, k in todo:
            results[i] = self._finish(lines[i], encoded[i], nbests[k], replace_unk, with_attention)
        return results

    def _encode_source(self, line: str) -> tuple[np.ndarray, bool]:
        ids = self.src_tokenizer.encode(line.strip())
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

    def _text(self, pieces: list[str]) -> str:
        return "".join(pieces).replace("▁", " ").strip()

    def _forced_ids(self, source: str, target: str) -> tuple[np.ndarray, np.ndarray]:
        src_ids = np.asarray(
            self.src_tokenizer.encode(source)[: self.max_source_pieces], dtype=np.int64
        )
        return src_ids, np.asarray(self.tgt_tokenizer.encode(target), dtype=np.int64)

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

    @torch.inference_mode()
    def forced_attention(self, source: str, target: str) -> tuple[list[str], list[str], np.ndarray]:
        """Teacher-forced attention (T+1, S) of the model over the given target (rows incl. EOS)."""
        if self.model.decoder.attention is None:
            raise ConfigError(
                f"{self.model_dir} was trained with --attention none: it has no attention to "
                "align with; use --weights saliency"
            )
        src_ids, tgt_ids = self._forced_ids(source, target)
        batch = collate([src_ids], [tgt_ids]).to(self.device)
        state = self.model.encode(batch.src, batch.src_lengths)
        rows = []
        for t in range(batch.tgt_in.size(1)):
            _, state, weights = self.model.step_log_probs(batch.tgt_in[:, t], state)
            rows.append(weights[0].float().cpu())
        attention = torch.stack(rows).numpy()[:, : len(src_ids)]
        return (*self._piece_names(src_ids, tgt_ids), attention)


def build_model(payload: dict, path: Path) -> tuple[Seq2Seq, Config]:
    """Rebuild the model from the configuration stored inside the checkpoint."""
    try:
        config = Config.from_dict(payload["config"], str(path))
        # On the meta device: no memory until the weights are known to fit the config.
        with _without_random_init(), torch.device("meta"):
            model = Seq2Seq(config.model)
        _check_shapes(model, payload["weights"], path)
        model.load_state_dict(payload["weights"], assign=True)
    except (KeyError, TypeError, RuntimeError, ConfigError) as exc:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ArtifactError(
            f"{path} does not hold a usable nmt model ({reason}): retrain it"
        ) from None
    return model, config


@contextlib.contextmanager
def _without_random_init() -> Iterator[None]:
    """torch.nn.init's in-place initialisers as no-ops while a model is built to be loaded.

    Every value is replaced by the checkpoint's, and random init of meta tensors runs through
    torch._refs, whose first use imports torch._dynamo: about a second of start-up.
    """
    names = [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]
    saved = {name: getattr(torch.nn.init, name) for name in names}
    try:
        for name in names:
            setattr(torch.nn.init, name, _unchanged)
        yield
    finally:
        for name, function in saved.items():
            setattr(torch.nn.init, name, function)


def _unchanged(tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    return tensor


def _check_shapes(model: Seq2Seq, weights: dict, path: Path) -> None:
    """Refuse weights whose names or shapes differ from what the stored config builds."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    given = {name: tuple(getattr(t, "shape", ())) for name, t in weights.items()}
    if expected != given:
        wrong = sorted(set(expected) ^ set(given)) or sorted(
            n for n in expected if expected[n] != given.get(n)
        )
        raise ArtifactError(
            f"{path}: the weights do not fit the stored configuration (first mismatch: "
            f"{wrong[0]}); the file is damaged or was edited: retrain or restore it"
        )


def quantize_model(model: Seq2Seq) -> Seq2Seq:
    """int8 dynamic quantization of the linear and recurrent layers (CPU inference only).

    torch maps only the exact nn.GRU class to its quantized GRU, so each `FastGRU` (whose fast
    path serves training only) is first handed over as a plain nn.GRU with the same weights.
    The model given is left as it is; the quantized one is a copy.
    """
    import copy
    import warnings

    from torch.ao.quantization import quantize_dynamic

    from nmt_cli.model.gru import FastGRU

    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is FastGRU:
                setattr(module, name, _plain_gru(child))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notices are not the user's concern
        return quantize_dynamic(
            model, {torch.nn.Linear, torch.nn.GRU, torch.nn.LSTM}, dtype=torch.qint8, inplace=True
        )


def _plain_gru(gru: torch.nn.GRU) -> torch.nn.GRU:
    """An nn.GRU with the same shape and weights as `gru`."""
    with _without_random_init():
        plain = torch.nn.GRU(
            gru.input_size,
            gru.hidden_size,
            num_layers=gru.num_layers,
            bias=gru.bias,
            batch_first=gru.batch_first,
            dropout=gru.dropout,
            bidirectional=gru.bidirectional,
        )
    plain.load_state_dict(gru.state_dict())
    return plain.to(next(gru.parameters()).device).train(gru.training)
