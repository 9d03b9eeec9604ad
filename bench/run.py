"""`make bench`: our speed, quality and memory side by side with OpenNMT-py and Joey NMT.

Prepares Multi30k de→en once (one joint SentencePiece model for every system), installs the
peers in their own environments, then measures training throughput and memory, translation
speed, one-sentence latency and (not meaningful after minutes of training) BLEU, and writes
bench/RESULTS.md and bench/results.json. Every step logs to bench/work/logs/.

    .venv/bin/python bench/run.py [--systems nmt,nmt-fast] [--skip-install] [--bench-minutes 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import dataset
import flops
import goals
import install
import machine
import measure
import metrics
import procs
import profile_report
import report
import systems
from layout import BENCH_DIR, DEFAULT_DATA, Layout
from steps import Recorder
from systems import SYSTEMS

from nmt_cli.device import native_bf16

ALL_SYSTEMS = ",".join(SYSTEMS)
# The default: every system this machine can train (nmt-bf16 needs bfloat16 hardware).
DEFAULT_SYSTEMS = ",".join(name for name in SYSTEMS if name != "nmt-bf16" or native_bf16())


def common_parser(description: str) -> argparse.ArgumentParser:
    """The options `make bench` and `make bench-quality` share."""
    parser = argparse.ArgumentParser(description=description)
    add = parser.add_argument
    add("--data", type=Path, default=DEFAULT_DATA, help="Multi30k folder (*.de.gz, *.en.gz)")
    add("--systems", default=DEFAULT_SYSTEMS, help=f"comma-separated subset of {ALL_SYSTEMS}")
    add("--skip-install", action="store_true", help="use the peer environments as they are")
    add("--test-sentences", type=int, default=0, help="translate only the first N (0: all)")
    add("--vocab-size", type=int, default=8000, help="SentencePiece pieces (joint model)")
    add("--work", type=Path, default=BENCH_DIR / "work", help="the git-ignored work folder")
    add("--out", type=Path, default=BENCH_DIR, help="where the report files go")
    return parser


def check_systems(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Turn --systems into a list of known names, or stop with a usage error."""
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {ALL_SYSTEMS}")


def has_bf16(device: str) -> bool:
    """Whether `device` (cpu, cuda) computes bfloat16 in hardware."""
    import torch

    from nmt_cli.device import gpu_bf16

    return gpu_bf16(torch.device("cuda")) if device == "cuda" else native_bf16()


