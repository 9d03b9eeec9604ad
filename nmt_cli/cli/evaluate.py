"""`nmt eval`: sacreBLEU scores of a translation, BLEU by source length, paired significance.

stdout carries sacreBLEU-style lines (see nmt_cli.render.scores), or one JSON object with
--json; the tables and the bar chart for people go to stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary, skip_teardown_on_success
from nmt_cli.cli.options import (
    batch_size_option,
    beam_option,
    bf16_option,
    check_device_options,
    device_option,
    given,
    given_on_the_command_line,
    length_penalty_option,
    max_len_option,
    model_option,
    option,
    quantize_option,
    shortlist_option,
    threads_option,
)

# the options of translating --src with -m: refused with --hyp, where they would change nothing
WITH_MODEL = "Translating with -m"


@command_boundary
def evaluate(
    context: typer.Context,
    hyp: Path | None = given(
        "--hyp", "Translations to score, one sentence per line (plain or .gz; - for stdin)."
    ),
    ref: list[Path] | None = given(
        "--ref", "Reference translations; repeat --ref for several references."
    ),
    src: Path | None = given(
        "--src", "Source sentences: what -m translates and --by-length measures."
    ),
    model: list[Path] | None = model_option(
        None,
        help="Translate --src with this model directory (from `nmt train`), then score.",
        repeat=True,
        links=False,
    ),
    metrics: str = option(
        "bleu,chrf,ter", "Comma-separated: bleu, chrf, chrf++, ter.", "--metrics"
    ),
    tokenize: str = option(
        "auto",
        "BLEU's tokenisation (sacreBLEU's): 13a, intl, zh, char, none, or auto (13a; zh or "
        "char where the references are unsegmented Chinese or Japanese).",
        "--tokenize",
    ),
    lowercase: bool = option(
        False,
        "Ignore case in BLEU and chrF (sacrebleu -lc and --chrf-lowercase; TER ignores it "
        "already).",
        "--lowercase",
    ),
    by_length: bool = option(False, "BLEU per source-length bucket (needs --src).", "--by-length"),
    buckets: str = option(
        "10,20,30,40", "Upper bounds of the length buckets; the last is open.", "--buckets"
    ),
    plot: Path | None = given(
        "--plot", "Also draw BLEU by length to this picture, e.g. bleu.png (needs matplotlib)."
    ),
    compare: list[Path] | None = given(  # a list only to refuse a second one
        "--compare", "A second system's translations: paired bootstrap test on the first metric."
    ),
    json_output: bool = option(
        False, "Print one JSON object on stdout instead of text lines.", "--json"
    ),
    save_hyp: Path | None = given(
        "--save-hyp", "Also write the translations to this file.", panel=WITH_MODEL
    ),
    beam: int = beam_option(WITH_MODEL, help="Beam size (1 = greedy)."),
    batch_size: int = batch_size_option(WITH_MODEL, help="Sentences per batch."),
    length_penalty: float = length_penalty_option(WITH_MODEL),
    max_len: int = max_len_option(
        WITH_MODEL, help="Output at most N pieces for every sentence (0: 2 × its pieces + 10)."
    ),
    quantize: bool = quantize_option(WITH_MODEL),
    shortlist: bool | None = shortlist_option(WITH_MODEL),
    bf16: bool = bf16_option(WITH_MODEL),
    device: str = device_option(WITH_MODEL),
    threads: int = threads_option(WITH_MODEL),
) -> None:
    """Score translations with sacreBLEU, by source length, or against a second system."""
    skip_teardown_on_success()  # nothing to clean up: end at once on success
    from nmt_cli.evaluate import evaluate_corpus

    compare = _one_compared(compare)
    refs_paths = list(ref or [])
    with_length = by_length or plot is not None
    model = model or None  # an empty list: no -m
    _check_sources(hyp, model, refs_paths, src, with_length)
    _check_model_options(context, model, save_hyp)
    inputs = [hyp, src, compare, *refs_paths, *(model or [])]
    if save_hyp is not None:
        from nmt_cli.atomic import check_output_file

        check_output_file(save_hyp, "--save-hyp", inputs)
    metric_names, bounds = _parse_metrics(metrics), _parse_buckets(buckets)
    tokenizer = _parse_tokenize(tokenize)
    if not with_length and given_on_the_command_line(context, ("buckets",)):
        from nmt_cli.errors import ConfigError

        raise ConfigError(
            "--buckets sets the length buckets of --by-length and --plot: add --by-length, or "
            "drop --buckets"
        )
    if plot is not None:
        from nmt_cli.render.plot import check_plot_path

        check_plot_path(plot, inputs=[*inputs, save_hyp])
    texts = _read_inputs(hyp, refs_paths, src, compare)
    if "ter" in metric_names:
        from nmt_cli.evaluate import check_ter_lengths

        scored = [("hyp", hyp), ("compare", compare)]
        check_ter_lengths([(path, texts[key]) for key, path in scored if path is not None])
        check_ter_lengths(list(zip(refs_paths, texts["refs"], strict=True)))
    _warn_of_inputs(texts, hyp, refs_paths, compare)
    hyps, name_a = texts["hyp"], str(hyp)
    if model is not None:
        from nmt_cli.translator import SearchOptions, Translator

        search = SearchOptions(
            beam_size=beam, batch_size=batch_size, alpha=length_penalty, max_len=max_len
        ).check()
        check_device_options(device, threads)
        translator = Translator.load(
            model[0], device, quantize, threads, shortlist, partners=model[1:], bf16=bf16
        )
        translator.check(search)
        if not lowercase:
            _warn_if_lowercased_against_capitals(translator, refs_paths, texts["refs"])
        hyps = _translate(translator, texts["src"], search, save_hyp)
        name_a = str(save_hyp or f"{' + '.join(map(str, model))} on {src}")
        # how -m translated: the shortlist is the model's own choice unless told (it differs
        # between models), so a comparison of models can say what it compared
        searched = {
            "beam": beam,
            "length_penalty": length_penalty,
            "max_len": max_len or None,  # None: 2 × the source's pieces + 10
            "shortlist": translator.shortlist is not None,
            "quantize": quantize,
            "bf16": bf16,
        }
    else:
        searched = None
    sources = texts["src"] if with_length else None
    report = evaluate_corpus(
        hyps, texts["refs"], metric_names, sources, bounds, texts["compare"], tokenizer, lowercase
    )
    files = {"hyp": name_a, "refs": [str(p) for p in refs_paths], "src": _name(src)}
    _show(report, {**files, "compare": _name(compare)}, json_output, plot, searched)


def _one_compared(compare: list[Path] | None) -> Path | None:
    """The one --compare file (a repeated single-value option would keep only its last)."""
    if compare and len(compare) > 1:
        from nmt_cli.errors import ConfigError

        raise ConfigError(
            f"--compare takes one system's translations, given {len(compare)} times: compare "
            "--hyp with each system in a run of its own"
        )
    return compare[0] if compare else None


def _warn_of_inputs(texts: dict, hyp, refs: list[Path], compare) -> None:
    """Warn of text that sacreBLEU scores otherwise than it looks (other Unicode forms,
    invisible characters) and of translations that have no reference to be scored against."""
    from nmt_cli.cli.boundary import warn
    from nmt_cli.evaluate import (
        empty_hypothesis_problems,
        empty_reference_problems,
        unicode_form_problems,
    )

    references = [
        (_shown(path, "ref"), lines) for path, lines in zip(refs, texts["refs"], strict=True)
    ]
    scored = [(_shown(hyp, "hyp"), texts["hyp"])] if hyp is not None else []
    scored += references
    scored += [(_shown(compare, "compare"), texts["compare"])] if compare is not None else []
    for problem in unicode_form_problems(scored):
        warn(problem)
    translated = texts["hyp"] if texts["hyp"] is not None else texts["src"] or []  # -m: sources
    for problem in empty_reference_problems(translated, references):
        warn(problem)
    for name, lines in scored[:1] if hyp is not None else []:
        for problem in empty_hypothesis_problems(name, lines, texts["refs"]):
            warn(problem)
    if compare is not None:
        for problem in empty_hypothesis_problems(compare, texts["compare"], texts["refs"]):
            warn(problem)


def _warn_if_lowercased_against_capitals(translator, refs: list[Path], texts) -> None:
    """A model trained on `nmt prepare --lowercase` data writes lowercase only; against
    references with capitals, every capital counts as an error in BLEU, chrF and TER (and
    its dev BLEU, scored on lowercased references, is no guide to this score)."""
    if not translator.meta.get("lowercase"):
        return
    for path, lines in zip(refs, texts, strict=True):
        if any(line != line.lower() for line in lines):
            from nmt_cli.cli.boundary import warn

            warn(
                f"{translator.model_dir} writes lowercase (its data was prepared with "
                f"--lowercase) and {path} has capital letters: each counts as an error here; "
                "give --lowercase for a score of what the model can write"
            )
            return


def _name(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _check_sources(
    hyp: Path | None,
    model: list[Path] | None,
    refs: list[Path],
    src: Path | None,
    with_length: bool,
) -> None:
    """Raise ConfigError when the options do not say what to score against what."""
    from nmt_cli.errors import ConfigError

    if (hyp is None) == (model is None):
        raise ConfigError(
            "give the translations with --hyp FILE, or a model with -m MODEL_DIR --src FILE "
            "(one of the two)"
        )
    if not refs:
        raise ConfigError("no reference given: add --ref FILE (repeat it for several)")
    if model is not None and src is None:
        raise ConfigError("-m translates the source: add --src FILE")
    if with_length and src is None:
        raise ConfigError("--by-length and --plot measure source sentences: add --src FILE")


def _check_model_options(
    context: typer.Context, model: list[Path] | None, save_hyp: Path | None
) -> None:
    """Raise an NmtError for translation options that cannot work, before any work is done."""
    from nmt_cli.errors import ConfigError

    if model is None and save_hyp is not None:
        raise ConfigError("--save-hyp writes the translations of -m: add -m MODEL_DIR")
    if model is not None:
        return
    # --hyp: nothing is translated, so none of these would change anything
    search = ("beam", "batch_size", "length_penalty", "max_len", "quantize", "shortlist", "bf16")
    for name in given_on_the_command_line(context, (*search, "device", "threads")):
        flag = "--" + name.replace("_", "-")
        if name == "shortlist" and context.params.get("shortlist") is False:
            flag = "--no-shortlist"
        raise ConfigError(f"{flag} is how -m translates; --hyp is scored as given: drop {flag}")


def _parse_metrics(text: str) -> list[str]:
    from nmt_cli.evaluate import check_metrics

    names = list(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    check_metrics(names)
    return names


def _parse_tokenize(name: str) -> str | None:
    """--tokenize: one of sacreBLEU's tokenisations, or None for "auto"."""
    from nmt_cli.errors import ConfigError
    from nmt_cli.evaluate import TOKENIZERS

    if name == "auto":
        return None
    if name not in TOKENIZERS:
        raise ConfigError(
            f"--tokenize must be auto or one of {', '.join(TOKENIZERS)}, got {name!r}"
        )
    return name


