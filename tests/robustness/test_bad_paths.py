"""Every command × every file it reads: missing, empty, unreadable, a directory instead of a file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_runner import invoke
from outcome import assert_no_leftovers, assert_no_traceback, assert_refused

GOOD_SRC = "apple river\nstone cloud green\n"
GOOD_TGT = "RIVER APPLE\nGREEN CLOUD STONE\n"
GOOD_GOLD = "0-1 1-0\n0-2 1-1 2-0\n"

# (case id, argument template): BAD is replaced by the bad path, the other names by good files.
FILE_SLOTS = [
    ("prepare --src", ["prepare", "--src", "BAD", "--tgt", "TGT", "-o", "OUT"]),
    ("prepare --tgt", ["prepare", "--src", "SRC", "--tgt", "BAD", "-o", "OUT"]),
    ("prepare --tsv", ["prepare", "--tsv", "BAD", "-o", "OUT"]),
    ("prepare --dev-src", ["prepare", "--tsv", "TSV", "--dev-src", "BAD", "--dev-tgt", "TGT",
                           "-o", "OUT"]),
    ("train --config", ["train", "DATA", "-o", "OUT", "--config", "BAD"]),
    ("translate --input", ["translate", "-m", "MODEL", "--input", "BAD"]),
    ("eval --hyp", ["eval", "--hyp", "BAD", "--ref", "TGT"]),
    ("eval --ref", ["eval", "--hyp", "TGT", "--ref", "BAD"]),
    ("eval --src", ["eval", "--hyp", "TGT", "--ref", "TGT", "--src", "BAD", "--by-length"]),
    ("eval --compare", ["eval", "--hyp", "TGT", "--ref", "TGT", "--compare", "BAD"]),
    ("align --src", ["align", "-m", "MODEL", "--src", "BAD", "--tgt", "TGT"]),
    ("align --tgt", ["align", "-m", "MODEL", "--src", "SRC", "--tgt", "BAD"]),
    ("align --tsv", ["align", "-m", "MODEL", "--tsv", "BAD"]),
    ("align --input", ["align", "-m", "MODEL", "--input", "BAD"]),
    ("align --gold", ["align", "-m", "MODEL", "--src", "SRC", "--tgt", "TGT", "--gold", "BAD"]),
]  # fmt: skip

# An empty file is fine where "no lines in" means "no lines out" (the streaming commands,
# and a config file, which is then all defaults); everywhere else it is refused.
EMPTY_IS_FINE = {"translate --input", "align --input", "align --tsv", "train --config"}
# A named pipe (`--input <(command)`) is read as it comes, as stdin is, where the command
# streams; eval's and align's files are read from one once, to its end, and then read as a file
# holding what came (`hold_pipes`); the other commands refuse one (it would wait for a writer).
STREAMED = {"translate --input", "align --input"}
HELD = {"eval --hyp", "eval --ref", "eval --src", "eval --compare", "align --src", "align --tgt",
        "align --tsv", "align --gold"}  # fmt: skip

DIR_SLOTS = [
    ("train DATA_DIR", ["train", "BAD", "-o", "OUT"]),
    ("translate -m", ["translate", "-m", "BAD", "--input", "SRC"]),
    ("eval -m", ["eval", "-m", "BAD", "--src", "SRC", "--ref", "TGT"]),
    ("align -m", ["align", "-m", "BAD", "--src", "SRC", "--tgt", "TGT"]),
    ("align --reverse-model", ["align", "-m", "MODEL", "--reverse-model", "BAD", "--src", "SRC",
                               "--tgt", "TGT"]),
]  # fmt: skip


@pytest.fixture
def files(tmp_path, toy_data_dir, toy_model_dir) -> dict[str, Path]:
    good = tmp_path / "good"
    good.mkdir()
    (good / "src").write_text(GOOD_SRC)
    (good / "tgt").write_text(GOOD_TGT)
    (good / "gold").write_text(GOOD_GOLD)
    tsv = "".join(
        f"{s}\t{t}\n" for s, t in zip(GOOD_SRC.splitlines(), GOOD_TGT.splitlines(), strict=True)
    )
    (good / "tsv").write_text(tsv)
    return {
        "SRC": good / "src",
        "TGT": good / "tgt",
        "TSV": good / "tsv",
        "DATA": toy_data_dir,
        "MODEL": toy_model_dir,
        "OUT": tmp_path / "out",
    }


def _bad_path(tmp_path: Path, kind: str, monkeypatch) -> Path:
    bad = tmp_path / "bad" / f"{kind}.txt"
    bad.parent.mkdir()
    if kind == "empty":
        bad.write_bytes(b"")
    elif kind == "directory":
        bad.mkdir()
        (bad / "inside.txt").write_text("apple\n")
    elif kind == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads files whatever their mode (the other kinds run as root)")
        bad.write_text(GOOD_SRC)
        bad.chmod(0)
    elif kind == "fifo":
        os.mkfifo(bad)  # no writer: opening it to read would wait for ever
        _unblock_if_opened(bad)
    elif kind == "removed":
        bad.write_text(GOOD_SRC)
        _remove_after_the_check(bad, monkeypatch)
    return bad


def _unblock_if_opened(fifo: Path) -> None:
    """If a command opens the FIFO anyway, a writer connects within 0.2 s and leaves at once,
    so the test fails on what the command then does instead of hanging the suite. (Opening
    for writing waits for a reader, so no writer can come and go before the command opens.)"""
    stop = threading.Event()

    def writer():
        while not stop.wait(0.2):
            with open(fifo, "wb"):  # waits for a reader
                pass

    threading.Thread(target=writer, daemon=True).start()
    _FIFO_WRITERS.append((stop, fifo))


_FIFO_WRITERS: list[tuple[threading.Event, Path]] = []


@pytest.fixture(autouse=True)
def _release_fifo_writers():
    yield
    while _FIFO_WRITERS:
        stop, fifo = _FIFO_WRITERS.pop()
        stop.set()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # frees a writer waiting in open


def _remove_after_the_check(path: Path, monkeypatch) -> None:
    """The file exists when a command checks it and is gone when it opens it (a race)."""
    real_is_dir = Path.is_dir

    def is_dir(self, *args, **kwargs):
        answer = real_is_dir(self, *args, **kwargs)
        if self == path and path.exists():
            path.unlink()
        return answer

    monkeypatch.setattr(Path, "is_dir", is_dir)


def _argv(template: list[str], files: dict[str, Path], bad: Path) -> list:
    return [bad if arg == "BAD" else files.get(arg, arg) for arg in template]


# Commands that open a file without checking it first: for them "removed after the check" is
# the same case as "missing".
NO_SEPARATE_CHECK = {"train --config", "align --gold"}


@pytest.mark.parametrize("kind", ["missing", "empty", "directory", "unreadable", "fifo", "removed"])
@pytest.mark.parametrize(("case", "template"), FILE_SLOTS, ids=[c for c, _ in FILE_SLOTS])
def test_bad_file_is_refused_with_one_line(case, template, kind, files, tmp_path, monkeypatch):
    if kind == "removed" and case in NO_SEPARATE_CHECK:
        pytest.skip("opened without a separate check: the 'missing' case covers it")
    bad = _bad_path(tmp_path, kind, monkeypatch)
    if kind == "fifo" and case in STREAMED:  # read until its writer leaves, with no line
        result = invoke(*_argv(template, files, bad))
        assert_no_traceback(result)
        assert result.exit_code == 0 and result.stdout == ""
        return
    if kind == "fifo" and case in HELD:  # its writer leaves without a line: an empty file
        kind = "empty"
    if kind == "empty" and case in EMPTY_IS_FINE:
        if case == "train --config":
            pytest.skip("an empty config is all defaults: nothing to refuse")
        result = invoke(*_argv(template, files, bad))
        assert_no_traceback(result)
        assert result.exit_code == 0 and result.stdout == ""
        return
    result = invoke(*_argv(template, files, bad))
    message = assert_refused(result, 2, bad)
    if kind == "fifo":
        assert "not a regular file" in message  # refused before opening, not read as empty
    if kind == "empty" and bad.is_fifo():
        assert "empty" in message  # refused for what it held, as the same empty file is
    assert result.stdout == ""  # nothing printed before the refusal
    assert not files["OUT"].exists()
    assert_no_leftovers(tmp_path)


@pytest.mark.parametrize("kind", ["missing", "file", "empty directory", "unreadable"])
@pytest.mark.parametrize(("case", "template"), DIR_SLOTS, ids=[c for c, _ in DIR_SLOTS])
def test_bad_model_or_data_directory_is_refused(case, template, kind, files, tmp_path):
    bad = tmp_path / "bad-dir"
    if kind == "file":
        bad.write_text("not a directory\n")
    elif kind == "empty directory":
        bad.mkdir()
    elif kind == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads directories whatever their mode")
        bad.mkdir()
        bad.chmod(0)
    result = invoke(*_argv(template, files, bad))
    assert_refused(result, 3, bad)
    assert result.stdout == ""
    assert not files["OUT"].exists()


def _run(argv: list, stdout) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nmt_cli", *map(str, argv)]
    return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("command", ["translate", "eval"])
def test_a_full_output_is_one_line_not_a_traceback(command, toy_model_dir, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("apple river\nsun\n" * 2000, encoding="utf-8")  # more than a buffer holds
    argv = {
        "translate": ["translate", "-m", toy_model_dir, "--beam", "1", "-i", text],
        "eval": ["eval", "--hyp", text, "--ref", text, "--json"],
    }[command]
    with open("/dev/full", "w") as full:
        result = _run(argv, full)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (  # eval's tables go to stderr before it
        "error: cannot write the output: No space left on device; free some space or send it "
        "elsewhere"
    )


def test_a_closed_output_is_named(toy_model_dir):
    result = _run(["translate", "-m", toy_model_dir, "--beam", "1"], subprocess.DEVNULL)
    assert result.returncode == 0  # stdout open: the closed case below is the one refused
    closed = subprocess.run(
        ["sh", "-c", '"$0" -m nmt_cli translate -m "$1" >&-', sys.executable,
         str(toy_model_dir)],
        input="apple\n", capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120,
    )  # fmt: skip
    assert closed.returncode == 2
    assert closed.stderr.strip() == (
        "error: standard output is closed: redirect it to a file or /dev/null"
    )


def test_an_output_directory_in_a_place_that_cannot_be_written_is_exit_2_with_a_fix(
    toy_data_dir, tmp_path, monkeypatch
):
    """A read-only file system (or no permission) where `prepare -o` or `average -o` makes its
    directory: bad input with the fix, as `train -o` gives; a full disk stays exit 1. (The
    tests run as root, whom permissions do not stop: the refusal is played by mkdtemp.)"""
    import errno
    import tempfile

    from nmt_cli import atomic

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic.tempfile, "mkdtemp", read_only)
    src, tgt = toy_data_dir / "train.src", toy_data_dir / "train.tgt"
    out = tmp_path / "ro" / "data"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "-o", out)
    assert_refused(result, 2, f"cannot create {out}: Read-only file system", "choose another")
    assert not (tmp_path / "ro").exists()  # the parent it made is gone again

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.tempfile, "mkdtemp", full)
    result = invoke("prepare", "--src", src, "--tgt", tgt, "-o", out)
    assert_refused(result, 1, f"cannot create {out}: No space left on device")
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", tempfile.mkdtemp)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
def test_an_output_directory_in_proc_is_exit_2_with_a_fix(toy_data_dir):
    """/proc exists but takes no new folders (ENOENT, even for root): a place to choose again."""
    src, tgt = toy_data_dir / "train.src", toy_data_dir / "train.tgt"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "-o", "/proc/nmt-data")
    assert_refused(result, 2, "cannot create /proc/nmt-data", "choose another")


def test_an_output_file_under_a_file_names_the_file(toy_model_dir, tmp_path):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder\n", encoding="utf-8")
    src, ref = tmp_path / "a.src", tmp_path / "a.ref"
    src.write_text("apple river\n", encoding="utf-8")
    ref.write_text("RIVER APPLE\n", encoding="utf-8")
    result = invoke("eval", "-m", toy_model_dir, "--src", src, "--ref", ref,
                    "--save-hyp", blocker / "h.txt")  # fmt: skip
    assert_refused(result, 2, f"{blocker} is a file, not a directory")
    assert blocker.read_text(encoding="utf-8") == "not a folder\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("command", ["translate", "align"])
def test_a_named_pipe_as_input_is_read_as_it_comes(command, toy_model_dir, tmp_path):
    """`nmt translate --input <(command)`: the shell gives a named pipe, read as stdin is."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    text = "apple river\nsun\n" if command == "translate" else "apple ||| APPLE\nsun ||| SUN\n"

    def writer():
        with open(pipe, "w", encoding="utf-8") as out:
            out.write(text)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    result = invoke(
        command,
        "-m",
        toy_model_dir,
        "--input",
        pipe,
        *(["--view", "none"] if command == "align" else []),
    )
    thread.join(10)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    piped = invoke(
        command,
        "-m",
        toy_model_dir,
        *(["--view", "none"] if command == "align" else []),
        input=text,
    )
    assert result.stdout == piped.stdout  # as from stdin


