"""The prompt loop of `nmt translate` when stdin is a terminal."""

from __future__ import annotations

from nmt_cli.cli.boundary import stderr_console


def prompt_loop(translator, options) -> None:
    """Translate each typed line; show where the model looked under it. Ctrl-D or Ctrl-C ends."""
    from nmt_cli.aligner import translation_words
    from nmt_cli.render.heatmap import render_links

    console = stderr_console()
    console.print(f"[dim]nmt: model {translator.model_dir} — type a sentence, Ctrl-D to quit[/]")
    while True:
        try:
            line = console.input("[bold]> [/]")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        if not line.strip():
            continue
        result = translator.translate_chunk([line], options, with_attention=True)[0]
        console.print(f"[bold green]{result.text}[/]", markup=True, highlight=False)
        words = translation_words(result)
        if words is not None:
            console.print(render_links(words.weights, words.src_words, words.tgt_words, top_k=2))
