"""Where a training update spends its time: the torch profiler over a few real updates.

Builds the trainer of a model directory's configuration on its data directory, runs a few
warm-up updates, profiles the next ones, and prints the operators by their own CPU time and
a split of the update into forward, backward and optimizer.

    python scripts/profile_train.py runs/m30k runs/m30k-ref --steps 8 --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nmt_cli.batching import iterate_batches  # noqa: E402
from nmt_cli.config import Config  # noqa: E402
from nmt_cli.data.datadir import load_data_dir  # noqa: E402
from nmt_cli.trainer import Trainer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a data directory written by `nmt prepare`")
    parser.add_argument("model", type=Path, help="a model directory (for its config.json)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=18)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = json.loads((args.model / "config.json").read_text(encoding="utf-8"))
    data["train"]["threads"] = args.threads
    config = Config.from_dict(data, str(args.model / "config.json"))
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(config, load_data_dir(args.data), Path(tmp))
        batches = trainer.epoch_batches(0)
        stream = iterate_batches(trainer.train_src, trainer.train_tgt, batches)
        for _ in range(args.warmup):
            trainer.train_step(next(stream)[1])
        work = [next(stream)[1] for _ in range(args.steps)]
        tokens = sum(b.n_tokens for b in work)
        phases = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
        started = time.perf_counter()
        for batch in work:  # the same update as Updater.__call__, timed by phase
            t0 = time.perf_counter()
            loss_sum, *_ = trainer.update.objective(
                batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out
            )
            t1 = time.perf_counter()
            trainer.update.optimizer.zero_grad(set_to_none=True)
            per = batch.src.size(0) if config.train.normalization == "sentences" else batch.n_tokens
            (loss_sum / per).backward()
            t2 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), config.train.clip_norm)
            trainer.update.optimizer.step()
            t3 = time.perf_counter()
            for name, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                phases[name] += seconds
        total = time.perf_counter() - started
        print(
            f"{args.steps} updates, {tokens:,} target tokens, {total:.2f} s: "
            f"{tokens / total:,.0f} target tokens/s on {args.threads} thread(s)"
        )
        print(", ".join(f"{k} {v / total:.0%}" for k, v in phases.items()))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for batch in work:
                trainer.train_step(batch)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
