"""`nmt align`."""

from __future__ import annotations

from nmt_cli.cli.boundary import command_boundary


@command_boundary
def align() -> None:
    """Not available yet in this version."""
    from nmt_cli.errors import NmtError

    raise NmtError("`nmt align` is not implemented yet in this version")
