"""`nmt align -m MODEL_DIR`: word alignments from attention — view, export, score."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import LineWarnings, command_boundary, skip_teardown_on_success
from nmt_cli.cli.options import (
    beam_option,
    check_device_options,
    device_option,
    given_on_the_command_line,
    in_panel,
    model_option,
    option,
    shortlist_option,
    threads_option,
)

_extract, _output = in_panel("Extraction"), in_panel("Output")


@command_boundary
def align(
    context: typer.Context,
    model: Path = model_option(help="Model directory (source → target) written by `nmt train`."),
    src: Path | None = option(None, "Source sentences (with --tgt).", "--src"),
    tgt: Path | None = option(None, "Target sentences (with --src).", "--tgt"),
    tsv: Path | None = option(None, "source<TAB>target lines.", "--tsv"),
    input: Path | None = option(
        None,
        "`src ||| tgt` lines, or source lines to translate and align with their translation "
        "(which --json, or `nmt translate --align`, prints beside the links); default stdin.",
        "--input",
        "-i",
    ),
    reverse_model: Path | None = typer.Option(
        None,
        "--reverse-model",
        metavar="MODEL_DIR",
        help="Target → source model: symmetrise both directions.",
    ),
    symmetrize: str | None = _extract(
        None,
        "With --reverse-model: intersection, union, grow-diag, grow-diag-final, "
        "grow-diag-final-and (default), or mean (average both directions' weights, then "
        "--method).",
    ),
    unit: str = _extract(
        "auto",
        "word, char (each Chinese/Japanese character a unit, other text in words), piece, or "
        "auto: char when the model's training text was mostly Chinese or Japanese written "
        "without spaces (models trained before this was recorded: decided per pair), else "
        "word; for a model trained with guided alignment, the units it was taught.",
    ),
    method: str | None = _extract(
        None,
        "argmax per target word; mutual (a cell strongest in its row and its column); "
        "or threshold. Default: argmax; for a model trained with guided alignment, threshold "
        "0.5 with --grow-threshold 0.2 (0.3 with 0.25 under --link-prior), and "
        "`--method threshold` alone keeps those values.",
    ),
    threshold: float | None = _extract(
        None,
        "Weight threshold for --method threshold (default 0.5; given without --method, it "
        "selects --method threshold).",
    ),
    grow_threshold: float | None = _extract(
        None,
        "Also link neighbours (diagonals included) of a link whose weight reaches this "
        "lower threshold while one of their words is unaligned; 0: off.",
    ),
    corpus_prior: float = _extract(
        0.0,
        "Second pass: mix this share [0, 1) of each word pair's link rate over the whole "
        "input into the weights, thresholds then apply to the mix (0.5 recommended; output "
        "comes after the input ends; views show the models' own weights); 0: off.",
    ),
    link_prior: float | None = _extract(
        None,
        "Multiply the weights with the link rates of the model's training pairs (kept by "
        "`nmt train --guided-alignment`), at this share [0, 1) of the product; thresholds then "
        "apply to the product (default: 0.8 for a guided model, at its --unit); 0: off.",
    ),
    shift: int | None = _extract(
        None,
        "Align target word t with the attention of step t+SHIFT (default: the step each model "
        "learnt to align at: t, or t+1 (Luong) / t+2 (Bahdanau) after guided alignment; "
        "in --weights both, the attention half).",
    ),
    weights: str = _extract(
        "attention",
        "attention; saliency (gradient × input: how much each source word moves the "
        "probability of each target word); or both (their mean).",
    ),
    include_eos: bool = _extract(
        False,
        "Keep end-of-sentence as a word (a word drawn to it stays unaligned).",
        "--include-eos",
    ),
    view: str = _output(
        "auto",
        "heatmap, links (each target word's strongest source words, ● on its links), none, "
        "or auto (heatmap when stdout is a terminal). Views go to stderr, the links to stdout "
        "(2> heatmap.txt keeps a view).",
    ),
    json_output: bool = _output(False, "One JSON object per pair on stdout.", "--json"),
    gold: Path | None = _output(
        None, "Gold alignments (Pharaoh or NAACL 2003): report AER.", "--gold"
    ),
    png: Path | None = _output(
        None, "Draw the first pair's heatmap to this PNG (matplotlib).", "--png"
    ),
    score_json: Path | None = _output(
        None,
        "With --gold: also write the score (AER, precision, recall, the link counts) to this "
        "file as JSON.",
        "--score-json",
    ),
    beam: int = beam_option(help="Beam size when translating source-only input (1 = greedy)."),
    shortlist: bool | None = shortlist_option(),
    device: str = device_option(),
    threads: int = threads_option(),
) -> None:
    """Word alignments from attention (or saliency): heatmaps, Pharaoh links, AER against gold."""
    skip_teardown_on_success()  # nothing to clean up: end at once on success
    import sys
    from dataclasses import replace

    from nmt_cli.aligner import (
        LINK_PRIOR_SHARE,
        AlignOptions,
        align_pairs,
        checked_pairs,
        extraction_defaults,
    )
    from nmt_cli.cli.align_output import AlignOutput
    from nmt_cli.data.corpus import read_pairs
    from nmt_cli.errors import ConfigError
    from nmt_cli.lines import (
        UntilError,
        check_input_is_not_stdout,
        check_whole_input,
        hold_pipes,
        iter_lines,
        open_input,
    )
    from nmt_cli.translator import SearchOptions, Translator

    if view not in ("auto", "heatmap", "links", "none"):
        raise ConfigError(f"--view must be heatmap, links, none or auto, got {view!r}")
    read = [path for path in (src, tgt, tsv, input, gold) if path is not None]
    check_input_is_not_stdout(read if src or tsv or input else [*read, None])  # None: stdin
    if symmetrize is not None and reverse_model is None:
        raise ConfigError(
            "--symmetrize combines two directions: give --reverse-model (the target → source "
            "model), or drop --symmetrize"
        )
    if threshold is not None and method in ("argmax", "mutual"):
        raise ConfigError(
            f"--threshold is the cut of --method threshold, not of --method {method}: drop "
            "--threshold, or use --method threshold"
        )
    options = AlignOptions(
        unit=unit,
        method=method or "argmax",
        threshold=0.5 if threshold is None else threshold,
        shift=shift,
        include_eos=include_eos,
        symmetrize=symmetrize or "grow-diag-final-and",
        weights=weights,
        grow_threshold=grow_threshold or 0.0,
        corpus_prior=corpus_prior,
        link_prior=link_prior or 0.0,
    )
    _check_options(options)
    if score_json is not None:
        if gold is None:
            raise ConfigError("--score-json writes the score against gold links: add --gold FILE")
        from nmt_cli.atomic import check_output_file

        check_output_file(score_json, "--score-json", [*read, model, reverse_model, png])
    search = SearchOptions(beam_size=beam).check()
    check_device_options(device, threads)
    if png is not None:
        from nmt_cli.render.plot import check_plot_path

        check_plot_path(png, "--png", [src, tgt, tsv, input, gold, model, reverse_model])
    hold_pipes([src, tgt, tsv, gold])  # read twice (checked through, then aligned): once here
    pair_files, pair_count = _checked_pair_files(src, tgt, tsv, input) or (None, None)
    # options of the translation of source-only input (as `nmt translate --align` makes it)
    beam_given = [
        "--beam" if name == "beam" else "--shortlist" if shortlist else "--no-shortlist"
        for name in given_on_the_command_line(context, ("beam", "shortlist"))
    ]
    if pair_files is not None and beam_given:
        raise _beam_without_translation(beam_given)
    translator = Translator.load(model, device=device, threads=threads)  # shortlist: below
    reverse = None
    if reverse_model:
        from nmt_cli.checkpoint import check_reverse_of

        check_reverse_of(model, reverse_model)
        reverse = Translator.load(reverse_model, device=device)
    trained = translator.config.train
    if unit == "auto":  # a guided model's units (its rates count them), else its text's
        from nmt_cli.aligner import model_unit

        guided = trained.guided_alignment or link_prior
        unit = trained.align_unit if guided else model_unit(translator)
        options = replace(options, unit=unit)
    rates = _link_rates(model, link_prior, corpus_prior, unit, trained.align_unit)
    if rates is not None and link_prior is None and trained.guided_alignment:
        options = replace(options, link_prior=LINK_PRIOR_SHARE)
    # The extraction the model's training suits, with the user's numbers: naming its method
    # keeps its thresholds; another method starts from that method's own.
    chosen = extraction_defaults(trained.guided_alignment, bool(options.link_prior))
    if method is None and threshold is not None:  # a threshold asks for --method threshold
        method = "threshold"
    if method is not None and method != chosen.get("method", "argmax"):
        chosen = {}
    chosen["method"] = method or chosen.get("method", "argmax")
    if threshold is not None:
        chosen["threshold"] = threshold
        if chosen.get("grow_threshold", 0.0) >= threshold:  # grown from below it only
            chosen.pop("grow_threshold")
    if grow_threshold is not None:
        chosen["grow_threshold"] = grow_threshold
    options = replace(options, **chosen)
    _check_options(options)
    if trained.guided_alignment and unit != trained.align_unit:
        rates_off = link_prior is None and not corpus_prior  # the default mixes them in
        _warn_of_other_units(model, trained.align_unit, unit, options.method, rates_off)
    # (a model taught piece links, by --align-unit piece, was taught from gold of pieces)
    if gold is not None and unit == "piece" and trained.align_unit != "piece":
        from nmt_cli.cli.boundary import warn

        warn(
            f"--unit piece links SentencePiece pieces, and gold alignments ({gold}) count "
            "words or characters, not pieces: a piece index is scored as if it were a word's, "
            "so the AER means little; use --unit word or char (as the gold counts) with --gold"
        )
    if view == "auto":
        view = "heatmap" if sys.stdout.isatty() and not json_output else "none"
    output = AlignOutput(view=view, json_output=json_output, gold=gold, png=png)
    output.score_json = score_json
    output.note = _view_note(options, corpus_prior, reverse is not None, link_prior is None)
    output.check_gold(pair_count)  # a bad gold file fails before anything is aligned
    if pair_files is not None:
        name = pair_files.describe()
        cut = LineWarnings()
        pairs = _warn_when_cut(
            checked_pairs(read_pairs(pair_files), name), translator, name, cut, output, options.unit
        )
        output.run(align_pairs(translator, pairs, options, reverse, rates))
        cut.finish()
        return
    check_whole_input(input, check=_check_lines)  # a file: read through before any output
    stream, name = open_input(input)
    lines = UntilError(iter_lines(stream, name))
    cut = LineWarnings()
    output.run(
        _stream_alignments(
            translator,
            reverse,
            options,
            lines,
            name,
            (search, shortlist),
            rates,
            output,
            cut,
            beam_given,
        )
    )
    cut.finish()
    lines.check()  # from a pipe, an unreadable line fails after every pair before it


def _view_note(options, corpus_prior: float, reverse: bool, default_prior: bool) -> str | None:
    """What the views should say when the links weigh more than the weights they draw."""
    parts = []
    if options.link_prior:
        parts.append(f"the training link rates (--link-prior {options.link_prior:g})")
    if corpus_prior:
        parts.append(f"the corpus link rates (--corpus-prior {corpus_prior:g})")
    if reverse:
        parts.append("the reverse model's attention")
    if not parts:
        return None
    note = (
        f"● links also weigh {' and '.join(parts)}, so a ● may mark a weak weight: the shades "
        "and bars are this model's own weights"
    )
    if default_prior and len(parts) == 1 and options.link_prior:  # the model's default prior
        note += "; --link-prior 0 for links from the weights alone"
    return note


def _warn_of_other_units(
    model: Path, trained_unit: str, unit: str, method: str, rates_off: bool
) -> None:
    """A guided model aligned over units other than those it was taught: its thresholds may
    give few links, and the link rates it would mix in by default count other units (so they
    are left out, under any method)."""
    from nmt_cli.checkpoint import LINK_RATES_FILE
    from nmt_cli.cli.boundary import warn

    rates_off = rates_off and (model / LINK_RATES_FILE).is_file()
    rates = f"its link rates (of {trained_unit} units) are left out"
    if method == "threshold":
        warn(
            f"{model} was trained to align {trained_unit} units (guided alignment): over "
            f"--unit {unit} {rates + ', and ' if rates_off else ''}its weights may fall below "
            f"--threshold and give few links; use --unit {trained_unit}, or --method argmax"
        )
    elif rates_off:
        warn(
            f"{model} was trained to align {trained_unit} units (guided alignment): over "
            f"--unit {unit} {rates}; use --unit {trained_unit} to mix them in"
        )


def _link_rates(
    model: Path, link_prior: float | None, corpus_prior: float, unit: str, trained_unit: str
):
    """The model's training link rates when --link-prior asks for them or by default (None
    when off, or by default for a model that has none or counted other units)."""
    from nmt_cli.checkpoint import LINK_RATES_FILE, load_link_rates
    from nmt_cli.errors import ConfigError

    if link_prior == 0 or (link_prior is None and corpus_prior):
        return None
    if link_prior is not None and corpus_prior:
        raise ConfigError(
            "--link-prior and --corpus-prior both mix link rates into the weights: give one"
        )
    if unit != trained_unit:
        if link_prior is None:
            return None
        raise ConfigError(
            f"--link-prior: the model's link rates count {trained_unit} units, not --unit "
            f"{unit}: align with --unit {trained_unit}, or drop --link-prior"
        )
    rates = load_link_rates(model)
    if rates is not None and unit == "char" and _single_character_rates(rates):
        from nmt_cli.cli.boundary import warn

        warn(
            f"{model / LINK_RATES_FILE} counts every character as a unit (an older nmt's char "
            "units): not used; retrain for a link prior over the current char units"
        )
        rates = None
    if rates is None and link_prior is not None:
        raise ConfigError(
            f"--link-prior needs {model / LINK_RATES_FILE}, which `nmt train "
            "--guided-alignment` writes: retrain with guided alignment, or drop --link-prior"
        )
    return rates


def _single_character_rates(rates) -> bool:
    """Whether char-unit link rates come from an older nmt, whose char units split every
    word into characters: all its units one character long, some of them letters of a script
    with spaces (Latin, Cyrillic, Hangul, ...)."""
    from nmt_cli.scripts import is_unspaced

    lone_latin = False
    for src, tgt, _, _ in rates.counts():
        for word in (src, tgt):
            if len(word) > 1:
                return False
            lone_latin |= word.isalpha() and not is_unspaced(word)
    return lone_latin


def _warn_when_cut(pairs, translator, name: str, cut: LineWarnings, output, unit: str):
    """The pairs, with a warning for each side longer than the model reads (its words past
    that get no links): the first few named, the rest counted by `cut`. Such a side's whole
    length in `unit`s goes to `output.full_lengths`, for the gold links past the cut."""
    from nmt_cli.alignment import unit_for, units

    sides = (
        ("source", translator.src_tokenizer, translator.max_source_pieces, "the model's"),
        ("target", translator.tgt_tokenizer, translator.max_target_pieces, "the longest output's"),
    )
    for number, pair in enumerate(pairs, start=1):
        for index, (text, (side, tokenizer, limit, whose)) in enumerate(
            zip(pair, sides, strict=True)
        ):
            pieces = tokenizer.encode_pieces(translator.text_form(text))  # as align encodes it
            if len(pieces) > limit:
                if output.gold_path is not None:  # what the gold links must fit
                    whole = len(units(pieces, unit_for(unit, *pair))[0])
                    output.full_lengths.setdefault(number - 1, [None, None])[index] = whole
                cut.line(
                    f"{name} line {number}: the {side} is longer than {whose} {limit} pieces; "
                    f"aligned its first {limit} (the words after them get no links)",
                    f"with a {side} longer than {whose} {limit} pieces (the first "
                    f"{cut.SHOWN} are named above): their words past those get no links",
                )
        yield pair


def _check_options(options) -> None:
    from nmt_cli.aligner import WEIGHTS
    from nmt_cli.alignment import ALIGN_SYMMETRIZATIONS, AUTO_UNIT, EXTRACTION_METHODS, UNITS
    from nmt_cli.errors import ConfigError

    for value, valid, name in (
        (options.weights, WEIGHTS, "--weights"),
        (options.unit, (*UNITS, AUTO_UNIT), "--unit"),
        (options.method, EXTRACTION_METHODS, "--method"),
        (options.symmetrize, ALIGN_SYMMETRIZATIONS, "--symmetrize"),
    ):
        if value not in valid:
            raise ConfigError(f"{name} must be one of {', '.join(valid)}, got {value!r}")
    if not 0 < options.threshold <= 1:
        raise ConfigError(f"--threshold must be in (0, 1], got {options.threshold}")
    if not 0 <= options.grow_threshold <= 1:
        raise ConfigError(f"--grow-threshold must be in [0, 1], got {options.grow_threshold}")
    for share, name in (
        (options.corpus_prior, "--corpus-prior"),
        (options.link_prior, "--link-prior"),
    ):
        if not 0 <= share < 1:
            raise ConfigError(
                f"{name} must be in [0, 1): the share of the link rates beside the model's "
                f"weights, got {share}"
            )
    if options.method == "threshold" and options.grow_threshold >= options.threshold:
        raise ConfigError(
            f"--grow-threshold ({options.grow_threshold}) must be below --threshold "
            f"({options.threshold}): it lets weaker neighbours join links of at least "
            "--threshold"
        )
    if options.shift not in (None, 0, 1, 2):
        raise ConfigError(f"--shift must be 0, 1 or 2, got {options.shift}")
    if options.shift and options.weights == "saliency":
        raise ConfigError(
            "--shift reads the attention of a later step; it applies to --weights attention "
            "or both, not saliency (saliency row t is already about target word t)"
        )


def _checked_pair_files(src, tgt, tsv, input):
    """The parallel files to align and their number of pairs, read once to the end first: a
    mismatch, a bad byte or a bad TSV line fails before any alignment is printed. None when
    the pairs come as a stream."""
    from nmt_cli.aligner import checked_pairs
    from nmt_cli.data.corpus import ParallelSource, read_pairs
    from nmt_cli.errors import ConfigError

    if not (src or tgt or tsv):
        return None
    if input is not None:
        raise ConfigError("give either --src/--tgt, --tsv or --input, not several")
    if src is not None and tgt is None and tsv is None:
        raise ConfigError(
            "--src was given without --tgt: give --tgt FILE with the translations to align, "
            "or pass the source sentences alone with --input FILE (or on stdin) to translate "
            "and align them"
        )
    source = ParallelSource(src=src, tgt=tgt, tsv=tsv)
    count = sum(1 for _ in checked_pairs(read_pairs(source), source.describe()))
    return source, count


def _input_form(lines, name: str):
    """("pairs" for `src ||| tgt` lines, "sources" for lines to translate, or "empty"; the lines
    again from the first): the first line with text decides."""
    import itertools

    from nmt_cli.errors import InputError

    iterator, leading = iter(lines), []
    first = next(iterator, None)
    while first is not None and not first.strip():
        leading.append(first)
        first = next(iterator, None)
    if first is None:
        return "empty", iter(())
    if "\t" in first and "|||" not in first:  # pasted from a spreadsheet: not one sentence
        raise InputError(
            f"{name} line {len(leading) + 1} holds a tab and no ' ||| ': give source<TAB>target "
            "pairs with --tsv FILE, or `source ||| target` lines; to translate and align "
            "source sentences, replace their tabs with spaces"
        )
    rest = itertools.chain(leading, [first], iterator)
    if "|||" in first:
        return "pairs", rest
    return "sources", _sources_only(rest, name, len(leading) + 1)


def _sources_only(lines, name: str, first: int):
    """The source lines to translate; one that holds ||| (what makes a first line a pair)
    mixes the two forms: an error, when that line is reached."""
    from nmt_cli.errors import InputError

    for number, line in enumerate(lines, start=1):
        if "|||" in line:
            raise InputError(
                f"{name} line {number} holds a `source ||| target` pair, but line {first} is a "
                "source sentence to translate: give `source ||| target` on every line, or "
                "only source sentences"
            )
        yield line


def _check_lines(lines, name: str) -> None:
    """Read an input file through as `nmt align` will: every `src ||| tgt` line is checked."""
    import collections

    from nmt_cli.aligner import parse_fast_align

    form, rest = _input_form(lines, name)
    collections.deque(parse_fast_align(rest, name) if form == "pairs" else rest, maxlen=0)


def _beam_without_translation(given: list[str]):
    from nmt_cli.errors import ConfigError

    flag = given[0]
    return ConfigError(
        f"{flag} is how source-only input is translated before it is aligned; these are "
        f"sentence pairs, aligned as given: drop {flag}"
    )


def _stream_alignments(
    translator,
    reverse,
    options,
    lines,
    name,
    translation,
    rates,
    output,
    cut: LineWarnings,
    beam_given: list[str] | None = None,
):
    """`src ||| tgt` lines are aligned as given; plain source lines are translated first, as
    `nmt translate` would: `translation` is its (SearchOptions, --shortlist choice)."""
    from nmt_cli.aligner import align_pairs, align_translations, parse_fast_align
    from nmt_cli.errors import ConfigError

    form, rest = _input_form(lines, name)
    if form == "empty":
        return iter(())
    # the gold links are of other target sentences than those it would translate
    if form == "sources" and output.gold_path is not None:
        raise ConfigError(
            f"--gold scores the links of given sentence pairs, but {name} holds source "
            "sentences to translate: give `source ||| target` lines, --src/--tgt or --tsv"
        )
    if form == "pairs":
        if beam_given:
            raise _beam_without_translation(beam_given)
        pairs = _warn_when_cut(
            parse_fast_align(rest, name), translator, name, cut, output, options.unit
        )
        return align_pairs(translator, pairs, options, reverse, rates)
    sources = _warn_when_source_cut(rest, translator, name, cut)
    search, shortlist = translation
    translator.use_shortlist(shortlist)
    return align_translations(translator, sources, search, options, reverse, rates)


def _warn_when_source_cut(lines, translator, name: str, cut: LineWarnings):
    """Source lines to translate and align, with a warning for each longer than the model reads,
    as `nmt translate` warns: only its first pieces are translated, and its later words get no
    links (the first few named, the rest counted by `cut`)."""

    limit = translator.max_source_pieces
    for number, line in enumerate(lines, start=1):
        if len(translator.src_tokenizer.encode_pieces(translator.text_form(line))) > limit:
            cut.line(
                f"{name} line {number} is longer than the model's {limit} pieces: translated and "
                f"aligned its first {limit} (the words after them get no links)",
                f"longer than the model's {limit} pieces (the first {cut.SHOWN} are named "
                f"above): the first {limit} pieces of each were translated and aligned",
            )
        yield line