def _parse_buckets(text: str) -> list[int]:
    from nmt_cli.errors import ConfigError
    from nmt_cli.evaluate import check_buckets

    try:
        bounds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(
            f"--buckets takes comma-separated whole numbers such as 10,20,30,40 (got {text!r})"
        ) from None
    check_buckets(bounds)
    return bounds


def _shown(path, option: str):
    """How a message names an input file: `<stdin>` for "-", and a pipe's /dev/fd/N (from
    `--hyp <(...)`) with its option, so that it says which one it was."""
    if str(path) == "-":
        return "<stdin>"
    if str(path).startswith(("/dev/fd/", "/proc/self/fd/")):
        return f"--{option} ({path})"
    return path


def _read_inputs(
    hyp: Path | None, refs: list[Path], src: Path | None, compare: Path | None
) -> dict:
    """Read every given file and check that they have the same number of lines."""
    from nmt_cli.errors import ConfigError
    from nmt_cli.evaluate import check_line_counts, read_lines
    from nmt_cli.lines import hold_pipes

    named = {"hyp": hyp, "src": src, "compare": compare}
    if sum(str(path) == "-" for path in (*named.values(), *refs)) > 1:
        raise ConfigError("only one file can be read from standard input ('-')")
    hold_pipes([*named.values(), *refs])  # `--hyp <(nmt translate ...)`
    texts = {key: None if path is None else read_lines(path) for key, path in named.items()}
    texts["refs"] = [read_lines(path) for path in refs]
    for path, lines in zip(refs, texts["refs"], strict=True):
        if not any(lines):  # (read_lines strips them) every score would be 0, not a measure
            from nmt_cli.errors import InputError

            raise InputError(
                f"{_shown(path, 'ref')}: every line of this reference is empty; pass the file "
                "with the reference translations"
            )

    given = [
        (_shown(named[key], key), texts[key]) for key in ("hyp", "src") if named[key] is not None
    ]
    references = [
        (_shown(path, "ref"), lines) for path, lines in zip(refs, texts["refs"], strict=True)
    ]
    second = [(_shown(compare, "compare"), texts["compare"])] if compare is not None else []
    check_line_counts([*given, *references, *second])
    return texts


