"""The one family of errors the library raises; the CLI turns them into one line and an exit code.

Exit codes (documented in the README):
  1  a failure that is not the user's input (NmtError)
  2  bad input: a file, a corpus, an option value or a config (InputError, ConfigError)
  3  a model or data directory that cannot be used (ArtifactError)
  130 interrupted (Ctrl-C / SIGTERM) after saving what could be saved
"""

from __future__ import annotations


class NmtError(Exception):
    """Base of every error meant for the user: the message says what, where and how to fix."""

    exit_code = 1


class InputError(NmtError):
    """A corpus, a text file or stdin cannot be used as given."""

    exit_code = 2


class ConfigError(NmtError):
    """An option or configuration value is invalid."""

    exit_code = 2


class ArtifactError(NmtError):
    """A data or model directory (or a file inside it) is missing, foreign, corrupt or unsafe."""

    exit_code = 3


class Interrupted(NmtError):
    """Work stopped by SIGINT/SIGTERM after saving a resumable state."""

    exit_code = 130
