"""CUDA: training with mixed precision and translation on the GPU (skipped without a GPU)."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import invoke

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_train_and_translate_on_cuda(toy_data_dir, tmp_path):
    model = tmp_path / "gpu-model"
    result = invoke(
        "train",
        toy_data_dir,
        "-o",
        model,
        "--device",
        "cuda",
        "--emb-size",
        "32",
        "--hidden-size",
        "32",
        "--max-steps",
        "30",
        "--valid-every",
        "15",
        "--log-every",
        "5",
        "--batch-tokens",
        "400",
        "--lr",
        "0.003",
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((model / "meta.json").read_text())
    assert meta["device"].startswith("cuda")
    events = [json.loads(line) for line in (model / "train.jsonl").read_text().splitlines()]
    losses = torch.tensor([e["loss"] for e in events if e["event"] == "train"])
    assert losses.numel() and bool(torch.isfinite(losses).all()), losses  # no NaN or ±inf
    assert losses[-1] < losses[0]  # and it learns under autocast
    out = invoke(
        "translate",
        "-m",
        model,
        "--device",
        "cuda",
        "--beam",
        "3",
        input="apple river\n\nstone cloud green\n",
    )
    assert out.exit_code == 0 and out.stdout.count("\n") == 3


@pytest.mark.parametrize("feed", [True, False])  # the step loop and the fused path
def test_guided_alignment_trains_on_cuda(toy_data_dir, tmp_path, feed):
    sources = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    links = tmp_path / "train.links"  # the toy corpus is a reversal: word i is target n - 1 - i
    links.write_text(
        "".join(
            " ".join(f"{i}-{len(s.split()) - 1 - i}" for i in range(len(s.split()))) + "\n"
            for s in sources
        )
    )
    model = tmp_path / "guided"
    result = invoke("train", toy_data_dir, "-o", model, "--device", "cuda", "--emb-size", "32",
                    "--hidden-size", "32", "--max-steps", "20", "--valid-every", "20",
                    "--log-every", "5", "--guided-alignment", "1", "--alignments", links,
                    "--input-feed" if feed else "--no-input-feed")  # fmt: skip
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in (model / "train.jsonl").read_text().splitlines()]
    aligned = torch.tensor([e["align_loss"] for e in events if e["event"] == "train"])
    assert aligned.numel() and bool(torch.isfinite(aligned).all()), aligned
    assert aligned[-1] < aligned[0]  # the attention moves towards the links on the GPU too
    assert (model / "link_rates.tsv").is_file()


@pytest.mark.parametrize("beam", ["1", "3"])
def test_cuda_and_cpu_translations_agree_on_a_float32_model(toy_model_dir, beam):
    text = "apple river stone\ngreen bird sun\n\nwater tree night sun light\n"
    args = ("translate", "-m", toy_model_dir, "--beam", beam, "--json")
    cpu = invoke(*args, "--device", "cpu", input=text)
    gpu = invoke(*args, "--device", "cuda", input=text)
    assert cpu.exit_code == gpu.exit_code == 0, cpu.stderr + gpu.stderr
    cpu_records = [json.loads(line) for line in cpu.stdout.splitlines()]
    gpu_records = [json.loads(line) for line in gpu.stdout.splitlines()]
    assert len(cpu_records) == len(gpu_records) == 4
    for on_cpu, on_gpu in zip(cpu_records, gpu_records, strict=True):
        assert on_gpu["translation"] == on_cpu["translation"]
        assert on_gpu["score"] == pytest.approx(on_cpu["score"], abs=1e-3)


def test_saliency_on_cuda_matches_the_cpu(toy_model_dir):
    # cuDNN refuses an RNN backward in eval mode: saliency must not go through it.
    import numpy as np

    from nmt_cli.translator import Translator

    pair = ("green bird sun", "SUN BIRD GREEN")
    cpu = Translator.load(toy_model_dir, device="cpu").forced_saliency(*pair)[2]
    gpu = Translator.load(toy_model_dir, device="cuda").forced_saliency(*pair)[2]
    np.testing.assert_allclose(gpu, cpu, atol=1e-4)
