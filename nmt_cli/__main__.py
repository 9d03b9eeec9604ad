"""`python -m nmt_cli` runs the command-line tool (also what each process of `--nproc N` or torchrun runs)."""

from nmt_cli.cli.app import main

if __name__ == "__main__":
    main()