def check_gpu(parser: argparse.ArgumentParser, systems: list[str]) -> None:
    """Stop with a usage error when --device cuda finds no GPU, or nmt-bf16 no bfloat16."""
    import torch

    if not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU here; run without it (the CPU)")
    if "nmt-bf16" in systems and not has_bf16("cuda"):
        parser.error(
            f"nmt-bf16: {torch.cuda.get_device_name(0)} has no bfloat16 hardware; "
            "leave nmt-bf16 out of --systems"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of the speed benchmark."""
    parser = common_parser(__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--bench-minutes", type=float, default=3.0, help="training-loop minutes per system")
    add("--warmup-minutes", type=float, default=1.0, help="not measured (at most a third)")
    add("--latency-runs", type=int, default=5, help="rounds of the one-sentence latency (0: none)")
    add("--rounds", type=int, default=3, help="interleaved rounds of every translation row")
    add(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="train and translate every system on the CPU or on the first GPU",
    )
    add(
        "--render",
        action="store_true",
        help="measure nothing: recompute the goals of OUT/results.json, rewrite it and RESULTS.md",
    )
    args = parser.parse_args(argv)
    check_systems(parser, args)
    if args.device == "cuda" and not args.render:
        check_gpu(parser, args.systems)
    args.warmup_s = round(60 * min(args.warmup_minutes, args.bench_minutes / 3), 1)
    return args


def prepare(rec: Recorder, layout: Layout, args, commands: list[str]) -> dataset.TestSet | None:
    """Install the peers that take part and prepare the shared data; None if that failed."""
    peers = [SYSTEMS[name].kind for name in args.systems if not SYSTEMS[name].ours]
    with rec.step("install peers"):
        if args.skip_install:
            install.check_installed(layout, peers)
        else:
            commands += install.install_peers(layout, peers)
    with rec.step("prepare data"):
        test = dataset.make(args.data, layout, args.vocab_size, args.test_sentences)
        commands.append(procs.shown(dataset.prepare_command(args.data, layout, args.vocab_size)))
        return test
    return None


class Bench:
    """One speed benchmark run: its options, work folder, step recorder and results."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.layout = Layout(args.work.resolve(), args.device)
        self.layout.make()
        options = {
            key: getattr(args, key)
            for key in (
                "systems",
                "bench_minutes",
                "warmup_s",
                "test_sentences",
                "latency_runs",
                "rounds",
                "vocab_size",
                "device",
            )
        }
        options["data"] = procs.shown([args.data])
        options["peer_stop"] = "loop start"  # see report._peer_stop
        if args.device == "cuda":
            options["gpu_amp"] = False  # see report._gpu_lines
        formulas = {name: arch.formula() for name, arch in flops.ARCHS.items()}
        matmul = flops.GPU_MATMUL_COMMAND if args.device == "cuda" else flops.MATMUL_COMMAND
        self.results = metrics.BenchResults(
            machine.describe(args.device), {}, options, None, matmul, formulas
        )
        self.rec = Recorder(self.results.steps)
        self.models: dict[str, Path] = {}

    def measure_machine(self) -> None:
        """Versions and the matmul rate, in this run."""
        r, peers = self.results, [SYSTEMS[s].kind for s in self.args.systems if not SYSTEMS[s].ours]
        with self.rec.step("versions"):
            r.versions = machine.versions(self.layout, peers)
        device = self.args.device
        with self.rec.step("matmul rate"):
            r.matmul_gflops = flops.matmul_gflops(device=device)
            if has_bf16(device):
                r.bf16_matmul_gflops = flops.matmul_gflops(dtype="bfloat16", device=device)

    def train_all(self) -> None:
        """Throughput runs, one system after the other; keeps the checkpoints they leave."""
        for name in self.args.systems:
            system = SYSTEMS[name]
            with self.rec.step(f"train {name}"):
                run = measure.train(
                    self.layout,
                    system,
                    60 * self.args.bench_minutes,
                    self.args.warmup_s,
                    self.results.matmul_gflops or float("nan"),
                )
                self.results.training.append(run)
                self.results.commands.append(run.command)
                self.models[name] = systems.checkpoint(system, self.layout.models / f"speed-{name}")
                if system.ours:  # what its training's check of the shortlist found
                    meta = self.models[name] / "meta.json"
                    record = json.loads(meta.read_text(encoding="utf-8")).get("shortlist")
                    self.results.shortlist_checks[name] = record

    def translation_jobs(self) -> list[tuple]:
        """(system, model, beam, quantize, stop, shortlist, batch, bf16) of every translation
        row: greedy and beam 5 at batch 64 and beam 5 at batch 1 for every trained system; ours
        (but nmt-bf16) also with --quantize, nmt also at beam 5 with --early-stop (the stopping
        rule the peers use), with --exact-stop (batch 64 and 1: what our default stopping bound
        saves) and with --shortlist, and, where the CPU runs bfloat16 natively, with --bf16
        (greedy and beam 5, batch 64 and 1, and with --shortlist). `stop` is "", "early" or
        "exact"; `shortlist` None (the model's default, as its training's check decided), True
        (--shortlist) or False (--no-shortlist). On a CPU ours run the three plain rows also with
        --no-shortlist: the exact search their default is judged against. The speed-up rows
        (--quantize, --early-stop, --exact-stop, --bf16) take the default, as a user's command
        with that flag does. On a GPU: greedy and beam 5 at batch
        64, beam 5 at batch 1, and nmt's beam 5 with --early-stop (--quantize and --shortlist
        are CPU speed-ups)."""
        cpu = self.args.device == "cpu"
        jobs = []
        for name, model in self.models.items():
            system = SYSTEMS[name]
            if system.train_only:
                continue
            plain = [(beam, False, "", None, 64, False) for beam in (1, 5)]
            plain.append((5, False, "", None, 1, False))
            runs = list(plain)
            if cpu and system.ours:
                runs += [
                    (beam, q, stop, False, batch, bf16) for beam, q, stop, _, batch, bf16 in plain
                ]
            if cpu and system.ours and system.speedups:
                runs += [(1, True, "", None, 64, False), (5, True, "", None, 64, False)]
            if name == "nmt":
                runs.append((5, False, "early", None, 64, False))
            if name == "nmt" and cpu:
                runs.append((5, True, "early", None, 64, False))
                runs += [
                    (5, False, "exact", None, 64, False),
                    (5, False, "exact", None, 1, False),
                ]
                runs += [(5, False, "", True, 64, False), (5, True, "", True, 64, False)]
                if native_bf16():
                    runs += [(beam, False, "", None, 64, True) for beam in (1, 5)]
                    runs += [(5, False, "", None, 1, True), (5, False, "", True, 64, True)]
            jobs += [(system, model, *run) for run in runs]
        return jobs

    def translate_all(self, test: dataset.TestSet) -> None:
        """Every translation row once per round, `--rounds` interleaved rounds, so a slow phase
        of the machine meets every system alike; a row that fails is not run again."""
        jobs = self.translation_jobs()
        done: list[list[measure.TranslationResult]] = [[] for _ in jobs]
        tests = {64: test, 1: dataset.head(test, metrics.BATCH1_SENTENCES, self.layout)}
        for round_ in range(self.args.rounds):
            for index, job in enumerate(jobs):
                system, model, beam, quantize, stop, shortlist, batch, bf16 = job
                if any(run.returncode != 0 for run in done[index]):
                    continue
                label = f"translate {system.name} beam {beam}{' int8' if quantize else ''}"
                label += f" {stop}-stop" if stop else ""
                label += {True: " shortlist", False: " no-shortlist", None: ""}[shortlist]
                label += " bf16" if bf16 else ""
                label += f" batch {batch}" if batch != 64 else ""
                with self.rec.step(f"{label}, round {round_ + 1}"):
                    run = measure.translate(
                        self.layout,
                        system,
                        model,
                        tests[batch],
                        beam,
                        quantize,
                        stop=stop,
                        shortlist=shortlist,
                        batch=batch,
                        bf16=bf16,
                    )
                    done[index].append(run)
                    if round_ == 0:
                        self.results.commands.append(run.command)
                    if run.returncode != 0:
                        raise RuntimeError(f"{label} exited with {run.returncode}")
        self.results.translation = [measure.combine(runs) for runs in done if runs]

    def latency_all(self, test: dataset.TestSet) -> None:
        """The one-sentence latency of every trained system, in rounds with a bare
        `import torch` (the floor the latency goal is set against): each round runs the bare
        import and then every system once, so a slow phase of the machine meets all alike."""
        trained = [
            (SYSTEMS[name], model)
            for name, model in self.models.items()
            if not SYSTEMS[name].train_only
        ]
        if self.args.latency_runs < 1:
            return
        with self.rec.step("latency, alternating with a bare import torch"):
            r = self.results
            r.import_torch, r.latency = measure.latency(
                self.layout, trained, test, self.args.latency_runs
            )
            r.commands += [r.import_torch.command, *(run.command for run in r.latency)]

    def profile(self, test: dataset.TestSet) -> None:
        """The roofline of our reference-architecture model (bench/profile_report.py on the
        model this run trained): each speed goal's workload, its measured in-process rate and
        the rate at its best time, for the goals it misses."""
        model = self.models.get("nmt")
        if model is None or self.args.device != "cpu":  # the roofline is the CPU's
            return
        with self.rec.step("profile nmt (roofline)"):
            out = self.layout.work / "profile"
            out.mkdir(parents=True, exist_ok=True)
            script = BENCH_DIR / "profile_report.py"
            command = [sys.executable, script, "--model", model, "--data", self.layout.nmt_data]
            command += ["--batch-sentences", str(test.sentences)]  # the bench's sentences
            command += ["--single-sentences", str(metrics.BATCH1_SENTENCES), "--out", out]
            run = procs.run(command, self.layout.log("profile-nmt"))
            self.results.commands.append(run.command)
            if run.returncode != 0:
                raise RuntimeError(f"the profile exited with {run.returncode}")
            data = json.loads((out / "profile.json").read_text(encoding="utf-8"))
            self.results.roofline = {"rates": data["rates"], **profile_report.roofline(data)}

    def run(self) -> int:
        """Every step in order, then the report; non-zero if any step failed."""
        started = time.perf_counter()
        test = prepare(self.rec, self.layout, self.args, self.results.commands)
        self.measure_machine()
        if test is not None:
            self.train_all()
            self.translate_all(test)
            self.latency_all(test)
            self.profile(test)
        with self.rec.step("matmul rate, again at the end"):
            self.results.matmul_gflops_end = flops.matmul_gflops(device=self.args.device)
        self.results.goals = goals.goals(self.results)
        self.results.total_s = time.perf_counter() - started
        md, js = report.write(self.results, self.args.out)
        print(f"wrote {md} and {js} in {self.results.total_s / 60:.1f} min", file=sys.stderr)
        return 1 if self.rec.failed else 0


def render(folder: Path) -> int:
    """Rewrite the report of the run stored in `folder`/results.json with today's tables."""
    results = report.load(folder / "results.json")
    results.goals = goals.goals(results)
    md, _ = report.write(results, folder)
    print(f"rewrote {md} from {folder / 'results.json'}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the speed benchmark with the options in `argv`."""
    args = parse_args(argv)
    if args.render:
        return render(args.out)
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
