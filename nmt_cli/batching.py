"""Token-based batches of similar lengths: little padding, steady memory, reproducible order.

Each epoch sorts the training pairs by (target length, source length) with a random
tie-break drawn from (seed, epoch), cuts the sorted list into batches of at most
`batch_tokens` padded target positions, and shuffles the batch order with the same seed. The
order of epoch e is therefore a pure function of (seed, e): resuming needs only the epoch and
the index of the next batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt_cli.specials import BOS_ID, EOS_ID, PAD_ID


@dataclass(frozen=True)
class Guide:
    """Target distributions for the attention of a batch, as the entries (row, step, source
    position, weight) where they are non-zero; the weights of one (row, step) sum to 1."""

    rows: torch.Tensor  # (L,) int64
    steps: torch.Tensor  # (L,) int64: the target position t, whose step predicts y_t
    sources: torch.Tensor  # (L,) int64
    weights: torch.Tensor  # (L,) float32

    def to(self, move) -> Guide:
        return Guide(*(move(t) for t in (self.rows, self.steps, self.sources, self.weights)))


PairGuide = tuple[np.ndarray, np.ndarray, np.ndarray]  # one pair's (steps, sources, weights)


@dataclass
class Batch:
    """Padded tensors for one training or validation batch."""

    src: torch.Tensor  # (B, S) source ids, PAD-padded
    src_lengths: torch.Tensor  # (B,)
    tgt_in: torch.Tensor  # (B, T) BOS y_1 .. y_{T-1}
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_{T-1} EOS
    n_tokens: int  # real target tokens incl. EOS
    guide: Guide | None = None  # guided alignment: where the attention should look

    def to(self, device: torch.device) -> Batch:
        pin = device.type == "cuda"
        move = (
            (lambda t: t.pin_memory().to(device, non_blocking=True))
            if pin
            else (lambda t: t.to(device))
        )
        return Batch(
            move(self.src),
            move(self.src_lengths),
            move(self.tgt_in),
            move(self.tgt_out),
            self.n_tokens,
            None if self.guide is None else self.guide.to(move),
        )


def collate(
    src_seqs: Sequence[np.ndarray],
    tgt_seqs: Sequence[np.ndarray],
    guides: Sequence[PairGuide] | None = None,
) -> Batch:
    """Pad a list of id sequences into a Batch (source without BOS/EOS; target shifted by
    BOS/EOS), with each pair's attention guide when `guides` are given."""
    batch = len(src_seqs)
    src_len = max(1, max(len(s) for s in src_seqs))
    tgt_len = max(len(t) for t in tgt_seqs) + 1
    src = np.full((batch, src_len), PAD_ID, dtype=np.int64)
    tgt_in = np.full((batch, tgt_len), PAD_ID, dtype=np.int64)
    tgt_out = np.full((batch, tgt_len), PAD_ID, dtype=np.int64)
    lengths = np.empty(batch, dtype=np.int64)
    for row, (s, t) in enumerate(zip(src_seqs, tgt_seqs, strict=True)):
        n = len(s)
        if n == 0:  # an empty source still needs one position for the encoder: use EOS
            src[row, 0], n = EOS_ID, 1
        else:
            src[row, :n] = s
        lengths[row] = n
        tgt_in[row, 0] = BOS_ID
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = EOS_ID
    n_tokens = int(sum(len(t) + 1 for t in tgt_seqs))
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(lengths),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        n_tokens,
        None if guides is None else _collate_guides(guides),
    )


def _collate_guides(guides: Sequence[PairGuide]) -> Guide:
    sizes = [len(steps) for steps, _, _ in guides]
    rows = np.repeat(np.arange(len(guides)), sizes)
    steps, sources, weights = (np.concatenate(part) for part in zip(*guides, strict=True))
    return Guide(
        torch.from_numpy(rows),
        torch.from_numpy(steps.astype(np.int64)),
        torch.from_numpy(sources.astype(np.int64)),
        torch.from_numpy(weights.astype(np.float32)),
    )


def make_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    batch_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
) -> list[np.ndarray]:
    """Index arrays of the batches of one epoch, in the order they are to be trained."""
    rng = np.random.default_rng([seed, epoch])
    tie_break = rng.random(len(tgt_lengths)) if shuffle else np.arange(len(tgt_lengths))
    order = np.lexsort((tie_break, src_lengths, tgt_lengths))
    padded = tgt_lengths[order] + 1  # + EOS
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        end = start + 1
        # sorted ascending, so the last sentence of a batch sets its padded width
        while end < len(order) and (end - start + 1) * padded[end] <= batch_tokens:
            end += 1
        batches.append(order[start:end])
        start = end
    if shuffle:
        permutation = rng.permutation(len(batches))
        batches = [batches[i] for i in permutation]
    return batches


def iterate_batches(
    src, tgt, batches: list[np.ndarray], start: int = 0, guides=None
) -> Iterator[tuple[int, Batch]]:
    """Yield (index, Batch) from batch `start` on; src/tgt are indexable id stores, `guides`
    (optional) gives each pair's attention guide by the same index (`guide.PieceLinks`)."""
    for index in range(start, len(batches)):
        rows = batches[index]
        pair_guides = None if guides is None else [guides.pair(i) for i in rows]
        yield index, collate([src[i] for i in rows], [tgt[i] for i in rows], pair_guides)
