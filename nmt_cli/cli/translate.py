"""`nmt translate -m MODEL_DIR`: stdin (or --input) to stdout, one line out per line in."""

from __future__ import annotations

import contextlib
from pathlib import Path

from nmt_cli.cli.boundary import LineWarnings, command_boundary, skip_teardown_on_success
from nmt_cli.cli.options import (
    batch_size_option,
    beam_option,
    bf16_option,
    check_device_options,
    device_option,
    in_panel,
    length_penalty_option,
    max_len_option,
    model_option,
    option,
    quantize_option,
    shortlist_option,
    threads_option,
)

_SEARCH = "Search"
_search, _output = in_panel(_SEARCH), in_panel("Output")


@command_boundary
def translate(
    model: list[Path] = model_option(repeat=True),
    input: Path | None = option(None, "Input file (plain or .gz); default stdin.", "--input", "-i"),
    beam: int = beam_option(_SEARCH),
    batch_size: int = batch_size_option(_SEARCH),
    nbest: int = _search(
        1,
        "Print the N best translations, best first: `line ||| translation ||| score` "
        "(the line counted from 0, as Moses does; no feature field). The hypotheses are "
        "piece sequences: two may read the same once joined. An empty line has one: the "
        "empty translation.",
    ),
    length_penalty: float = length_penalty_option(_SEARCH),
    max_len_ratio: float = _search(2.0, "Output at most ratio × source pieces + 10."),
    max_len: int = max_len_option(_SEARCH),
    early_stop: bool = _search(
        False,
        "Beam: stop a sentence once a step's best hypothesis has ended it and the n-best list "
        "is full (as OpenNMT-py and Joey NMT do): faster, may miss a longer, better-scoring one.",
        "--early-stop",
    ),
    exact_stop: bool = _search(
        False,
        "Beam: keep a sentence until no hypothesis could enter its n-best at any length up to "
        "the limit. By default it stops once none could by ending within 4 more pieces: the "
        "same translations for nearly every sentence, in fewer steps.",
        "--exact-stop",
    ),
    replace_unk: bool = _search(
        False, "Replace <unk> by the most attended source piece.", "--replace-unk"
    ),
    align: bool = _output(False, "Append word alignments: `translation ||| 0-0 1-2`.", "--align"),
    json_output: bool = _output(
        False, "One JSON object per line with score, pieces, attention.", "--json"
    ),
    on_invalid: str = _output("error", "Invalid UTF-8 input: error (with line number) or replace."),
    quantize: bool = quantize_option(),
    bf16: bool = bf16_option(),
    shortlist: bool | None = shortlist_option(),
    threads: int = threads_option(),
    device: str = device_option(),
) -> None:
    """Translate text from stdin (or --input) to stdout, greedy or beam search.

    Lines typed at a terminal are translated one by one as they come. When stdout is the terminal too (and no --json, --align or --nbest is asked for), each translation is shown with where the model looked beneath it; Ctrl-D ends.
    """  # (the help keeps a docstring's line breaks: one line per paragraph)
    skip_teardown_on_success()  # nothing to clean up: end at once on success
    import sys

    from nmt_cli.lines import (
        UntilError,
        batches,
        check_input_is_not_stdout,
        check_on_invalid,
        check_whole_input,
        iter_lines,
        open_input,
    )
    from nmt_cli.translator import SearchOptions, Translator

    options = SearchOptions(
        beam_size=beam,
        nbest=nbest,
        alpha=length_penalty,
        max_len_ratio=max_len_ratio,
        max_len=max_len,
        batch_size=batch_size,
        early_stop=early_stop,
        exact_stop=exact_stop,
    ).check()
    if align and nbest > 1 and not json_output:
        from nmt_cli.errors import ConfigError

        raise ConfigError(
            "--align links one translation per line, and --nbest prints several: drop one, "
            "or use --json, which gives the n-best list beside the best translation's links"
        )
    check_on_invalid(on_invalid)
    check_input_is_not_stdout([input])
    check_device_options(device, threads)
    first, *partners = model
    translator = Translator.load(
        first, device, quantize, threads, shortlist=shortlist, partners=partners, bf16=bf16
    )
    translator.check(options)
    if align:
        translator.check_attention(
            "drop --align, or give a model with attention first (the first -m's attention gives "
            "the links)"
            if partners
            else "drop --align"
        )
    if replace_unk:  # the source piece to copy is the one the attention weighs most
        translator.check_attention(
            "drop --replace-unk, or give a model with attention first"
            if partners
            else "drop --replace-unk",
            use="to pick the source piece that replaces <unk>",
        )
    typed = input is None and sys.stdin.isatty()
    # The prompt (a translation and where the model looked, on the terminal) only where it is
    # all the user sees: stdout redirected or a data format asked for gets the data on stdout.
    if typed and sys.stdout.isatty() and not (json_output or align or nbest > 1):
        _prompt_loop(translator, options, replace_unk, on_invalid)
        return
    counted: list[int] = []  # a file's lines, for the progress bar (a pipe's: not counted)
    if not typed:
        # A file (--input, or stdin redirected from one) is read through once first: a bad
        # line (invalid UTF-8, a truncated gzip) is refused before anything is written, as
        # prepare and eval refuse it. A pipe cannot be read twice: there every line before
        # the bad one is written, then it fails.
        def count_lines(lines, _name: str) -> None:
            counted.append(sum(1 for _ in lines))

        with _offering_replace():
            check_whole_input(input, on_invalid, check=count_lines)
    stream, name = open_input(input)
    warnings = LineWarnings()

    def on_nul(number: int) -> None:
        warnings.line(
            f"{name} line {number} holds NUL bytes: translated with a space for each",
            f"held NUL bytes (the first {warnings.SHOWN} are named above): translated with a "
            "space for each",
        )

    lines = UntilError(iter_lines(stream, name, on_invalid, on_nul=on_nul))
    with_attention = align or json_output
    chunk = 1 if typed else 256  # a typed line is answered before the next is read
    if typed and sys.stderr.isatty():
        from nmt_cli.cli.boundary import stderr_console

        stderr_console().print("[dim]nmt: type sentences (one per line); Ctrl-D ends[/]")
    # From a pipe, a batch also ends when no next line has come, and its translations go out at
    # once: a program that writes a line and waits for its translation gets it.
    waiting = getattr(stream, "waiting", None)
    write = _writer(translator, json_output, align, nbest, warnings, name)
    out, number = sys.stdout, 0
    with _progress(counted[0] if counted else None) as show:
        for batch in batches(lines, chunk, waiting):  # (the options were checked at loading)
            for translation in translator.translate_chunk(
                batch, options, replace_unk, with_attention=with_attention or replace_unk
            ):
                number += 1
                out.write(write(number, translation))
            out.flush()
            show(number)
    warnings.finish()
    with _offering_replace():
        lines.check()  # an unreadable line fails only after every line before it is written


