"""The `nmt` command, and `python -m nmt_cli` (also what each process of `--nproc N` or torchrun
runs)."""

import sys


def main() -> None:
    """Load the application and run it. Ctrl-C while it loads (typer, rich: a few tenths of a
    second) ends as it does later, `interrupted` and exit 130, not with a traceback."""
    try:
        from nmt_cli.cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    run()


if __name__ == "__main__":
    main()
