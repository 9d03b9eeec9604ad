"""The loss normalisation of `nmt train`: per target token (default) or per sentence, as
OpenNMT-py's `normalization: sents` and Joey NMT's `normalization: batch` do."""

from __future__ import annotations

import pytest
import torch

from nmt_cli.batching import collate
from nmt_cli.config import Config, ConfigError, ModelConfig, TrainConfig
from nmt_cli.data.datadir import load_data_dir
from nmt_cli.trainer import Trainer


def _one_update(toy_data_dir, tmp_path, normalization: str):
    data = load_data_dir(toy_data_dir)
    config = Config(
        model=ModelConfig(
            emb_size=16,
            hidden_size=8,
            dropout=0.0,
            attention="additive",
            src_vocab_size=data.src_vocab_size,
            tgt_vocab_size=data.tgt_vocab_size,
        ),
        train=TrainConfig(
            clip_norm=0.0, label_smoothing=0.0, threads=1, normalization=normalization
        ),
    )
    out = tmp_path / normalization
    out.mkdir()
    torch.manual_seed(0)
    trainer = Trainer(config, data, out)
    src, tgt = data.ids("train", "src"), data.ids("train", "tgt")
    batch = collate([src[i] for i in range(12)], [tgt[i] for i in range(12)])
    loss = trainer.train_step(batch)
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return loss, grads, batch


def test_sentence_normalisation_scales_the_gradient_and_reports_the_same_loss(
    toy_data_dir, tmp_path
):
    by_tokens, token_grads, batch = _one_update(toy_data_dir, tmp_path, "tokens")
    by_sentences, sentence_grads, _ = _one_update(toy_data_dir, tmp_path, "sentences")
    assert by_sentences == pytest.approx(by_tokens, rel=1e-6)  # the log stays per token
    scale = batch.n_tokens / batch.src.size(0)  # target tokens per sentence
    assert scale > 1.5
    assert token_grads.keys() == sentence_grads.keys()
    for name, grad in token_grads.items():
        torch.testing.assert_close(sentence_grads[name], grad * scale, rtol=1e-4, atol=1e-6)


def test_unknown_normalisation_is_a_config_error():
    with pytest.raises(ConfigError, match="normalization must be tokens or sentences"):
        Config.from_dict({"train": {"normalization": "words"}})