@contextlib.contextmanager
def _progress(total: int | None):
    """`show(lines done)`: a progress bar of a file's `total` lines on stderr, where stderr is
    a terminal and stdout is not (`nmt translate -i big.de > big.en`); else nothing is shown."""
    import sys

    if total is None or not sys.stderr.isatty() or sys.stdout.isatty():
        yield lambda done: None
        return
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.progress import count
    from nmt_cli.render.progress import count_display

    with count_display(stderr_console(), "translate") as draw:
        yield lambda done: draw(count("translating", done, total))


@contextlib.contextmanager
def _offering_replace():
    """An input line that is not UTF-8 is refused with --on-invalid replace as a second fix."""
    from nmt_cli.errors import InputError
    from nmt_cli.lines import InvalidUtf8

    try:
        yield
    except InvalidUtf8 as exc:
        raise InputError(f"{exc}, or pass --on-invalid replace") from None


def _writer(
    translator, json_output: bool, align: bool, nbest: int, warnings: LineWarnings, name: str
):
    from nmt_cli.cli.boundary import warn
    from nmt_cli.render.translation import as_json, as_nbest, as_text

    limit, shown = translator.max_source_pieces, warnings.SHOWN
    aligner = None
    if align or json_output:
        from nmt_cli.aligner import TranslationAligner

        aligner = TranslationAligner.for_model(translator)
        if aligner.problem:
            warn(aligner.problem)

    def write(number: int, translation) -> str:
        if translation.truncated:
            warnings.line(
                f"{name} line {number} is longer than the model's {limit} pieces: translated its "
                f"first {limit}",
                f"longer than the model's {limit} pieces (the first {shown} are named "
                f"above): the first {limit} pieces of each were translated",
            )
        if translation.cut:
            count = len(translation.pieces)
            warnings.line(
                f"{name} line {number}: the translation reached its length limit ({count} "
                f"piece{'s' * (count != 1)}) and ends there: raise --max-len (or --max-len-ratio) "
                "if it is cut short",
                f"at the length limit (the first {shown} are named above): raise --max-len "
                "(or --max-len-ratio) if translations are cut short",
            )
        if json_output:
            return as_json(translation, aligner.links(translation)) + "\n"
        if nbest > 1:
            return as_nbest(number - 1, translation)
        return as_text(translation, aligner.links(translation) if align else None) + "\n"

    return write


