"""`python -m nmt_cli` runs the command-line tool (also what torchrun launches)."""

from nmt_cli.cli.app import main

if __name__ == "__main__":
    main()