def _translate(translator, sources: list[str], options, save_hyp: Path | None) -> list[str]:
    """Translate the source lines with the model, showing progress on stderr."""
    from nmt_cli.cli.boundary import stderr_console, warn
    from nmt_cli.progress import count
    from nmt_cli.render.progress import count_display

    translations = []
    with count_display(stderr_console(), "eval") as show:
        for translation in translator.translate_lines(sources, options):
            translations.append(translation)
            show(count("translating", len(translations), len(sources)))
    cut = sum(1 for t in translations if getattr(t, "truncated", False))
    if cut:
        warn(f"{cut:,} source lines were longer than the model's limit and were cut")
    hyps = [t.text for t in translations]
    if save_hyp is not None:
        from nmt_cli.atomic import write_text

        write_text(save_hyp, "".join(line + "\n" for line in hyps))
    return hyps


def _show(report, files: dict, json_output: bool, plot: Path | None, search: dict | None) -> None:
    """Tables on stderr, the picture if asked, then the data on stdout."""
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.render import scores as render

    console = stderr_console()
    if search is not None:
        console.print(render.search_line(search), markup=False, highlight=False)
    console.print(render.scores_table(report.metrics))
    if report.by_length is not None:
        console.print(
            render.length_table(report.by_length, report.length_unit, report.by_length_compare)
        )
    if report.comparison is not None:
        console.print(render.comparison_table(report.comparison, files["hyp"], files["compare"]))
    if plot is not None:
        from nmt_cli.render.plot import save_length_plot

        save_length_plot(report.by_length, report.length_unit, plot, report.by_length_compare)
        console.print(f"wrote {plot}", markup=False)
    if json_output:
        typer.echo(render.report_json(report, files, search))
    else:
        typer.echo("\n".join(render.plain_lines(report, files["hyp"], files["compare"])))
