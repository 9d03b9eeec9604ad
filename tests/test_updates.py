"""One training update: skipping an update whose loss is not finite."""

from __future__ import annotations

import numpy as np
import torch

from nmt_cli.batching import collate
from nmt_cli.config import ModelConfig, TrainConfig
from nmt_cli.distributed import Ranks
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.updates import Updater


def test_an_update_after_a_skipped_one_runs_under_a_gradient_scaler():
    """fp16 training on a GPU scales the loss (a GradScaler). A non-finite loss skips its
    update; the next update must run, and the scale must drop. The CPU scaler keeps the
    same state as the CUDA one."""
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(emb_size=8, hidden_size=4, src_vocab_size=12, tgt_vocab_size=12))
    events = []
    updater = Updater(model, TrainConfig(), torch.device("cpu"), Ranks(), events.append)
    updater.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    batch = collate([np.array([4, 5, 6])], [np.array([7, 8])])
    forward = updater.objective.forward
    calls = []

    def first_loss_infinite(*args):
        loss, nll, alignment = forward(*args)
        calls.append(1)
        return (loss * float("inf") if len(calls) == 1 else loss), nll, alignment

    updater.objective.forward = first_loss_infinite
    before = [p.detach().clone() for p in model.parameters()]
    assert updater(batch, 1) is None
    assert "update skipped" in events[-1].data["message"]
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    assert updater.scaler.get_scale() < 2.0**8
    measured = updater(batch, 2)
    assert measured is not None and np.isfinite(measured.loss)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
