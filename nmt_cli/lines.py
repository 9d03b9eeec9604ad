"""The one way every command reads text: corpora, references, hypotheses, gold files, stdin.

The rule, the same for every file and every command:

- **gzip** is decided by the first two bytes (1f 8b), never by the name: `train.de.gz` that is
  plain text reads as plain text, a gzip file named `train.txt` is decompressed. stdin is read
  as it comes (pipe it through `zcat` when compressed), so a stream is never held up; a
  command that streams reads a file first through once (stdin too, when it is redirected
  from one: `check_whole_input`), so that a bad line fails before it writes anything.
- **Encoding** is UTF-8. A UTF-8 BOM at the very start is dropped. Invalid UTF-8 is an error
  naming the file, the line and the column (`nmt translate --on-invalid replace` puts U+FFFD
  there instead); a UTF-16 file is recognised by its BOM and named as such.
- **Lines** end at `\\n` and only there, so line numbers are those of `wc -l` and `sed -n`;
  a `\\r` at the end of a line (CRLF) is dropped, and a last line without `\\n` counts.
  Text that is one line (no `\\n`, or one ending it) with a `\\r` inside (classic Mac OS
  line ends) is refused, from a file or a stream, as it would otherwise be one line.
- **Inside a line**, a stray `\\r`, U+2028 or U+2029 becomes a space, so that one line in is
  always one line out. A NUL byte is refused in corpora (`nul="error"`: `nmt prepare`,
  `nmt align --src/--tgt/--tsv`), where it means a binary or UTF-16 file, and read as a
  space in text that is translated or scored line by line (`nul="space"`; `nmt translate`
  warns of each such line).
- **Pipes.** stdin and a named pipe given as `--input` (`translate`, `align`) are read as they
  come (`Arrivals`): a batch of lines ends when no next line has come yet. A named pipe or
  process substitution given for a file that is read twice (checked through, then used) is
  read to its end once and kept in memory, then read as a file, gzip included, where the
  command holds it (`hold_pipes`: `nmt eval`, `nmt align`, whose files are test sets); one
  that nobody writes to is waited on, as `cat` waits. Elsewhere (`nmt prepare`, whose corpora
  may not fit in memory) a pipe is refused before it is opened.
"""

from __future__ import annotations

import collections
import gzip
import io
import itertools
import os
import select
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from nmt_cli.errors import ConfigError, InputError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
ON_INVALID = ("error", "replace")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_LINE_BREAKS = ("\r", "\u2028", "\u2029")
_CORRUPT = (EOFError, zlib.error, gzip.BadGzipFile)  # what a corrupt or truncated gzip raises
_CHUNK = 1 << 20  # bytes read at a time
_BUFFER = 1 << 20


_HELD: dict[tuple[int, int], bytes] = {}  # pipes read by `hold_pipes`: (device, inode) → bytes


def hold_pipes(paths) -> None:
    """Read each named pipe among `paths` (None and "-" are skipped) to its end, one after the
    other, and keep its bytes, so that every later read of that pipe, by whatever path, reads
    them: a command that reads an input twice can then take `<(command)`. Other paths are left
    as they are; what an earlier call held is let go (`release_pipes`). A named pipe that
    nobody writes to is waited on, as `cat` waits."""
    release_pipes()
    for path in paths:
        if path is None or str(path) == "-" or _held(path) is not None:
            continue  # (a pipe given twice is read once)
        if _is_devnull(Path(path)):  # read as an empty file, though a device
            found = os.stat(path)
            _HELD[(found.st_dev, found.st_ino)] = b""
            continue
        if not _is_pipe(Path(path)):
            continue
        try:
            with open(path, "rb") as pipe:
                data = pipe.read()
                found = os.fstat(pipe.fileno())
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
        _HELD[(found.st_dev, found.st_ino)] = data


def release_pipes() -> None:
    """Let go of the pipes `hold_pipes` read (at the end of the command that held them)."""
    _HELD.clear()


def _held(path) -> bytes | None:
    """The bytes `hold_pipes` read from the pipe at `path`, if it did."""
    if not _HELD:
        return None
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return _HELD.get((found.st_dev, found.st_ino))


def check_on_invalid(on_invalid: str) -> None:
    """ConfigError unless `on_invalid` is one of ON_INVALID."""
    if on_invalid not in ON_INVALID:
        raise ConfigError(f"--on-invalid must be error or replace, got {on_invalid!r}")


