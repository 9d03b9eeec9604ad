"""A run interrupted and resumed reaches the same weights as one that was not."""

from __future__ import annotations

import torch
from cli_runner import invoke

from nmt_cli import checkpoint

TINY = (
    "--emb-size",
    "16",
    "--hidden-size",
    "16",
    "--valid-every",
    "5",
    "--batch-tokens",
    "300",
    "--lr",
    "0.01",
    "--seed",
    "11",
    "--threads",
    "1",
)


def test_resumed_run_matches_uninterrupted_run(toy_data_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert invoke("train", toy_data_dir, "-o", straight, *TINY, "--max-steps", "20").exit_code == 0
    assert invoke("train", toy_data_dir, "-o", split, *TINY, "--max-steps", "10").exit_code == 0
    resumed = invoke("train", toy_data_dir, "-o", split, *TINY, "--max-steps", "20", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resumed: step 10" in resumed.stderr
    a = checkpoint.load(straight / checkpoint.LAST_FILE)
    b = checkpoint.load(split / checkpoint.LAST_FILE)
    assert a["progress"]["step"] == b["progress"]["step"] == 20
    for name, tensor in a["weights"].items():
        assert torch.equal(tensor, b["weights"][name]), name
