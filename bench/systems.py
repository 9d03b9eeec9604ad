"""The four systems and how to drive each: train, find the checkpoint, translate, read output.

`onmt` (OpenNMT-py) and `joey` (Joey NMT) run in their own environments on pre-tokenized
pieces; `nmt` (ours, data/configs/reference.toml), `nmt-2p` (the same, trained by two
processes of one thread each with DDP: training is measured, the model is the same as `nmt`'s),
`nmt-auto` (the same, with the processes and threads `--nproc auto` picks from a short probe),
`nmt-fast` (the same sizes with `--attention general --no-input-feed`, Luong style, so the
decoder runs on the fused path) and `nmt-bf16` (reference.toml trained with `--bf16`: bfloat16
mixed precision, on CPUs with AMX or AVX-512 BF16) read raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import configs
from dataset import TestSet
from layout import BENCH_DIR, OUR_NMT, Layout

# Allowance for a system to start before its training loop runs: a peer that has not started
# its loop by then is timed from then on.
STARTUP_S = 30.0
NMT_FAST_FLAGS = ("--attention", "general", "--no-input-feed", "--decoder-style", "luong")
SPECIAL_PIECES = {"<unk>", "<s>", "</s>", "<blank>", "<pad>"}
LOG_EVERY = 5  # progress reports every 5 updates, for fine throughput windows
NEVER = 1_000_000  # "validate every" for throughput runs: no validation inside the budget
MAX_OUTPUT = 100  # output length limit in pieces, the same for every system (the peers' own)
# Batch sizes that give every system about the same target tokens per update as ours (1,981
# non-pad target tokens at `batch_tokens = 2000`). Both peers count a batch in padded
# max(source, target) tokens, so 2000 of theirs hold fewer target tokens: OpenNMT-py sorts
# within buckets (1,744 at 2000), Joey NMT batches in random order (918 at 2000); the sizes
# below scale those counts by a replay of each toolkit's batching on the kept pairs and a
# one-minute check run. The report shows the counts measured in the run and judges no
# throughput ratio when they differ by more than report.TOKENS_PER_UPDATE_TOLERANCE.
PEER_BATCH = {"onmt": 2320, "joey": 4850}


@dataclass
class Command:
    """One command line with its environment and redirections."""

    argv: list
    extra_env: dict[str, str] = field(default_factory=dict)
    stdin: Path | None = None
    stdout: Path | None = None
    output: Path | None = None  # the file holding the translations
    input_text: str | None = None


@dataclass(frozen=True)
class System:
    """One benchmarked system: its name, kind of toolkit, label and FLOPs architecture."""

    name: str
    kind: str  # onmt, joey or nmt: log format and command family
    label: str
    arch: str  # key of flops.ARCHS
    flags: tuple[str, ...] = ()  # extra `nmt train` flags
    train_only: bool = False  # the same model as another system: measure training only
    speedups: bool = True  # ours: also translate with --quantize (nmt-bf16: its plain rows only)
    # A training speed-up that changes the model: its training goal passes only if its beam-5
    # BLEU stays within goals.BLEU_TOLERANCE of this system's (trained as long, in the same run).
    quality_against: str = ""

    @property
    def ours(self) -> bool:
        """True for our own CLI, False for a peer toolkit."""
        return self.kind == "nmt"


SYSTEMS = {
    "onmt": System("onmt", "onmt", "OpenNMT-py 3.5.1", "reference"),
    "joey": System("joey", "joey", "Joey NMT 2.3.0", "reference"),
    "nmt": System("nmt", "nmt", "nmt (reference.toml)", "reference"),
    "nmt-2p": System(
        "nmt-2p",
        "nmt",
        "nmt (reference.toml, 2 processes × 1 thread × 1,000 tokens)",
        "reference",
        ("--nproc", "2", "--threads", "1", "--batch-tokens", "1000"),
        train_only=True,
    ),
    # The layout `nmt train --nproc auto` picks from its probe (run before the training loop,
    # outside its clock): one of the two above, chosen on this machine in this run.
    "nmt-auto": System(
        "nmt-auto",
        "nmt",
        "nmt (reference.toml, --nproc auto)",
        "reference",
        ("--nproc", "auto"),
        train_only=True,
    ),
    "nmt-fast": System(
        "nmt-fast", "nmt", "nmt-fast (general, no input feed)", "fast", NMT_FAST_FLAGS
    ),
    # Only where the CPU computes bfloat16 in hardware (`nmt train --bf16` is refused elsewhere).
    "nmt-bf16": System(
        "nmt-bf16",
        "nmt",
        "nmt (reference.toml, --bf16 mixed precision)",
        "reference",
        ("--bf16",),
        speedups=False,
        quality_against="nmt",
    ),
}


def _python(layout: Layout, system: System) -> Path:
    return layout.venv(system.kind) / "bin" / "python"


def _peer_overrides(system: System, run_dir: Path, speed: bool, device: str) -> dict:
    if system.kind == "onmt":
        paths = {
            "save_data": run_dir / "run",
            "log_file": run_dir / "train.log",
            "save_model": run_dir / "model",
            "batch_size": PEER_BATCH["onmt"],
        }
        timing = {"report_every": LOG_EVERY, "valid_steps": NEVER, "save_checkpoint_steps": NEVER}
        gpu = {"world_size": 1, "gpu_ranks": [0]} if device == "cuda" else {}
    else:
        paths = {"training.model_dir": run_dir, "training.batch_size": PEER_BATCH["joey"]}
        timing = {"training.logging_freq": LOG_EVERY, "training.validation_freq": NEVER}
        gpu = {"use_cuda": True} if device == "cuda" else {}
    return {**paths, **(timing if speed else {}), **gpu}


def _our_device(layout: Layout) -> list[str]:
    """`--device cuda` on a GPU run (our default, auto, would pick it too: this makes a missing
    GPU an error rather than a CPU run); nothing on the CPU."""
    return ["--device", layout.device] if layout.device != "cpu" else []


def _nmt_train(layout: Layout, system: System, run_dir: Path, seconds: float, speed: bool):
    extra = {"log_every": LOG_EVERY, "valid_sentences": 100} if speed else {}
    # On a GPU our default is mixed precision (`amp`); the peers train in float32, and so does
    # `nmt` here: only nmt-bf16 (--bf16) trains in bfloat16, as on the CPU.
    extra |= {"amp": False} if layout.device == "cuda" else {}
    config = configs.nmt_config(layout.configs / f"{run_dir.name}.toml", extra)
    argv = [OUR_NMT, "train", layout.nmt_data, "-o", run_dir, "--config", config, "--force"]
    argv += ["--max-time", f"{seconds:g}s", *system.flags, *_our_device(layout)]
    return Command(argv + (["--valid-every", str(NEVER)] if speed else []))


def train_command(
    layout: Layout, system: System, run_dir: Path, seconds: float, speed: bool
) -> Command:
    """Train for `seconds` of loop time; `speed` sets fine logging and no validation."""
    if system.ours:
        return _nmt_train(layout, system, run_dir, seconds, speed)
    config = configs.peer_config(
        system.kind,
        layout.peers,
        layout.configs / f"{run_dir.name}.yaml",
        _peer_overrides(system, run_dir, speed, layout.device),
    )
    python = _python(layout, system)
    if system.kind == "onmt":
        return Command([python, BENCH_DIR / "onmt_train_sigint.py", "-config", config])
    return Command([python, "-m", "joeynmt", "train", config, "--skip-test"])


def train_log(system: System, run_dir: Path, stderr_log: Path) -> Path:
    """The log whose progress reports give the throughput (OpenNMT-py's are on stderr)."""
    if system.kind == "onmt":
        return stderr_log
    return run_dir / ("train.jsonl" if system.ours else "train.log")


def _newest(paths: list[Path], pattern: str) -> Path:
    numbered = [(int(m.group(1)), p) for p in paths if (m := re.search(pattern, p.name))]
    if not numbered:
        raise FileNotFoundError(
            f"no checkpoint matching {pattern} in {paths[0].parent if paths else '?'}"
        )
    return max(numbered)[1]


def checkpoint(system: System, run_dir: Path) -> Path:
    """The checkpoint a training run left: the model directory for ours, the last save for peers."""
    if system.ours:
        return run_dir
    pattern = r"^model_step_(\d+)\.pt$" if system.kind == "onmt" else r"^(\d+)\.ckpt$"
    return _newest(sorted(run_dir.iterdir()), pattern)


def translate_command(
    layout: Layout,
    system: System,
    model: Path,
    beam: int,
    test: TestSet,
    out: Path,
    quantize: bool = False,
    stop: str = "",
    shortlist: bool | None = None,
    batch: int = 64,
    bf16: bool = False,
) -> Command:
    """Translate the test set with `batch` sentences a batch and beam `beam` (1 = greedy);
    ours with `stop` "early" or "exact" adds --early-stop or --exact-stop, and `shortlist`
    True or False --shortlist or --no-shortlist (None: the model's default)."""
    if system.ours:
        argv = [OUR_NMT, "translate", "-m", model, "-i", test.raw_src, "--beam", str(beam)]
        argv += ["--max-len", str(MAX_OUTPUT)]
        argv += ["--batch-size", str(batch), *(["--quantize"] if quantize else [])]
        argv += [f"--{stop}-stop"] if stop else []
        argv += {True: ["--shortlist"], False: ["--no-shortlist"], None: []}[shortlist]
        argv += ["--bf16"] if bf16 else []
        return Command([*argv, *_our_device(layout)], stdout=out, output=out)
    if system.kind == "onmt":
        return Command(
            _onmt_translate(layout, model, beam, test.pieces_src, out, batch),
            extra_env=ONMT_ENV,
            output=out,
        )
    config = _joey_translate_config(layout, model, beam, batch)
    argv = [_python(layout, system), "-m", "joeynmt", "translate", config]
    return Command(argv, stdin=test.pieces_src, stdout=out, output=out)


ONMT_ENV = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # its checkpoints hold an argparse.Namespace


ONMT_SEARCH = f"-batch_type sents -max_length {MAX_OUTPUT} -length_penalty wu -alpha 1.0"


def _onmt_translate(
    layout: Layout, model: Path, beam: int, src: Path, out: Path, batch: int = 64
) -> list:
    """onmt_translate with the peers' search settings: GNMT length penalty 1.0, max length 100."""
    binary = layout.venv("onmt") / "bin" / "onmt_translate"
    argv = [binary, "-model", model, "-src", src, "-output", out, "-beam_size", str(beam)]
    gpu = "0" if layout.device == "cuda" else "-1"
    return argv + ["-batch_size", str(batch), *ONMT_SEARCH.split(), "-gpu", gpu]


def _joey_translate_config(
    layout: Layout, checkpoint_path: Path, beam: int, batch: int = 64
) -> Path:
    run_dir = checkpoint_path.parent
    target = layout.configs / f"{run_dir.name}-translate-beam{beam}-batch{batch}.yaml"
    overrides = {
        "training.model_dir": run_dir,
        "testing.load_model": checkpoint_path,
        "testing.beam_size": beam,
        "testing.batch_size": batch,
        "testing.batch_type": "sentence",
        "testing.max_output_length": MAX_OUTPUT,
        **({"use_cuda": True} if layout.device == "cuda" else {}),
    }
    return configs.peer_config("joey", layout.peers, target, overrides)


def latency_command(layout: Layout, system: System, model: Path, text: str, out: Path) -> Command:
    """Translate one sentence given on stdin with beam 5, as a person would from the shell."""
    line = text + "\n"
    if system.ours:
        argv = [OUR_NMT, "translate", "-m", model, "--max-len", str(MAX_OUTPUT)]
        argv += _our_device(layout)
        return Command(argv, stdout=out, output=out, input_text=line)
    if system.kind == "onmt":
        argv = _onmt_translate(layout, model, 5, Path("/dev/stdin"), out)
        return Command(argv, extra_env=ONMT_ENV, output=out, input_text=line)
    config = _joey_translate_config(layout, model, 5)
    argv = [_python(layout, system), "-m", "joeynmt", "translate", config]
    return Command(argv, stdout=out, output=out, input_text=line)


def hypotheses(system: System, output: Path, spm_model: Path) -> list[str]:
    """The translations as detokenized text: ours as written, the peers' pieces decoded."""
    lines = output.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if system.ours:
        return lines
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(spm_model))
    return [
        processor.decode_pieces([p for p in line.split(" ") if p and p not in SPECIAL_PIECES])
        for line in lines
    ]
