"""`make profile`: where the time of beam search and of a training update goes, with a roofline.

Four workloads on one model of the reference architecture (additive attention, input
feeding; by default runs/average-ensemble/avg-reference, which `make average-report` trains,
and its data directory's test and train splits):

- beam 5, batch 64: the first 256 test sentences, as `nmt translate --batch-size 64` does;
- greedy, batch 64: the same 256 sentences with beam 1;
- beam 5, batch 1: the first 24 test sentences, one at a time (an interactive user, a service);
- one training update: the model's own tokens per update, label smoothing and learning rate
  (2,000, 0 and 0.001 for the reference model), forward, backward and Adam step.

Each is timed by Python-level phase (encoder, embeddings, GRU step, attention, attentional
vector, output layer, beam bookkeeping, detokenisation): the model's and the search's functions
are wrapped, in this process only, by timers that count each phase's own time (its callees'
phases taken out), so the phases add up to the whole. A second, untimed pass counts every
aten operator each phase runs, its FLOPs (torch.utils.flop_counter's formulas: matrix
products and convolutions; element-wise work counts 0) and the bytes of its tensor arguments
and results (what it would move if nothing stayed in cache: an upper bound). A third pass
gives the per-operator table of torch.profiler.

The roofline line of a phase: its compute floor, FLOPs ÷ the measured fp32 matmul rate;
its operator floor, its operators × the measured cost of dispatching one tiny operator; the
best time it could take is the larger of the two (both are lower bounds). Its bytes ÷ the
measured copy bandwidth is shown beside them: the time the traffic would take if nothing
stayed in cache (a measured time below it means the weights stayed in cache). A phase far
above its best time is Python and small-tensor overhead; one near its operator floor is
bound by the number of operators, not by arithmetic.

    .venv/bin/python bench/profile_report.py [--model DIR] [--data DIR] [--render]

Writes bench/profile.json and bench/PROFILE.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from layout import BENCH_DIR, REPO_DIR

sys.path.insert(0, str(REPO_DIR))

DEFAULT_MODEL = REPO_DIR / "runs" / "average-ensemble" / "avg-reference"
DEFAULT_DATA = REPO_DIR / "runs" / "average-ensemble" / "data"
WORKLOADS = ("beam 5, batch 64", "greedy, batch 64", "beam 5, batch 1", "training update")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--batch-sentences", type=int, default=256)
    parser.add_argument("--single-sentences", type=int, default=24)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--out", type=Path, default=BENCH_DIR)
    parser.add_argument("--render", action="store_true", help="rewrite PROFILE.md only")
    return parser.parse_args()


# Machine rates ---------------------------------------------------------------------------------


def machine_rates() -> dict[str, float]:
    """fp32 matmul GFLOP/s, copy bandwidth GB/s and µs per tiny operator, at torch's threads."""
    import torch

    def median_seconds(work, repeats: int) -> float:
        for _ in range(3):
            work()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    matmul = 2 * n**3 / median_seconds(lambda: a @ b, 10) / 1e9
    big = torch.empty(64 * 2**20)  # 256 MiB
    big.fill_(1.0)
    copy = 2 * big.nbytes / median_seconds(big.clone, 10) / 1e9  # read + write
    x, y = torch.ones(1), torch.ones(1)
    per_op = median_seconds(lambda: [torch.add(x, y) for _ in range(1000)], 20) / 1000 * 1e6
    return {
        "threads": torch.get_num_threads(),
        "matmul_gflops": matmul,
        "copy_gbs": copy,
        "op_us": per_op,
    }


# Phases ----------------------------------------------------------------------------------------


