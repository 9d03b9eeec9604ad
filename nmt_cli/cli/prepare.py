"""`nmt prepare`."""

from __future__ import annotations

from nmt_cli.cli.boundary import command_boundary


@command_boundary
def prepare() -> None:
    """Not available yet in this version."""
    from nmt_cli.errors import NmtError

    raise NmtError("`nmt prepare` is not implemented yet in this version")