def check_regular(path: Path, what: str = "") -> None:
    """Refuse a FIFO, socket or device: opening a FIFO waits for a writer that may never come
    (a pipe held by `hold_pipes` has been read already)."""
    if _held(path) is not None:
        return
    if path.exists() and not path.is_dir() and not path.is_file():
        raise InputError(
            f"{what}{path} is not a regular file (a FIFO, socket or device), which this "
            "command reads more than once: write its contents to a file and give that"
        )


def stdin_not_read(what: str, pipes: bool = True) -> InputError:
    """The error for a "-" given where `what` (a file read twice, or a config) must be a file;
    `pipes`: whether the command takes <(command) there (it reads a pipe to its end once)."""
    other = "or <(command) for a command's output" if pipes else "(write a command's output to one)"
    return InputError(f"- (standard input) is not read in place of {what}: give a file {other}")


def check_readable(path: Path, pipes: bool = True) -> None:
    """Raise InputError unless `path` is an existing, readable regular file (or a held pipe;
    `pipes`: whether the command holds them, for the advice to a "-")."""
    if _held(path) is not None:
        return
    if str(path) == "-" and not path.exists():
        raise stdin_not_read("this file", pipes)
    if not path.exists():
        raise InputError(f"{path} does not exist: check the path")
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a file: give the text file inside it")
    check_regular(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}: check the path and its permissions"
        ) from exc


def open_binary(path: Path) -> BinaryIO:
    """Open `path` for binary reading, decompressing it when it starts with the gzip magic."""
    check_readable(path)
    held = _held(path)
    if held is not None:
        stream = io.BytesIO(held)
        return gzip.GzipFile(fileobj=stream) if held[:2] == GZIP_MAGIC else stream  # type: ignore[return-value]
    try:
        with open(path, "rb") as probe:
            compressed = probe.read(2) == GZIP_MAGIC
    except OSError as exc:  # readable to open, not to read (EIO: a failing disk, /proc/self/mem)
        raise _read_error(str(path), exc, 0) from None
    return gzip.open(path, "rb") if compressed else open(path, "rb", buffering=_BUFFER)  # type: ignore[return-value]


def read_lines(path: Path, nul: str = "error", on_invalid: str = "error") -> Iterator[str]:
    """Yield the lines of a plain or gzipped UTF-8 file by the rule above.

    A file is read a block of lines at a time: a block without NUL, stray CR, U+2028/U+2029
    or invalid UTF-8 (nearly every block of a real corpus) is decoded and split in one go;
    any other block goes line by line as `iter_lines` does, so the lines and the errors are
    the same either way, several times faster on large corpora. A block that cannot be read
    (a corrupt gzip loses what it had decompressed of it) sends the rest of the file through
    `iter_lines`, which yields every line before the damage and names the line after which
    it stopped, as for a stream.
    """
    path = Path(path)
    with open_binary(path) as handle:
        check_on_invalid(on_invalid)
        try:
            yield from _block_lines(handle, str(path), on_invalid, nul)
            return
        except _Unreadable as unreadable:
            done = unreadable.done
    with open_binary(path) as handle:
        lines = iter_lines(handle, str(path), on_invalid, nul)
        yield from itertools.islice(lines, done, None)  # the first `done` are already out