def _prompt_loop(translator, options, replace_unk: bool = False, on_invalid: str = "error"):
    """Translate each line typed at a terminal and show where the model looked under it, on
    the terminal (stderr); Ctrl-D or Ctrl-C ends. A typed line is read by the rules of a file's
    (`lines.typed_line`); one it cannot take is refused with the reason, and the prompt goes
    on."""
    from rich.markup import escape

    from nmt_cli.aligner import TranslationAligner, shown_words
    from nmt_cli.cli.boundary import stderr_console, warn
    from nmt_cli.errors import InputError
    from nmt_cli.lines import typed_line
    from nmt_cli.render.heatmap import render_links

    # Line editing (arrow keys, history): readline draws the line, prompt included (given to
    # input(), its colour codes marked as taking no width), so that a redraw from the line's
    # start (Home, history) keeps the prompt.
    prompt = "> "
    try:
        import readline  # noqa: F401

        prompt = "\001\x1b[1m\002> \001\x1b[0m\002"
    except ImportError:  # (not built on every platform)
        pass
    console = stderr_console()
    console.print(f"[dim]nmt: model {translator.model_dir} — type a sentence, Ctrl-D to quit[/]")
    if translator.config.model.attention == "none":
        console.print("[dim](trained with --attention none: no word links to show)[/]")
    number, limit = 0, translator.max_source_pieces
    unit = TranslationAligner.for_model(translator).options.unit  # the units of --align
    while True:
        try:
            typed = input(prompt)
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        except UnicodeDecodeError as exc:  # a terminal whose stdin decodes strictly
            typed = exc.object
        number += 1
        try:
            with _offering_replace():
                line, had_nul = typed_line(typed, number, on_invalid)
        except InputError as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            continue
        if had_nul:
            warn(f"typed line {number} holds NUL bytes: translated with a space for each")
        if not line.strip():
            continue
        result = translator.translate_chunk([line], options, replace_unk, with_attention=True)[0]
        if result.truncated:
            warn(
                f"typed line {number} is longer than the model's {limit} pieces: translated its "
                f"first {limit}"
            )
        console.print(f"[bold green]{escape(result.text)}[/]", markup=True, highlight=False)
        words = shown_words(result, unit)
        if words is not None:
            console.print(render_links(words.weights, words.src_words, words.tgt_words, top_k=2))