class Phases:
    """Exclusive time per phase: wrapped functions push their phase while they run."""

    def __init__(self, rest: str = "other (search loop, Python glue)") -> None:
        self.stack = [rest]
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self._child = [0.0]

    def wrap(self, owner, attribute: str, phase: str, static: bool = False) -> None:
        inner = getattr(owner, attribute)

        def timed(*args, **kwargs):
            self.stack.append(phase)
            self._child.append(0.0)
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                children = self._child.pop()
                self.stack.pop()
                self.seconds[phase] += elapsed - children
                self.calls[phase] += 1
                self._child[-1] += elapsed

        setattr(owner, attribute, staticmethod(timed) if static else timed)

    @property
    def current(self) -> str:
        return self.stack[-1]


def instrument_code(phases: Phases) -> None:
    """Wrap the phases that live in classes and modules (once per process)."""
    import torch

    from nmt_cli import search
    from nmt_cli.model.decoder import Memory
    from nmt_cli.model.seq2seq import Seq2Seq

    phases.wrap(Memory, "attend", "attention (scores, softmax, context)")
    phases.wrap(search, "_best_extensions", "beam: top-k of the extensions")
    phases.wrap(search, "_collect_finished", "beam: finished hypotheses")
    phases.wrap(search, "_settled", "beam: stopping test")
    phases.wrap(Seq2Seq, "reorder", "beam: reorder states", static=True)
    phases.wrap(search._Trail, "extend", "beam: token and attention trails")
    phases.wrap(torch.Tensor, "backward", "backward (autograd)")
    # training: the input-feeding step loop (model/feeding.py) and the output layer's loss,
    # whose logit gradients are computed in its forward (loss.py)
    from nmt_cli import loss
    from nmt_cli.model import feeding

    phases.wrap(feeding, "run", "training: decoder step loop, forward")
    phases.wrap(feeding._Steps, "backward", "training: decoder step loop, backward", static=True)
    phases.wrap(loss, "output_loss", "training: output layer, loss and its gradient")


def instrument_model(phases: Phases, model, translator=None) -> None:
    """Wrap the phases of one model (and its translator) instance."""
    decoder = model.decoder
    phases.wrap(model, "encode", "encoder and attention keys")
    phases.wrap(model.encoder.embedding, "forward", "embeddings")
    if decoder.embedding is not model.encoder.embedding:
        phases.wrap(decoder.embedding, "forward", "embeddings")
    phases.wrap(decoder.rnn, "forward", "decoder GRU step")
    phases.wrap(decoder, "_rnn_step", "decoder GRU step")  # a search runs `torch.gru_cell` there
    phases.wrap(decoder, "_project", "attentional vector tanh(W[c; d])")
    phases.wrap(model, "output_log_probs", "output layer and log-softmax")
    phases.wrap(model.generator, "forward", "output layer and log-softmax")
    if translator is not None:
        phases.wrap(translator, "_encode_source", "tokenisation (SentencePiece)")
        phases.wrap(translator, "_finish", "detokenisation and results")


