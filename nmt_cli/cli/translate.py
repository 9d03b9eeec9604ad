"""`nmt translate`."""

from __future__ import annotations

from nmt_cli.cli.boundary import command_boundary


@command_boundary
def translate() -> None:
    """Not available yet in this version."""
    from nmt_cli.errors import NmtError

    raise NmtError("`nmt translate` is not implemented yet in this version")