def iter_lines(
    stream: BinaryIO,
    name: str,
    on_invalid: str = "error",
    nul: str = "space",
    on_nul: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """Decode a binary stream line by line by the rule above; `name` is used in errors, and
    `on_nul` is told the number of each line whose NUL bytes were read as spaces.

    Each line is yielded as soon as it has arrived, so a stream (stdin) is never held up."""
    check_on_invalid(on_invalid)
    raws = _raw_lines(stream, name)
    first = next(raws, None)
    if first is None:
        return
    if _holds_cr(first.removesuffix(b"\n")):  # the whole stream, if no second line comes?
        second = next(raws, None)
        if second is None:
            raise _cr_only(name, first)
        raws = itertools.chain([second], raws)
    for number, raw in enumerate(itertools.chain([first], raws), start=1):
        text = _line_text(raw.removesuffix(b"\n"), name, number, on_invalid, nul)
        if on_nul is not None and b"\0" in raw:
            on_nul(number)
        yield text


def typed_line(typed: str | bytes, number: int, on_invalid: str = "error") -> tuple[str, bool]:
    """A line typed at the prompt, read as line `number` of a file would be (invalid UTF-8
    refused or replaced, NUL bytes read as spaces, CR and line separators as spaces), and
    whether it held NUL bytes. `typed` is what the terminal gave: bytes it could not decode
    come as the surrogates Python's stdin decodes them to, or as the bytes themselves."""
    raw = typed if isinstance(typed, bytes) else typed.encode("utf-8", "surrogateescape")
    raw = raw.rstrip(b"\n")
    if on_invalid != "replace":
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUtf8(
                f"typed line {number} is not valid UTF-8 (byte {raw[exc.start]:#04x} at column "
                f"{exc.start + 1}): set the terminal's encoding to UTF-8"
            ) from None
    return _line_text(raw, "the terminal", number, on_invalid, "space", first=False), b"\0" in raw


def _holds_cr(line: bytes) -> bool:
    """A CR inside `line` (given without its newline), not only ending it (CRLF): in the only
    line of a text, the mark of lines ended by CR alone."""
    return b"\r" in line.removesuffix(b"\r")


def _line_text(
    raw: bytes, name: str, number: int, on_invalid: str, nul: str, first: bool | None = None
) -> str:
    """The text of line `number`, given without its "\\n"; the first line of a file (`first`,
    by default line 1) loses its byte-order mark and is checked for binary formats."""
    raw = raw.removesuffix(b"\r")
    if number == 1 if first is None else first:
        raw = raw.removeprefix(UTF8_BOM)
        _refuse_binary(raw, name)
    if b"\0" in raw:
        raw = _nul(raw, name, number, nul)
    text = _decode(raw, name, number, on_invalid)
    if "\r" in text or (not text.isascii() and ("\u2028" in text or "\u2029" in text)):
        for mark in _LINE_BREAKS:
            text = text.replace(mark, " ")
    return text


def _block_lines(stream: BinaryIO, name: str, on_invalid: str, nul: str) -> Iterator[str]:
    """The lines of a file by the rule above, decoded a block of whole lines at a time."""
    done = 0  # lines yielded so far
    pending: list[bytes] = []  # the start of a line that no block has ended yet
    block, following = _read(stream, done), b""
    while block:
        end = block.rfind(b"\n") + 1
        if not end:
            pending.append(block)
            block = _read(stream, done)
            continue
        lines = b"".join([*pending, block[:end]])
        pending = [block[end:]]
        if not done and _holds_cr(lines[: lines.index(b"\n")]) and lines.count(b"\n") == 1:
            # one line so far, with CRs inside: is it the whole text (see `iter_lines`)?
            if not pending[0] and not (following := _read(stream, done)):
                raise _cr_only(name, lines)
        texts = _whole_block(lines, first=done == 0)
        if texts is None:  # something to fix or to refuse: line by line
            raws, start = lines.split(b"\n")[:-1], done + 1
            yield from (
                _line_text(raw, name, number, on_invalid, nul)
                for number, raw in enumerate(raws, start=start)
            )
            done += len(raws)
        else:
            yield from texts
            done += len(texts)
        block, following = following or _read(stream, done), b""
    if last := b"".join(pending):  # a last line without "\n"
        if not done and _holds_cr(last):  # no newline at all, but lines ended by CR
            raise _cr_only(name, last)
        yield _line_text(last, name, done + 1, on_invalid, nul)


def _whole_block(lines: bytes, first: bool) -> list[str] | None:
    """The texts of whole lines ("\\n"-terminated) when nothing in them needs a line's care."""
    if first:
        lines = lines.removeprefix(UTF8_BOM)
    if b"\0" in lines:
        return None
    if b"\r" in lines:
        lines = lines.replace(b"\r\n", b"\n")
        if b"\r" in lines:
            return None
    try:
        text = lines.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.isascii() and ("\u2028" in text or "\u2029" in text):
        return None
    texts = text.split("\n")
    texts.pop()  # the empty string after the last "\n"
    return texts


class _Unreadable(Exception):
    """A block of a file could not be read after `done` lines: `read_lines` goes on line by
    line."""

    def __init__(self, done: int) -> None:
        super().__init__(done)
        self.done = done


def _read(stream: BinaryIO, done: int) -> bytes:
    """The next block of `stream`; _Unreadable for a corrupt gzip or a read error."""
    try:
        return stream.read(_CHUNK)
    except (*_CORRUPT, OSError):
        raise _Unreadable(done) from None


def _read_error(name: str, exc: Exception, after: int) -> InputError:
    """The one-line error for a stream that stopped being readable after line `after`."""
    where = f"after line {after:,}" if after else "before its first line"
    if isinstance(exc, _CORRUPT):
        return InputError(
            f"{name} is a corrupt or truncated gzip file ({where}): re-download or re-compress it"
        )
    return InputError(f"cannot read {name} ({where}): {getattr(exc, 'strerror', exc)}")


_UTF16_HINT = "the file looks like UTF-16: convert it with `iconv -f UTF-16 -t UTF-8`"
# What a compressed file starts with, and the command that decompresses it to stdout.
_COMPRESSED = (
    (b"\x1f\x8b", "gzip", "zcat"),  # a file is decompressed on reading; a stream is not
    (b"\xfd7zXZ\x00", "xz", "xzcat"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstdcat"),
    (b"PK\x03\x04", "zip", "unzip -p"),
)


def _refuse_binary(first: bytes, name: str) -> None:
    """Refuse a text whose first line shows it is compressed or UTF-16 (with or without its
    BOM): its bytes would otherwise be read as garbage text, or their NULs as spaces."""
    compressed = next((c for c in _COMPRESSED if first.startswith(c[0])), None)
    if compressed is None and first[:3] == b"BZh" and first[4:10] == b"1AY&SY":
        compressed = (b"", "bzip2", "bzcat")
    if compressed is not None:
        _, kind, tool = compressed
        fix = f"pipe it through `{tool}`" if name == "<stdin>" else f"`{tool} {name} > text.txt`"
        raise InputError(f"{name} is {kind}-compressed, not text: decompress it first, e.g. {fix}")
    if first[:2] in _UTF16_BOMS:
        raise InputError(f"{name} line 1 is not valid UTF-8: {_UTF16_HINT}")
    if len(first) >= 4 and b"\0" in first[:4]:  # ASCII in UTF-16: every other byte is NUL
        order = "LE" if first[1] == first[3] == 0 and first[0] and first[2] else None
        order = order or ("BE" if first[0] == first[2] == 0 and first[1] and first[3] else None)
        if order:
            raise InputError(
                f"{name} looks like UTF-16 without a byte-order mark (every other byte is NUL): "
                f"convert it with `iconv -f UTF-16{order} -t UTF-8`"
            )


def _nul(raw: bytes, name: str, number: int, nul: str) -> bytes:
    """A line holding NUL: spaces instead (nul="space"), or the error that says what it means."""
    if nul == "space":
        return raw.replace(b"\0", b" ")
    utf16 = number == 1 and raw[:2] in _UTF16_BOMS
    hint = _UTF16_HINT if utf16 else "remove them or check that it is a text file"
    raise InputError(f"{name} line {number} contains NUL bytes: {hint}")


def _decode(raw: bytes, name: str, number: int, on_invalid: str) -> str:
    """UTF-8 text of one line; an error names the line, byte and column unless replacing."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if on_invalid == "replace":
            return raw.decode("utf-8", errors="replace")
        where = f"{name} line {number} is not valid UTF-8"
        if number == 1 and raw[:2] in _UTF16_BOMS:
            raise InputError(f"{where}: {_UTF16_HINT}") from None
        raise InvalidUtf8(
            f"{where} (byte {raw[exc.start]:#04x} at column {exc.start + 1}): re-encode it as "
            f"UTF-8, e.g. `iconv -f {_likely_codec(raw)} -t UTF-8`"
        ) from None


def _likely_codec(raw: bytes) -> str:
    """CP1252 (Windows) for bytes 0x80-0x9F that it writes (curly quotes, dashes, €): Latin-1
    would turn them into invisible control characters; else LATIN1."""
    c1 = {byte for byte in raw if 0x80 <= byte <= 0x9F}
    return "CP1252" if c1 and not c1 & {0x81, 0x8D, 0x8F, 0x90, 0x9D} else "LATIN1"


class InvalidUtf8(InputError):
    """A line that is not UTF-8 (a command with --on-invalid adds it to the fix)."""


def _raw_lines(stream: BinaryIO, name: str) -> Iterator[bytes]:
    """The raw lines of `stream`; a corrupt gzip or a read error names the line it stopped at."""
    number = 0
    try:
        for raw in stream:
            number += 1
            yield raw
    except (*_CORRUPT, OSError) as exc:
        raise _read_error(name, exc, number) from None


def _cr_only(name: str, start: bytes) -> InputError:
    """The error for a file whose lines end in CR alone (classic Mac OS): read by the rule
    above, it would be one line. `start`, the text's first bytes, may show that it is not text
    at all (a compressed file): then that error is raised instead."""
    _refuse_binary(start.removeprefix(UTF8_BOM), name)
    fix = f"`tr '\\r' '\\n' < {name} > fixed.txt`"
    if name == "<stdin>":
        fix = "pipe it through `tr '\\r' '\\n'`"
    return InputError(
        f"{name} ends its lines with a carriage return alone (classic Mac OS), not a newline: "
        f"convert it, e.g. {fix}"
    )


def count_lines(path: Path) -> int:
    """Count lines by the rule above (newlines, plus a last line without one), not decoding."""
    lines, last, returns = 0, b"\n", 0  # returns: CRs in the first line, but one ending it
    start = b""
    try:
        with open_binary(path) as handle:
            while chunk := handle.read(_CHUNK):
                start = start or chunk[:16]
                if not lines:
                    head, newline, _ = chunk.partition(b"\n")
                    ends = newline and (head.endswith(b"\r") or (not head and last == b"\r"))
                    returns += head.count(b"\r") - bool(ends)  # a CRLF's CR does not count
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise InputError(f"{path} is a corrupt or truncated gzip file: re-download it") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    only = lines == 0 or (lines == 1 and last == b"\n")  # the file is one line
    if only and returns > (lines == 0 and last == b"\r"):  # a CR before that line's end
        raise _cr_only(str(path), start)
    return lines + (last != b"\n")


def first_inner_cr(path: Path) -> int | None:
    """The number of the first line of `path` with a CR inside it (not only ending it): where
    another system ended lines with CR, or two lines ran together; None if there is none."""
    with open_binary(path) as handle:
        for number, raw in enumerate(_raw_lines(handle, str(path)), start=1):
            if b"\r" in raw.removesuffix(b"\n").removesuffix(b"\r"):
                return number
    return None


class UntilError:
    """The lines of `lines` up to the first that cannot be read; `check()` raises its error then.

    A streaming command translates and prints every line before the bad one and only then
    fails, naming it: stdout holds exactly the results of the lines before it, never a
    shifted or half-finished batch.
    """

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self.error: InputError | None = None

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._lines
        except InputError as exc:
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def check_whole_input(
    path: Path | None,
    on_invalid: str = "error",
    check: Callable[[Iterator[str], str], None] | None = None,
) -> bool:
    """Read a file input (a path, or stdin redirected from a regular file) through once, so
    that a bad line fails before anything is written; a stdin file is rewound for the real
    read. `check(lines, name)`, when given, reads those lines in place of a plain pass (and
    raises on a line the command cannot take). False, reading nothing, for a pipe or a
    terminal: a stream cannot be read twice."""
    consume = check or (lambda lines, name: collections.deque(lines, maxlen=0))
    if path is not None and str(path) != "-":
        if _is_pipe(path) or _is_devnull(path):
            return False
        consume(read_lines(path, nul="space", on_invalid=on_invalid), str(path))
        return True
    stream = sys.stdin.buffer
    try:
        regular = stat.S_ISREG(os.fstat(stream.fileno()).st_mode) and stream.seekable()
        start = stream.tell() if regular else 0
    except (OSError, ValueError):  # no file descriptor (a test's stdin), or a closed one
        return False
    if not regular:
        return False
    try:
        consume(_block_lines(stream, "<stdin>", on_invalid, "space"), "<stdin>")
    except _Unreadable:  # a block that could not be read: line by line, to name the place
        stream.seek(start)
        consume(iter_lines(stream, "<stdin>", on_invalid), "<stdin>")
    finally:
        stream.seek(start)
    return True


def check_input_is_not_stdout(paths: Iterable[Path | None]) -> None:
    """Refuse an input file (None or '-': stdin) that stdout writes to. After `> FILE` the
    shell has emptied it, and translating nothing would exit 0; after `>> FILE` the output,
    flushed batch by batch, would be read back as more input, without end."""
    try:
        out = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's stdout)
        return
    if not stat.S_ISREG(out.st_mode):
        return
    for path in paths:
        try:
            if path is None or str(path) == "-":
                found, name = os.fstat(sys.stdin.fileno()), _stdin_name()
            else:
                found, name = os.stat(path), str(path)
        except (OSError, ValueError, AttributeError):
            continue  # a missing input is named by the command's own check
        if (found.st_dev, found.st_ino) != (out.st_dev, out.st_ino):
            continue
        if out.st_size == 0:
            raise InputError(
                f"{name} is also stdout, and empty: a `>` redirect empties its file before "
                "nmt can read it; restore the file, and write the output to another one"
            )
        raise InputError(
            f"{name} is also stdout (a `>>` redirect): the output would be read back as "
            "more input, without end; write the output to another file"
        )


def _stdin_name() -> str:
    """stdin, with the file it reads where the system says (Linux: /proc/self/fd/0)."""
    try:
        return f"stdin ({os.readlink('/proc/self/fd/0')})"
    except OSError:
        return "stdin"


def open_input(path: Path | None) -> tuple[BinaryIO | Arrivals, str]:
    """stdin (binary) when path is None or '-', and a named pipe (`--input <(command)`), read
    as they come: a pipe as `Arrivals`; else the file (plain or gzip)."""
    if path is None or str(path) == "-":
        stream = sys.stdin.buffer
        try:
            mode = os.fstat(stream.fileno()).st_mode
        except (OSError, ValueError):  # no file descriptor (a test's stdin), or a closed one
            return stream, "<stdin>"
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return Arrivals(stream.fileno()), "<stdin>"
        return stream, "<stdin>"
    if _is_pipe(path):
        pipe = open(path, "rb", buffering=0)  # noqa: SIM115 - the caller reads it to the end
        return Arrivals(pipe.fileno(), pipe), str(path)
    if _is_devnull(path):  # a device, read as the empty file it gives
        return io.BytesIO(), str(path)
    return open_binary(path), str(path)


class Arrivals:
    """The raw lines of a pipe as they arrive, and whether the next one has come (`waiting`).

    `batches` ends a batch of lines when no more has come, instead of holding back the lines it
    has: a program that writes one line and waits for its translation before the next gets it
    at once, while a full pipe gives whole batches. (Python's buffered reader cannot say whether
    it holds a next line without waiting for it.) The unread bytes are kept in one growing
    buffer, searched for a newline only where it has not been searched yet, so a long line
    arriving in many reads costs time in proportion to its length.
    """

    def __init__(self, fd: int, keep: object = None):
        self._fd, self._keep = fd, keep  # keep: the file object that owns the descriptor
        self._buffer = bytearray()
        self._start = 0  # where the next line begins
        self._searched = 0  # no newline in _buffer[_start:_searched]
        self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        while True:
            end = self._newline()
            if end >= 0:
                line = bytes(self._buffer[self._start : end + 1])
                self._start = self._searched = end + 1
                yield line
            elif not self._read():
                rest = bytes(self._buffer[self._start :])
                self._buffer.clear()
                self._start = self._searched = 0
                if rest:
                    yield rest  # a last line without a newline
                return

    def _newline(self) -> int:
        """The position of the next line's newline in the buffer, or -1 if it has not come."""
        end = self._buffer.find(b"\n", max(self._start, self._searched))
        if end < 0:
            self._searched = len(self._buffer)
        return end

    def _read(self) -> bool:
        """Add what has come to the buffer, waiting for some; False at the end of the input."""
        if self._ended:
            return False
        data = os.read(self._fd, _CHUNK)
        if not data:
            self._ended = True
            return False
        if self._start > len(self._buffer) // 2:  # drop the lines already given, now and then
            del self._buffer[: self._start]
            self._searched -= self._start
            self._start = 0
        self._buffer += data
        return True

    def waiting(self) -> bool:
        """True when the next line, or the end of the input, has come (or is coming: more
        bytes to read, which may not yet end the line)."""
        if self._ended or self._newline() >= 0:
            return True
        try:
            return bool(select.select([self._fd], [], [], 0)[0])
        except (OSError, ValueError):  # cannot tell: read on, as for a file
            return True


def batches(lines: Iterable[str], size: int, waiting: Callable[[], bool] | None = None):
    """Lists of at most `size` of `lines`, in order; with `waiting` (`Arrivals.waiting`), a list
    also ends when no next line has come, so what has come is not held back."""
    iterator = iter(lines)
    while True:
        batch = []
        for line in iterator:
            batch.append(line)
            if len(batch) == size or (waiting is not None and not waiting()):
                break
        if not batch:
            return
        yield batch


def _is_devnull(path: Path) -> bool:
    try:
        return os.path.samefile(path, os.devnull)
    except (OSError, ValueError):
        return False


def _is_pipe(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