def _flops(func, args, kwargs, out) -> float:
    """FLOPs of one aten call: torch's formulas, plus the ops inference mode keeps whole."""
    import torch
    from torch.utils.flop_counter import flop_registry

    packet = func._overloadpacket
    if packet in flop_registry:
        return flop_registry[packet](*args, **kwargs, out_val=out)
    if packet is torch.ops.aten.linear:  # inference mode does not split it into addmm
        x, weight = args[0], args[1]
        return 2 * x.numel() // x.shape[-1] * weight.numel()
    if packet is torch.ops.aten.addmm_:  # in place (loss.py adds each chunk's weight gradient)
        return 2 * args[1].shape[0] * args[1].shape[1] * args[2].shape[1]
    if packet in (torch.ops.aten.gru_cell, torch.ops.aten.lstm_cell):  # one search step's RNN
        x, w_ih, w_hh = args[0], args[2], args[3]  # (input, hx, w_ih, w_hh, b_ih, b_hh)
        return 2 * (x.numel() // x.shape[-1]) * (w_ih.numel() + w_hh.numel())
    if packet is torch.ops.aten.gru and isinstance(args[2], list | tuple):  # (input, hx, params…)
        x = args[0]
        positions = x.numel() // x.shape[-1]  # rows × steps; every layer and direction sees each
        return 2 * positions * sum(w.numel() for w in args[2] if w.dim() == 2)
    return 0.0


@contextlib.contextmanager
def counting(phases: Phases):
    """Count aten operators, FLOPs and bytes per phase while the block runs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    counts = collections.defaultdict(lambda: {"ops": 0, "flops": 0.0, "bytes": 0.0})

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            entry = counts[phases.current]
            entry["ops"] += 1
            entry["flops"] += _flops(func, args, kwargs, out)
            tensors = tree_flatten((args, kwargs, out))[0]
            entry["bytes"] += sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))
            return out

    with Counter():
        yield counts


# Workloads -------------------------------------------------------------------------------------


def test_lines(data_dir: Path, count: int) -> list[str]:
    from nmt_cli.data.datadir import load_data_dir

    path = load_data_dir(data_dir).text("test", "src")
    return path.read_text(encoding="utf-8").splitlines()[:count]


def translation(translator, lines: list[str], batch_size: int, beam: int):
    from nmt_cli.translator import SearchOptions

    options = SearchOptions(beam_size=beam, batch_size=batch_size)

    def run() -> None:
        done = sum(1 for _ in translator.translate_lines(lines, options, chunk_size=256))
        assert done == len(lines)

    return run


def training(model_dir: Path, data_dir: Path, updates: int):
    """A function that runs `updates` training updates at the model's own tokens per update,
    label smoothing and learning rate (no clipping; the loss per target token whatever the
    model's normalization, which scales the gradient and changes no operator), and one that
    starts the batches over."""
    import numpy as np
    import torch

    from nmt_cli import checkpoint
    from nmt_cli.batching import collate, make_batches
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.loss import Objective

    loaded = checkpoint.load_model(model_dir, "cpu")
    model, train = loaded.model.train(), loaded.config.train
    data = load_data_dir(data_dir)
    src, tgt = data.ids("train", "src"), data.ids("train", "tgt")
    lengths = [np.array([len(side[i]) for i in range(len(side))]) for side in (src, tgt)]
    # `updates` batches, taken in turn: every pass of `updates` updates (the timed one, the
    # counted one, the profiled one) runs the same batches once `restart` has been called
    batches = make_batches(*lengths, train.batch_tokens, seed=1, epoch=0)[:updates]
    prepared = [collate([src[i] for i in rows], [tgt[i] for i in rows]) for rows in batches]
    objective = Objective(model, label_smoothing=train.label_smoothing)
    optimizer = torch.optim.Adam(model.parameters(), lr=train.lr)
    state = {"next": 0}

    def one_update() -> int:
        batch = prepared[state["next"] % len(prepared)]
        state["next"] += 1
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = objective(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out)
        (loss / batch.n_tokens).backward()
        optimizer.step()
        return batch.n_tokens

    def restart() -> None:
        state["next"] = 0

    return model, optimizer, one_update, restart


def measure(args) -> dict:
    from nmt_cli.translator import Translator

    rates = machine_rates()
    model = args.model.resolve()
    shown = model.relative_to(REPO_DIR) if model.is_relative_to(REPO_DIR) else model
    results = {"model": str(shown), "rates": rates, "workloads": {}}
    lines = test_lines(args.data, max(args.batch_sentences, args.single_sentences))
    phases = Phases()
    instrument_code(phases)
    for name, count, batch, beam in (
        (WORKLOADS[0], args.batch_sentences, 64, 5),
        (WORKLOADS[1], args.batch_sentences, 64, 1),
        (WORKLOADS[2], args.single_sentences, 1, 5),
    ):
        translator = Translator.load(args.model)
        instrument_model(phases, translator.model, translator)
        run = translation(translator, lines[:count], batch, beam)
        run()  # warm-up
        phases.seconds.clear()
        phases.calls.clear()
        start = time.perf_counter()
        run()
        total = time.perf_counter() - start
        results["workloads"][name] = summarise(phases, run, total, count, "sentences", rates)
        print(name, f"{total:.2f} s", flush=True)

    model, optimizer, one_update, restart = training(args.model, args.data, args.updates)
    phases.stack[0] = "other (loss, Python glue)"
    instrument_model(phases, model)
    phases.wrap(optimizer, "step", "optimizer step (Adam)")
    for _ in range(2):
        one_update()
    phases.seconds.clear()
    phases.calls.clear()
    restart()
    start = time.perf_counter()
    tokens = sum(one_update() for _ in range(args.updates))
    total = time.perf_counter() - start
    results["workloads"][WORKLOADS[3]] = summarise(
        phases, lambda: one_update(), total, tokens, "target tokens", rates, per=args.updates
    )
    print(WORKLOADS[3], f"{total:.2f} s", flush=True)
    results["finished_utc"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return results


def summarise(phases: Phases, run, total: float, units: int, unit: str, rates, per: int = 1):
    """Timed phases of one pass, and the operators, FLOPs and bytes of a second, counted pass."""
    import torch

    rest = phases.stack[0]  # what no wrapped function covers
    timed = dict(phases.seconds)
    timed[rest] = total - sum(v for k, v in timed.items() if k != rest)
    calls = dict(phases.calls)
    with counting(phases) as counts:
        for _ in range(per):
            run()
    counted = {phase: dict(entry) for phase, entry in counts.items()}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for _ in range(per):
            run()
    table = sorted(profiler.key_averages(), key=lambda e: -e.self_cpu_time_total)[:15]
    operators = [
        {"name": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1000} for e in table
    ]
    profiled_ms = sum(e.self_cpu_time_total for e in profiler.key_averages()) / 1000
    rows = []
    for phase in sorted(timed, key=lambda p: -timed[p]):
        entry = counted.get(phase, {"ops": 0, "flops": 0.0, "bytes": 0.0})
        compute = entry["flops"] / (rates["matmul_gflops"] * 1e9)
        floor = entry["ops"] * rates["op_us"] / 1e6
        rows.append(
            {
                "phase": phase,
                "seconds": timed[phase],
                "calls": calls.get(phase, 0),
                "ops": entry["ops"],
                "gflop": entry["flops"] / 1e9,
                "gbytes": entry["bytes"] / 1e9,
                "compute_s": compute,
                "uncached_memory_s": entry["bytes"] / (rates["copy_gbs"] * 1e9),
                "op_floor_s": floor,
                "best_s": max(compute, floor),
            }
        )
    return {
        "seconds": total,
        "units": units,
        "unit": unit,
        "per_second": units / total,
        "phases": rows,
        "operators": operators,
        "profiled_self_ms": profiled_ms,
    }


# Report ----------------------------------------------------------------------------------------


def roofline(results: dict) -> dict[str, dict]:
    """Per workload: its measured rate and the rate at its best time (units per second)."""
    found = {}
    for name, work in results["workloads"].items():
        best_s = sum(row["best_s"] for row in work["phases"])
        found[name] = {
            "unit": work["unit"],
            "measured": work["per_second"],
            "best": work["units"] / best_s if best_s > 0 else None,
        }
    return found


def render(results: dict) -> str:
    rates = results["rates"]
    out = [
        "# Where the time goes: beam and greedy search and a training update (`make profile`)",
        "",
        f"Written by `make profile` (bench/profile_report.py) from bench/profile.json, "
        f"finished {results['finished_utc']}; model {results['model']} (the reference "
        "architecture: additive attention, input feeding, 256-unit biGRU encoder, 512-unit "
        "decoder, 8,000 pieces).",
        "",
        f"Machine rates measured in the same run, at torch's {rates['threads']} threads: "
        f"fp32 matmul {rates['matmul_gflops']:.1f} GFLOP/s (2048³), copy bandwidth "
        f"{rates['copy_gbs']:.1f} GB/s (a 256 MiB clone, read + write), "
        f"{rates['op_us']:.1f} µs to dispatch one tiny operator (`torch.add` of 1-element "
        "tensors).",
        "",
        "Columns: own time of the phase in the timed pass; calls of its wrapped function; "
        "aten operators, GFLOP (matrix products, the GRU) and GB of tensor arguments and "
        "results it ran in a second, counted pass; its compute floor (GFLOP ÷ matmul rate) "
        "and operator floor (operators × the cost of one tiny operator), lower bounds both, "
        "and the best time, the larger of the two; the uncached time, GB ÷ bandwidth, what "
        "its traffic would take if nothing stayed in cache (an upper bound on the memory "
        "time). The phases add up to the whole time.",
    ]
    for name in (name for name in WORKLOADS if name in results["workloads"]):
        work = results["workloads"][name]
        out += [
            "",
            f"## {name}",
            "",
            f"{work['units']:,} {work['unit']} in {work['seconds']:.2f} s: "
            f"{work['per_second']:,.1f} {work['unit']}/s.",
            "",
            "| phase | seconds | share | calls | operators | GFLOP | GB | compute floor s "
            "| operator floor s | best s | measured ÷ best | uncached s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in work["phases"]:
            ratio = row["seconds"] / row["best_s"] if row["best_s"] > 0 else float("nan")
            out.append(
                f"| {row['phase']} | {row['seconds']:.3f} | "
                f"{row['seconds'] / work['seconds'] * 100:.0f} % | {row['calls']:,} | "
                f"{row['ops']:,} | {row['gflop']:.2f} | {row['gbytes']:.2f} | "
                f"{row['compute_s']:.3f} | {row['op_floor_s']:.3f} | {row['best_s']:.3f} | "
                f"{ratio:.1f} | {row['uncached_memory_s']:.3f} |"
            )
        total = {key: sum(row[key] for row in work["phases"]) for key in
                 ("ops", "gflop", "gbytes", "compute_s", "op_floor_s", "best_s",
                  "uncached_memory_s")}  # fmt: skip
        out.append(
            f"| **all** | {work['seconds']:.3f} | 100 % | | {total['ops']:,} | "
            f"{total['gflop']:.2f} | {total['gbytes']:.2f} | {total['compute_s']:.3f} | "
            f"{total['op_floor_s']:.3f} | {total['best_s']:.3f} | "
            f"{work['seconds'] / total['best_s']:.1f} | {total['uncached_memory_s']:.3f} |"
        )
        top = work["phases"][0]
        out += [
            "",
            f"At its best time ({total['best_s']:.3f} s) this workload would run at "
            f"{work['units'] / total['best_s']:,.1f} {work['unit']}/s, "
            f"{work['seconds'] / total['best_s']:.1f}× its measured rate; its largest phase, "
            f"{top['phase']} ({top['seconds'] / work['seconds'] * 100:.0f} %), ran at "
            f"{top['seconds'] / top['best_s']:.1f}× its own best time.",
        ]
        out += [
            "",
            f"Operators by own CPU time (torch.profiler, a third pass; "
            f"{work['profiled_self_ms']:,.0f} ms profiled in all):",
            "",
            "| operator | calls | own ms |",
            "|---|---:|---:|",
        ]
        out += [f"| `{op['name']}` | {op['calls']:,} | {op['self_ms']:.1f} |" for op in
                work["operators"]]  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    args = parse_args()
    json_path, md_path = args.out / "profile.json", args.out / "PROFILE.md"
    if args.render:
        results = json.loads(json_path.read_text(encoding="utf-8"))
    else:
        for path in (args.model, args.data):
            if not path.is_dir():
                sys.exit(f"{path} is missing: run `make average-report` (or give --model/--data)")
        results = measure(args)
        args.out.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(render(results), encoding="utf-8")
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
