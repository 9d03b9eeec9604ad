"""The command-line layer: the only place (with nmt_cli.render) that knows about the terminal."""
