"""What a request to `nmt serve` may ask, checked before any work: one clear error otherwise.

Both APIs become a `TranslateRequest`; anything else raises `RequestError`, which the service
answers with its HTTP status and a one-line JSON error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nmt_cli.errors import InputError

TRANSLATE_EXAMPLE = '{"q": "a sentence" or ["one", "two"], "beam": 5, "align": false}'
OPENNMT_EXAMPLE = '[{"src": "a sentence", "id": 100}]'


class RequestError(InputError):
    """A request the service refuses; `status` is its HTTP status (400, 413 or 422)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """What one request may ask, so that no request can starve the others."""

    max_lines: int = 64  # lines per request
    max_chars: int = 10_000  # characters per request, all its lines together
    max_beam: int = 16  # largest beam a request may ask for
    beam: int = 5  # the beam of a request that names none (and of every OpenNMT-py request)

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read: the characters as JSON escapes may write them (12
        bytes for a character outside the BMP, as a surrogate pair; most clients escape every
        non-ASCII character by default) plus room for the rest of the JSON."""
        return 12 * self.max_chars + 64 * self.max_lines + 1024


@dataclass(frozen=True)
class TranslateRequest:
    """Lines to translate, with the beam size and whether to return alignments."""

    lines: list[str]
    beam: int
    align: bool


def check_size(size: int, limits: Limits) -> None:
    """Refuse a body of `size` bytes that is larger than any acceptable request."""
    if size > limits.max_body_bytes:
        raise RequestError(
            f"the request body has {size:,} bytes, more than this server reads "
            f"({limits.max_body_bytes:,}): send fewer or shorter lines",
            413,
        )


def parse_body(body: bytes, limits: Limits) -> Any:
    """The JSON value of a request body (RequestError when too large, not UTF-8, not JSON)."""
    check_size(len(body), limits)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(
            f"the request body is not valid UTF-8 (byte {exc.start}): send UTF-8 JSON"
        ) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark, as files may start with
    if not text.strip():
        raise RequestError(f"the request body is empty: send JSON such as {TRANSLATE_EXAMPLE}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(
            f"the request body is not valid JSON ({exc.msg.removesuffix(' at')} at line "
            f"{exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise RequestError("the request body nests too deeply: send flat JSON") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise RequestError(f"the request body is not usable JSON ({exc})") from None


def translate_request(data: Any, limits: Limits) -> TranslateRequest:
    """A request of the native API: {"q": text or [texts], "beam": int, "align": bool}."""
    if not isinstance(data, dict):
        raise RequestError(f"expected a JSON object such as {TRANSLATE_EXAMPLE}", 422)
    unknown = sorted(set(data) - {"q", "beam", "align"})
    if unknown:
        raise RequestError(f"unknown key {unknown[0]!r}: valid keys are q, beam and align", 422)
    if "q" not in data:
        raise RequestError(f'no "q" (the text to translate): send {TRANSLATE_EXAMPLE}', 422)
    lines = [data["q"]] if isinstance(data["q"], str) else data["q"]
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise RequestError('"q" must be a string or a list of strings', 422)
    beam, align = data.get("beam", limits.beam), data.get("align", False)
    if not isinstance(beam, int) or isinstance(beam, bool) or not 1 <= beam <= limits.max_beam:
        raise RequestError(
            f'"beam" must be an integer from 1 to {limits.max_beam}{_no_point(beam)}', 422
        )
    if not isinstance(align, bool):
        raise RequestError('"align" must be true or false', 422)
    return TranslateRequest(_checked_lines(lines, limits, "a list for several"), beam, align)


def opennmt_request(data: Any, limits: Limits) -> TranslateRequest:
    """A request of OpenNMT-py's REST API: [{"src": text, "id": model id}, …]."""
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and isinstance(item.get("src"), str) for item in data
    ):
        raise RequestError(
            f'expected a JSON list of {{"src": text}} objects: {OPENNMT_EXAMPLE}', 422
        )
    for number, item in enumerate(data, 1):
        if unknown := sorted(set(item) - {"src", "id"}):
            raise RequestError(
                f'object {number} has an unknown key {unknown[0]!r}: each object takes "src" '
                'and "id" only (nothing else it asks of OpenNMT-py, such as "n_best" or "ref", '
                "is done here)",
                422,
            )
    wrong = [item["id"] for item in data if type(item.get("id", 0)) is not int]  # (not True)
    if wrong:
        raise RequestError(
            f'"id" must be an integer{_no_point(wrong[0])}: the model id; any id is this model',
            422,
        )
    return TranslateRequest(
        _checked_lines([item["src"] for item in data], limits, 'one {"src": …} object for each'),
        limits.beam,
        True,
    )


def _no_point(value: Any) -> str:
    """For a whole number sent as a JSON float (5.0): how to write it as an integer."""
    if isinstance(value, float) and value.is_integer():
        return f", written without a decimal point ({int(value)}, not {value})"
    return ""


def _checked_lines(lines: list[str], limits: Limits, several: str) -> list[str]:
    """The request's lines, each checked; `several` says how this API takes several."""
    if not lines:
        raise RequestError("nothing to translate: the list of lines is empty", 422)
    lines = [line.removesuffix("\r") for line in lines]  # a CRLF line's end, as files drop it
    for number, line in enumerate(lines, 1):
        _check_line(number, line, several)
    if not any(line.strip() for line in lines):
        raise RequestError("nothing to translate: every line is empty", 422)
    if len(lines) > limits.max_lines:
        raise RequestError(
            f"{len(lines)} lines in one request, more than this server's limit of "
            f"{limits.max_lines}: split the request",
            413,
        )
    chars = sum(len(line) for line in lines)
    if chars > limits.max_chars:
        raise RequestError(
            f"{chars:,} characters in one request, more than this server's limit of "
            f"{limits.max_chars:,}: split the request",
            413,
        )
    return lines


def _check_line(number: int, line: str, several: str) -> None:
    """Refuse what would be lost or mistranslated: line breaks inside one line (the text after
    them would vanish), NUL, and lone surrogates (JSON escapes that are no Unicode text)."""
    where = f"line {number} of the request"
    if "\n" in line or "\r" in line:  # a lone CR too: an old Mac's line break
        raise RequestError(
            f"{where} has a line break: send one sentence per string ({several})", 422
        )
    if "\0" in line:
        raise RequestError(f"{where} contains a NUL character: remove it", 422)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(
            f"{where} is not Unicode text (a lone surrogate {line[exc.start]!a} at character "
            f"{exc.start + 1}): send whole characters",
            422,
        ) from None