@pytest.mark.parametrize("force", [False, True])
def test_train_refuses_an_output_directory_of_other_files(toy_data_dir, tmp_path, force):
    """`train -o` into a folder that holds no model but other files (a project, a home
    directory) would write its config.json, meta.json, ... among them, and --force would
    delete files of those names: refused, forced or not, with every file as it was."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.json").write_text('{"mine": true}\n', encoding="utf-8")
    (project / "notes.txt").write_text("keep me\n", encoding="utf-8")
    result = invoke("train", toy_data_dir, "-o", project, *(["--force"] if force else []))
    assert_refused(result, 2, str(project), "notes.txt", "new or empty directory")
    assert sorted(p.name for p in project.iterdir()) == ["config.json", "notes.txt"]
    assert (project / "config.json").read_text(encoding="utf-8") == '{"mine": true}\n'


def _named_pipe(path: Path, data: bytes) -> threading.Thread:
    """A named pipe at `path` that a writer thread fills with `data`, as `<(command)` does."""
    os.mkfifo(path)

    def writer():
        with open(path, "wb") as out:
            out.write(data)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


def test_eval_and_align_read_their_files_from_named_pipes(files, tmp_path, monkeypatch):
    """`nmt eval --hyp <(nmt translate ...)`: files read twice (checked, then used) come from a
    named pipe once, gzip included, with the output the same files give; a new pipe at the
    same path, for the next command, is read anew."""
    import gzip

    pipes = tmp_path / "pipes"
    pipes.mkdir()
    hyp = GOOD_TGT.replace("APPLE", "PEAR").encode()
    writers = [
        _named_pipe(pipes / "hyp", hyp),
        _named_pipe(pipes / "ref", gzip.compress(GOOD_TGT.encode())),
    ]
    piped = invoke("eval", "--hyp", pipes / "hyp", "--ref", pipes / "ref", "--json")
    (tmp_path / "hyp").write_bytes(hyp)
    plain = invoke("eval", "--hyp", tmp_path / "hyp", "--ref", files["TGT"], "--json")
    assert piped.exit_code == 0, piped.output
    assert '"score": 100.0' not in piped.stdout  # PEAR: the piped hypothesis was read
    assert piped.stdout.replace(str(pipes / "hyp"), "HYP").replace(str(pipes / "ref"), "REF") == (
        plain.stdout.replace(str(tmp_path / "hyp"), "HYP").replace(str(files["TGT"]), "REF")
    )
    names = {"src": GOOD_SRC, "tgt": GOOD_TGT, "gold": GOOD_GOLD}
    for round_ in range(2):  # the same paths, new pipes: new contents
        for name, text in names.items():
            (pipes / name).unlink(missing_ok=True)
            lines = text.splitlines(keepends=True)
            writers.append(_named_pipe(pipes / name, "".join(lines[: 1 + round_]).encode()))
        aligned = invoke(
            "align", "-m", files["MODEL"], "--src", pipes / "src", "--tgt", pipes / "tgt",
            "--gold", pipes / "gold", "--view", "none",
        )  # fmt: skip
        assert aligned.exit_code == 0, aligned.output
        assert len(aligned.stdout.splitlines()) == 1 + round_
        assert f"{1 + round_} pair" in aligned.output  # AER over the pairs of this round
    (pipes / "same").unlink(missing_ok=True)
    writers.append(_named_pipe(pipes / "same", GOOD_TGT.encode()))
    _unblock_if_opened(pipes / "same")  # opened a second time: read empty, not waited on
    monkeypatch.chdir(pipes)
    twice = invoke("eval", "--hyp", "same", "--ref", pipes / "same", "--json")
    assert twice.exit_code == 0, twice.output  # one pipe by two paths: read once, not waited on
    assert '"score": 100.0' in twice.stdout
    for writer in writers:
        writer.join(10)
    expected = invoke(
        "align", "-m", files["MODEL"], "--src", files["SRC"], "--tgt", files["TGT"],
        "--gold", tmp_path / "good" / "gold", "--view", "none",
    )  # fmt: skip
    assert aligned.stdout == expected.stdout


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd for process substitution")
def test_files_from_process_substitution_are_named_by_their_option():
    """`--hyp <(...)` reaches nmt as /dev/fd/63: an error says which option that was."""
    command = (
        f"{sys.executable} -m nmt_cli eval --hyp <(printf 'a b\\nc d\\n') --ref <(printf 'a b\\n')"
    )
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert "--hyp (/dev/fd/" in result.stderr and "has 2 lines but --ref (/dev/fd/" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    blank = f"{sys.executable} -m nmt_cli eval --hyp <(printf 'a\\n') --ref <(printf ' \\n')"
    result = subprocess.run(["bash", "-c", blank], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "error: --ref (/dev/fd/" in result.stderr
    assert "every line of this reference is empty" in result.stderr


def test_translate_answers_each_line_a_program_writes_before_the_next(toy_model_dir):
    """A program that writes a line into a pipe and waits for its translation before the next
    gets it: translate ends a batch when no more input has come, instead of holding the line
    until 256 have come or the input ends."""
    import select

    command = [
        sys.executable,
        "-m",
        "nmt_cli",
        "translate",
        "-m",
        str(toy_model_dir),
        "--beam",
        "1",
    ]
    translate = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    answers = []
    try:
        for line in (b"apple river\n", b"sun\n", b"stone cloud\n"):
            translate.stdin.write(line)
            translate.stdin.flush()
            ready, _, _ = select.select([translate.stdout], [], [], 60)
            assert ready, f"no translation of {line!r} while the input stays open"
            answers.append(translate.stdout.readline())
    finally:
        translate.stdin.close()
        rest, errors = translate.stdout.read(), translate.stderr.read()
        translate.wait(60)
    assert translate.returncode == 0, errors
    assert rest == b""  # every answer came before the input ended
    at_once = subprocess.run(
        command, input=b"apple river\nsun\nstone cloud\n", capture_output=True, timeout=120
    )
    assert b"".join(answers) == at_once.stdout  # the translations of the lines given at once


# the options that read "-" as standard input: streamed inputs and eval's files (read once)
DASH_IS_STDIN = {"translate --input", "align --input", "eval --hyp", "eval --ref", "eval --src",
                 "eval --compare"}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "template"),
    [slot for slot in FILE_SLOTS if slot[0] not in DASH_IS_STDIN],
    ids=[c for c, _ in FILE_SLOTS if c not in DASH_IS_STDIN],
)
def test_a_dash_where_stdin_is_not_read_is_named_as_such(
    case, template, files, tmp_path, monkeypatch
):
    """`--src -` where a file must be read twice is refused as standard input, with the fix
    (before: "- does not exist: check the path")."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # no file named "-" here
    result = invoke(*_argv(template, files, Path("-")), input="apple river\n")
    message = assert_refused(result, 2, "- (standard input) is not read in place of")
    if case.startswith("align"):  # which reads a pipe to its end once, and so takes one
        assert "give a file or <(command)" in message
    else:  # a corpus or a config is read more than once: a pipe is refused there too
        assert "give a file (write a command's output to one)" in message
    assert result.stdout == "" and not files["OUT"].exists()
