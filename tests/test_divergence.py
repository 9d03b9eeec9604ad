"""`nmt train` warns, once, when the training loss climbs above a uniform guess's."""

from __future__ import annotations

import math

from nmt_cli.config import Config, ModelConfig, TrainConfig
from nmt_cli.data.datadir import load_data_dir
from nmt_cli.train_report import Window
from nmt_cli.trainer import DIVERGENCE_AFTER, Trainer
from nmt_cli.updates import Measured


def test_a_loss_above_a_uniform_guess_is_reported_once_as_divergence(toy_data_dir, tmp_path):
    data = load_data_dir(toy_data_dir)
    model = ModelConfig(
        emb_size=16,
        hidden_size=8,
        src_vocab_size=data.src_vocab_size,
        tgt_vocab_size=data.tgt_vocab_size,
    )
    config = Config(model=model, train=TrainConfig(threads=1, warmup_steps=150, lr=0.5))
    events = []
    trainer = Trainer(config, data, tmp_path, on_event=events.append)
    uniform = math.log(data.tgt_vocab_size)

    def report(step: int, nll: float) -> list[str]:
        trainer.progress.step = step
        window = Window()
        window.add(Measured(1.0, nll, 100, None))  # the NLL, not the label-smoothed loss
        before = len(events)
        trainer._warn_if_diverging(window)
        return [e.data["message"] for e in events[before:] if e.kind == "warning"]

    assert report(DIVERGENCE_AFTER - 1, uniform + 5) == []  # too early to tell
    assert report(149, uniform + 5) == []  # still warming up (150 steps)
    assert report(150, uniform + 0.5) == []  # no worse than a first guess
    told = report(170, uniform + 5)
    assert len(told) == 1 and "training is diverging" in told[0]
    assert (
        "lower --lr (now 0.5)" in told[0] and f"over the {data.tgt_vocab_size:,} pieces" in told[0]
    )
    assert report(190, uniform + 9) == []  # said once
