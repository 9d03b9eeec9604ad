"""`make bench-quality`: every system trained for the same wall-clock budget, then test BLEU.

Each system trains for --quality-minutes (default 20) with its shared configuration as it is
(the peers validate at their own cadence; ours uses data/configs/reference.toml), then
translates the test set with beam 5, batch 64. Scores are sacreBLEU BLEU and chrF against the
raw reference, printed with their signatures. Writes bench/QUALITY.md and bench/quality.json.

    .venv/bin/python bench/quality.py [--systems onmt,nmt] [--quality-minutes 20]
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import machine
import measure
import systems
from layout import Layout
from run import check_systems, common_parser, prepare
from steps import Recorder, Step
from systems import SYSTEMS


@dataclass
class QualityResult:
    """One system after the wall-clock budget: its updates and its test scores."""

    system: str
    minutes: float
    updates: int
    bleu: float | None
    chrf: float | None
    bleu_signature: str
    chrf_signature: str
    translate_s: float
    train_command: str
    translate_command: str


@dataclass
class QualityResults:
    """The whole quality run."""

    machine: machine.Machine
    options: dict
    results: list[QualityResult] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)


def parse_args(argv: list[str] | None):
    """The command line of the quality benchmark."""
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--quality-minutes", type=float, default=20.0, help="training minutes each")
    args = parser.parse_args(argv)
    check_systems(parser, args)
    return args


def _updates(system: systems.System, run_dir: Path, model: Path) -> int:
    """Updates done: the step in the peers' checkpoint name, ours from the "done" event."""
    if not system.ours:
        return int(re.findall(r"\d+", model.name)[-1])
    events = (run_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()
    done = [json.loads(e) for e in events if '"done"' in e]
    return done[-1]["step"] if done else 0


def scores(hyps: list[str], ref: Path) -> tuple[float, float, str, str]:
    """BLEU and chrF of `hyps` against the reference file, with both signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    refs = ref.read_text(encoding="utf-8").split("\n")[: len(hyps)]
    bleu, chrf = BLEU(), CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return (
        round(b.score, 2),
        round(c.score, 2),
        str(bleu.get_signature()),
        str(chrf.get_signature()),
    )


def evaluate(layout: Layout, name: str, minutes: float, test) -> QualityResult:
    """Train `name` for `minutes`, translate the test set with beam 5 and score it."""
    system = SYSTEMS[name]
    train = measure.train(layout, system, 60 * minutes, 0.0, float("nan"), tag="quality")
    run_dir = layout.models / f"quality-{name}"
    model = systems.checkpoint(system, run_dir)
    out = measure.translate(layout, system, model, test, 5, tag="quality")
    if out.returncode != 0:
        raise RuntimeError(f"translating with {name} failed; see {layout.logs}")
    hyps = systems.hypotheses(
        system, layout.outputs / f"quality-{name}-beam5.txt", layout.nmt_data / "spm.model"
    )
    bleu, chrf, bleu_sig, chrf_sig = scores(hyps, test.ref)
    updates = _updates(system, run_dir, model)
    return QualityResult(
        name,
        minutes,
        updates,
        bleu,
        chrf,
        bleu_sig,
        chrf_sig,
        out.wall_s,
        train.command,
        out.command,
    )


def markdown(report: QualityResults) -> str:
    """QUALITY.md: one row per system, then the steps and commands."""
    m = report.machine
    lines = [
        "# Test BLEU after the same wall-clock training budget",
        "",
        f"- Date: {m.date_utc}; {m.nproc} cores ({m.cpu_model}), {m.mem_gib} GiB RAM",
        f"- Options: `{json.dumps(report.options)}`",
        "- Test: test_2016_flickr, beam 5, batch 64; ours: best checkpoint on dev; peers: "
        "the weights at the end of the budget.",
        "",
        "| system | minutes | updates | BLEU | chrF | translate s |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.results:
        lines.append(
            f"| {SYSTEMS[r.system].label} | {r.minutes:g} | {r.updates} | {r.bleu} | "
            f"{r.chrf} | {r.translate_s:.1f} |"
        )
    signatures = sorted({s for r in report.results for s in (r.bleu_signature, r.chrf_signature)})
    lines += ["", *(f"- sacreBLEU: `{s}`" for s in signatures), "", "## Steps", ""]
    lines += [
        f"- {s.name}: {s.seconds:.0f} s, load {s.load_at_start} {s.error}" for s in report.steps
    ]
    lines += ["", "## Commands", "", "```bash", *report.commands, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Train, translate and score every chosen system; write QUALITY.md and quality.json."""
    args = parse_args(argv)
    layout = Layout(args.work.resolve())
    layout.make()
    options = {
        "systems": args.systems,
        "quality_minutes": args.quality_minutes,
        "test_sentences": args.test_sentences,
        "data": str(args.data),
    }
    report = QualityResults(machine.describe(), options)
    rec = Recorder(report.steps)
    started = time.perf_counter()
    test = prepare(rec, layout, args, report.commands)
    for name in args.systems if test is not None else []:
        with rec.step(f"quality {name}"):
            result = evaluate(layout, name, args.quality_minutes, test)
            report.results.append(result)
            report.commands += [result.train_command, result.translate_command]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "QUALITY.md").write_text(markdown(report), encoding="utf-8")
    (args.out / "quality.json").write_text(
        json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8"
    )
    print(
        f"wrote {args.out / 'QUALITY.md'} in {(time.perf_counter() - started) / 60:.1f} min",
        file=sys.stderr,
    )
    return 1 if rec.failed else 0


if __name__ == "__main__":
    sys.exit(main())
