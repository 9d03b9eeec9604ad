"""eflomal (Östling & Tiedemann 2016) word alignments of the demo test split, for comparison.

Uses the eflomal that `make install` puts into .venv (the [align] extra, guided alignment's
teacher), or installs it into its own git-ignored environment (bench/work/venv-eflomal); aligns the demo training data together with the test split (an unsupervised
aligner learns from the whole corpus it is given), keeps the test pairs' links, and writes
them in both directions and symmetrised with our grow-diag-final-and (fast_align's `atools`
is not installed here; both implement Koehn et al. 2003's heuristic).

    .venv/bin/python bench/eflomal_align.py --out runs/eflomal
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import venv
from pathlib import Path

from layout import BENCH_DIR, REPO_DIR

sys.path.insert(0, str(REPO_DIR))

from nmt_cli.alignment import format_pharaoh, parse_pharaoh, symmetrize  # noqa: E402

DEMO = REPO_DIR / "data" / "demo"
VERSION = "eflomal==2.0.0"


def install(env: Path) -> Path:
    own = Path(sys.executable).parent / "eflomal-align"  # nmt's [align] extra, when installed
    if own.exists():
        return own
    python = env / "bin" / "python"
    if not (env / "bin" / "eflomal-align").exists():
        venv.create(env, with_pip=True)
        subprocess.run([python, "-m", "pip", "install", "-q", VERSION], check=True)
    return env / "bin" / "eflomal-align"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--tgt-lang", default="zh")
    parser.add_argument("--train", nargs=2, type=Path, metavar=("SRC", "TGT"),
                        help="training text (default: the demo's training split)")  # fmt: skip
    parser.add_argument("--eval", nargs=2, type=Path, metavar=("SRC", "TGT"),
                        help="the pairs to align (default: the demo's test split)")  # fmt: skip
    parser.add_argument("--env", type=Path, default=BENCH_DIR / "work" / "venv-eflomal")
    parser.add_argument("--out", type=Path, default=REPO_DIR / "runs" / "eflomal")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    aligner = install(args.env)
    train = args.train or (DEMO / f"train.{args.src_lang}", DEMO / f"train.{args.tgt_lang}")
    evaluated = args.eval or (DEMO / f"test.{args.src_lang}", DEMO / f"test.{args.tgt_lang}")
    test_src, test_tgt = lines(evaluated[0]), lines(evaluated[1])
    src = lines(train[0]) + test_src
    tgt = lines(train[1]) + test_tgt
    (args.out / "all.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (args.out / "all.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    command = [
        str(aligner),
        "-s",
        str(args.out / "all.src"),
        "-t",
        str(args.out / "all.tgt"),
        "-f",
        str(args.out / "all.fwd"),
        "-r",
        str(args.out / "all.rev"),
    ]
    for name in ("all.fwd", "all.rev"):  # eflomal will not overwrite an earlier run's output
        (args.out / name).unlink(missing_ok=True)
    started = time.monotonic()
    subprocess.run(command, check=True)
    seconds = time.monotonic() - started
    n = len(test_src)
    forward = [parse_pharaoh(line) for line in lines(args.out / "all.fwd")[-n:]]
    reverse = [parse_pharaoh(line) for line in lines(args.out / "all.rev")[-n:]]
    merged = [
        symmetrize(f, r, "grow-diag-final-and", len(s.split()), len(t.split()))
        for f, r, s, t in zip(forward, reverse, test_src, test_tgt, strict=True)
    ]
    for name, links in (("forward", forward), ("reverse", reverse), ("gdfa", merged)):
        path = args.out / f"test.{name}"
        path.write_text("".join(format_pharaoh(a) + "\n" for a in links), encoding="utf-8")
    print(
        f"eflomal aligned {len(src):,} pairs in {seconds:.1f} s: "
        f"{' '.join(command)}; test links in {args.out}/test.{{forward,reverse,gdfa}}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
