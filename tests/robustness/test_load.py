"""Load: long streams and many pairs. translate never reorders, drops or shifts a line and its
memory stays flat; eval and align hold no more than they need.

Peak memory is measured on a real process (`python -m nmt_cli`) by a parent of its own, so
other processes of the test session never count.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import WORDS, invoke

from nmt_cli import evaluate

# Short outputs keep the untrained toy model fast; the line handling is what is tested.
TRANSLATE = ("--beam", "1", "--max-len-ratio", "0.5", "--threads", "1")


def numbered_lines(n: int) -> list[str]:
    """Line k spells k in base 14 with the toy words, padded with k % 5 more words, so
    lengths vary from line to line (batches are sorted by length); every 97th line is empty
    and every 89th only whitespace."""
    lines = []
    for k in range(n):
        if k % 97 == 96:
            lines.append("")
            continue
        if k % 89 == 88:
            lines.append(" \t ")
            continue
        digits, rest = [], k
        while True:
            digits.append(WORDS[rest % len(WORDS)])
            rest //= len(WORDS)
            if not rest:
                break
        lines.append(" ".join(digits + [WORDS[(k * 7) % len(WORDS)]] * (k % 5)))
    return lines


def assert_line_for_line(model: Path, lines: list[str], out: list[str], sample: int) -> None:
    """One output per input, blank exactly where the input is blank, and a seeded sample of
    lines equal to what the model gives each line translated on its own."""
    from nmt_cli.translator import SearchOptions, Translator

    assert len(out) == len(lines)
    blank = [k for k, line in enumerate(lines) if not line.strip()]
    assert [k for k, text in enumerate(out) if not text] == blank
    translator = Translator.load(model, device="cpu")
    options = SearchOptions(beam_size=1, max_len_ratio=0.5)
    picked = sorted(random.Random(len(lines)).sample(range(len(lines)), sample))
    alone = {k: translator.translate_chunk([lines[k]], options)[0].text for k in picked}
    assert len(set(alone.values())) > 1  # the sample tells lines apart
    assert {k: out[k] for k in picked} == alone


def test_translate_keeps_every_line_of_a_long_stream_in_place(toy_model_dir):
    lines = numbered_lines(3_000)  # > 10 chunks of 256 lines, > 40 batches
    text = "".join(line + "\n" for line in lines)
    result = invoke("translate", "-m", toy_model_dir, *TRANSLATE, "--json", input=text)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record["source"] for record in records] == lines  # each numbered line in its place
    assert_line_for_line(toy_model_dir, lines, [r["translation"] for r in records], sample=120)


def peak_rss_mb(argv: list, stdin: Path, stdout: Path) -> float:
    """Run `python -m nmt_cli *argv` < stdin > stdout; its peak resident memory in MB."""
    probe = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[1], 'rb') as i, open(sys.argv[2], 'wb') as o:\n"
        "    code = subprocess.run(sys.argv[3:], stdin=i, stdout=o).returncode\n"
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    command = [sys.executable, "-c", probe, stdin, stdout, sys.executable, "-m", "nmt_cli", *argv]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    done = subprocess.run([str(a) for a in command], capture_output=True, text=True, env=env)
    code, kilobytes = map(int, done.stdout.split())
    assert code == 0, done.stderr
    return kilobytes / 1024


@pytest.mark.slow
def test_translate_memory_is_flat_from_2k_to_20k_lines(toy_model_dir, tmp_path):
    peaks = {}
    for n in (2_000, 20_000):
        lines = numbered_lines(n)
        source, target = tmp_path / f"in.{n}", tmp_path / f"out.{n}"
        source.write_text("".join(line + "\n" for line in lines))
        peaks[n] = peak_rss_mb(["translate", "-m", toy_model_dir, *TRANSLATE], source, target)
        out = target.read_text()
        assert out.endswith("\n")
        assert_line_for_line(toy_model_dir, lines, out[:-1].split("\n"), sample=200)
    assert peaks[20_000] <= 1.10 * peaks[2_000], peaks


# -- eval ----------------------------------------------------------------------------------------


def _sentences(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = "the a cat dog sat on mat ran fast slow big small red blue house tree 你好 世界".split()
    hyps, refs = [], []
    for _ in range(n):
        sentence = [rng.choice(words) for _ in range(rng.randint(1, 14))]
        hyps.append(" ".join(sentence))
        sentence[rng.randrange(len(sentence))] = rng.choice(words)
        refs.append(" ".join(sentence))
    return hyps, refs


def test_scores_summed_chunk_by_chunk_equal_sacrebleu(monkeypatch):
    from sacrebleu.metrics import BLEU, CHRF, TER

    hyps, refs = _sentences(500, seed=1)
    expected = [
        metric.corpus_score(hyps, [refs]).score
        for metric in (BLEU(), CHRF(), CHRF(word_order=2), TER())
    ]
    monkeypatch.setattr(evaluate, "_SCORE_CHUNK", 7)  # 72 chunks, the last one short
    scores = evaluate.score(hyps, [refs], evaluate.METRICS)
    assert [s.score for s in scores] == pytest.approx(expected, abs=1e-9)
    buckets = evaluate.bleu_by_length(hyps, hyps, [refs])
    assert sum(b.count for b in buckets) == 500


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_eval_scores_many_lines(tmp_path):
    hyps, refs = _sentences(20_000, seed=2)
    hyp, ref = _write(tmp_path / "hyp", hyps), _write(tmp_path / "ref", refs)
    result = invoke("eval", "--hyp", hyp, "--ref", ref, "--metrics", "bleu", "--json")
    assert result.exit_code == 0, result.stderr
    text = json.loads(result.stdout)["metrics"][0]["text"]
    assert f"hyp_len = {sum(len(h.split()) for h in hyps)}" in text


@pytest.mark.slow
def test_eval_on_100k_lines_holds_only_the_lines(tmp_path):
    peaks = {}
    for n in (10_000, 100_000):
        hyps, refs = _sentences(n, seed=n)
        hyp, ref = _write(tmp_path / f"hyp.{n}", hyps), _write(tmp_path / f"ref.{n}", refs)
        empty = _write(tmp_path / "empty", [])
        argv = ["eval", "--hyp", hyp, "--ref", ref, "--src", hyp, "--by-length", "--json"]
        peaks[n] = peak_rss_mb(argv, empty, tmp_path / f"scores.{n}")
        assert len(json.loads((tmp_path / f"scores.{n}").read_text())["metrics"]) == 3
    # 90,000 more short lines, held twice or three times, take some tens of MB; sacreBLEU's
    # n-gram caches over all of them at once took more than a gigabyte.
    assert peaks[100_000] - peaks[10_000] < 120, peaks


# -- align ---------------------------------------------------------------------------------------


def _pairs(n: int) -> list[str]:
    rng = random.Random(n)
    pairs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        pairs.append(f"{' '.join(words)} ||| {' '.join(w.upper() for w in reversed(words))}")
    return pairs


def test_align_many_pairs_in_order(toy_model_dir):
    pairs = _pairs(300)
    result = invoke("align", "-m", toy_model_dir, "--json", input="\n".join(pairs) + "\n")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["source"] for r in records] == [p.split(" ||| ")[0] for p in pairs]
    assert [r["target"] for r in records] == [p.split(" ||| ")[1] for p in pairs]


@pytest.mark.slow
def test_align_memory_is_flat_from_200_to_2000_pairs(toy_model_dir, tmp_path):
    peaks = {}
    for n in (200, 2_000):
        pairs = _write(tmp_path / f"pairs.{n}", _pairs(n))
        out = tmp_path / f"links.{n}"
        peaks[n] = peak_rss_mb(["align", "-m", toy_model_dir, "--view", "none"], pairs, out)
        assert len(out.read_text().splitlines()) == n
    assert peaks[2_000] <= 1.10 * peaks[200], peaks
