"""`nmt serve`: both APIs over loopback, batching across requests, bad requests, the page."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from cli_runner import invoke

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from nmt_cli.errors import ArtifactError, NmtError  # noqa: E402
from nmt_cli.serve.app import create_app  # noqa: E402
from nmt_cli.serve.batcher import Batcher  # noqa: E402
from nmt_cli.serve.requests import Limits, TranslateRequest  # noqa: E402
from nmt_cli.serve.worker import (  # noqa: E402
    NMT_API,
    OPENNMT_API,
    Local,
    ModelSpec,
    WorkerPool,
    WorkerProcess,
)
from nmt_cli.translator import SearchOptions, Translator  # noqa: E402

WORDS = "apple river stone cloud green quick small house light water bird tree night sun".split()
LINES = [" ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(2 + i % 5)) for i in range(40)]


@pytest.fixture(scope="module")
def translator(toy_model_dir):
    return Translator.load(toy_model_dir, device="cpu")


@pytest.fixture(scope="module")
def expected(toy_model_dir):
    """What `nmt translate` prints for LINES (beam 5, the default of both)."""
    result = invoke("translate", "-m", toy_model_dir, input="".join(f"{x}\n" for x in LINES))
    assert result.exit_code == 0, result.output
    return dict(zip(LINES, result.stdout.splitlines(), strict=True))


@pytest.fixture(scope="module")
def client(translator):
    limits = Limits(max_lines=8, max_chars=400)
    with TestClient(create_app(Local(translator).start(), limits)) as test_client:
        yield test_client


@contextlib.contextmanager
def serving(translator, **kwargs):
    """A real uvicorn server on a free loopback port, in a thread; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(Local(translator, **kwargs).start()),
            host="127.0.0.1",
            port=0,
            log_level="error",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        thread.join(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive(), "uvicorn did not stop"


def test_translate_api_gives_nmt_translates_output(client, expected):
    one = client.post("/translate", json={"q": LINES[0]})
    assert one.status_code == 200
    assert [t["translation"] for t in one.json()["translations"]] == [expected[LINES[0]]]
    many = client.post("/translate", json={"q": LINES[:5], "beam": 5, "align": True})
    records = many.json()["translations"]
    assert [t["translation"] for t in records] == [expected[x] for x in LINES[:5]]
    for record in records:
        words = record["words"]
        assert len(words["weights"]) == len(words["tgt"]) == len(record["translation"].split())
        assert all(len(row) == len(words["src"]) for row in words["weights"])
        assert record["alignment"]


def test_opennmt_api_answers_in_its_format(client, expected):
    response = client.post("/translator/translate", json=[{"src": x, "id": 100} for x in LINES[:3]])
    assert response.status_code == 200
    (answers,) = response.json()
    assert [a["tgt"] for a in answers] == [expected[x] for x in LINES[:3]]
    assert [a["src"] for a in answers] == LINES[:3]
    assert all(a["n_best"] == 1 and isinstance(a["pred_score"], float) for a in answers)
    assert all(isinstance(a["align"], list) and "-" in a["align"][0] for a in answers)


def test_health_models_and_page(client, toy_model_dir):
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/models").json()
    assert models["ensemble"] is False and models["models"][0]["path"] == str(toy_model_dir)
    assert models["models"][0]["precision"] == "float32"
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "__PALETTE__" not in page.text and "#440154" in page.text  # the heatmap's dark end
    assert "http://" not in page.text and "https://" not in page.text  # nothing fetched


def test_models_says_how_each_model_computes(toy_model_dir, monkeypatch):
    import torch

    from nmt_cli import device
    from nmt_cli.checkpoint import to_bf16
    from nmt_cli.serve.worker import describe

    assert describe(Translator.load(toy_model_dir, quantize=True))["precision"] == "int8"
    monkeypatch.setattr(device, "native_bf16", lambda: True)  # converted, never run, here
    halved = Translator.load(toy_model_dir)
    halved.model = to_bf16(halved.model, torch.device("cpu"))  # what --bf16 loads
    assert describe(halved)["precision"] == "bfloat16"


def test_opennmt_api_puts_the_sources_outer_spaces_back_as_opennmt_py_does(client, expected):
    response = client.post("/translator/translate", json=[{"src": f"  {LINES[0]} "}])
    assert response.json()[0][0]["tgt"] == f"  {expected[LINES[0]]} "


def test_health_head_and_opennmt_paths_and_the_allow_header_of_a_405(client):
    assert client.get("/translator/health").json() == {"status": "ok"}  # OpenNMT-py's path
    for path in ("/health", "/translator/health", "/models", "/"):
        assert client.head(path).status_code == 200, path
    refused = client.get("/translate")
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"


def test_text_escaped_by_the_client_is_measured_in_characters_not_bytes(client):
    body = json.dumps({"q": "\U0001f34e" * 390})  # 12 bytes an apple, as json.dumps escapes it
    assert len(body) > 4 * 400 + 64 * 8 + 1024  # past a limit that counted 4 bytes a character
    response = client.post("/translate", content=body.encode())
    assert response.status_code == 200, response.text  # 390 characters: under --max-chars 400


def test_a_line_ending_in_a_carriage_return_is_read_as_its_text(client, expected):
    response = client.post("/translate", json={"q": [LINES[1] + "\r"]})
    assert response.json()["translations"][0]["translation"] == expected[LINES[1]]
    inside = client.post("/translate", json={"q": ["Hello.\rGood morning."]})  # an old Mac's
    assert inside.status_code == 422 and "line break" in inside.json()["error"]  # line break


def test_the_listening_socket_takes_ipv6_and_every_interface_and_port_0():
    from nmt_cli.cli.serve import _every_interface, _listen

    for host in ("127.0.0.1", ""):  # "": every interface, as uvicorn reads it
        with _listen(host, 0) as listening:
            assert listening.getsockname()[1] > 0
            # asyncio sets TCP_NODELAY on the connections of a TCP-named socket only: with
            # proto 0, Nagle's algorithm held each answer ~40 ms (make bench-serve, 1 client)
            assert listening.proto == socket.IPPROTO_TCP
    for host, everywhere in (("0", True), ("0.0.0.0", True), ("", True), ("127.0.0.1", False)):
        with _listen(host, 0) as listening:  # "0" binds every interface as "0.0.0.0" does
            assert _every_interface(listening) is everywhere, host  # and gets the warning
    with _listen("127.0.0.1", 0) as bound:  # bound while the model loads, not listening:
        with pytest.raises(ConnectionRefusedError):  # a client is refused, not left hanging
            socket.create_connection(("127.0.0.1", bound.getsockname()[1]), timeout=5)
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.create_server(("::1", 0), family=socket.AF_INET6):
            pass
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with _listen("::1", 0) as listening:
        assert listening.family == socket.AF_INET6 and listening.getsockname()[1] > 0


def test_a_second_server_bound_to_the_port_while_the_first_loads_is_refused_at_listening():
    """Both bind (SO_REUSEADDR lets a second socket bind a port no one listens on yet); the
    one that listens second gets the one-line error, before it would say it serves."""
    from nmt_cli.cli.serve import _listen, _start_listening
    from nmt_cli.errors import ConfigError

    with _listen("127.0.0.1", 0) as first:
        port = first.getsockname()[1]
        with _listen("127.0.0.1", port) as second:
            _start_listening(first, "127.0.0.1", port)
            with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port} "):
                _start_listening(second, "127.0.0.1", port)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the first listens


def test_serve_on_port_0_says_the_port_it_serves_on(toy_model_dir):
    command = [sys.executable, "-m", "nmt_cli", "serve", "-m", str(toy_model_dir), "--port", "0",
               "--workers", "1", "--threads", "1"]  # fmt: skip
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in server.stderr], daemon=True).start()
    try:
        line = ""
        while "serving" not in line:
            line = lines.get(timeout=120)  # queue.Empty: it never said where it serves
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", line)[1])
        assert port > 0
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            assert time.monotonic() < deadline, "nothing answers on the port it printed"
            time.sleep(0.1)
    finally:
        server.kill()
        server.wait()


BAD = [
    (b'{"q": "apple"', 400, "not valid JSON"),
    (b"", 400, "empty"),
    (b'{"q": "\xff\xfe"}', 400, "not valid UTF-8"),
    (b'["apple"]', 422, "JSON object"),
    (b'{"q": 3}', 422, '"q" must be'),
    (b'{"q": ["apple", 4]}', 422, '"q" must be'),
    (b'{"text": "apple"}', 422, "unknown key"),
    (b'{"beam": 2}', 422, 'no "q"'),
    (b'{"q": "apple", "beam": "5"}', 422, '"beam" must be'),
    (b'{"q": "apple", "beam": 0}', 422, '"beam" must be an integer from 1 to 16'),
    (b'{"q": "apple", "beam": 5.0}', 422, "written without a decimal point (5, not 5.0)"),
    (b'{"q": "apple", "align": "yes"}', 422, '"align" must be'),
    (b'{"q": []}', 422, "nothing to translate: the list of lines is empty"),
    (b'{"q": "pe\x00ar"}', 400, "(Invalid control character at line 1 column 10)"),  # "at at"
    (b'{"q": ["", " "]}', 422, "nothing to translate"),
    (b'{"q": ["apple", "pear\\nplum"]}', 422, "line 2 of the request has a line break"),
    (b'{"q": "pear\\u0000"}', 422, "line 1 of the request contains a NUL"),
    (b'{"q": "apple \\ud800"}', 422, "lone surrogate '\\ud800' at character 7"),
    (json.dumps({"q": ["apple"] * 9}).encode(), 413, "limit of 8"),
    (json.dumps({"q": "apple " * 100}).encode(), 413, "limit of 400"),
    (b"{" + b" " * 50_000 + b"}", 413, "more than this server reads"),
    (b'{"q": ' + b"[" * 1_500 + b"]" * 1_500 + b"}", 400, "nests too deeply"),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD)
def test_bad_requests_get_a_4xx_one_line_error_and_the_server_goes_on(
    client, expected, body, status, message
):
    response = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert message in error and "\n" not in error
    after = client.post("/translate", json={"q": LINES[1]})
    assert after.json()["translations"][0]["translation"] == expected[LINES[1]]


def test_a_body_without_a_length_is_refused_once_past_the_limit():
    import asyncio

    from starlette.requests import Request

    from nmt_cli.serve.app import _body
    from nmt_cli.serve.requests import Limits, RequestError

    received = []

    async def receive():  # a chunked body far over the limit: no Content-Length
        received.append(1)
        return {"type": "http.request", "body": b" " * 10_000, "more_body": True}

    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    with pytest.raises(RequestError, match="more than this server reads"):
        asyncio.run(_body(request, Limits()))
    assert len(received) <= Limits().max_body_bytes // 10_000 + 1  # read no further


def test_a_body_may_start_with_a_byte_order_mark(client, expected):
    bom = client.post("/translate", content=("\ufeff" + json.dumps({"q": LINES[1]})).encode())
    assert bom.status_code == 200
    assert bom.json()["translations"][0]["translation"] == expected[LINES[1]]


def test_a_number_of_more_digits_than_python_reads_is_a_bad_request():
    from nmt_cli.serve.requests import Limits, RequestError, parse_body

    with pytest.raises(RequestError, match="not usable JSON"):
        parse_body(b'{"q": "apple", "beam": ' + b"9" * 5_000 + b"}", Limits())


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/translator/translate", b'{"src": "apple"}', 422),
        ("POST", "/translator/translate", b'[{"src": "apple", "id": "x"}]', 422),
        ("POST", "/translator/translate", b'[{"src": "apple", "id": true}]', 422),
        ("GET", "/openapi.json", b"", 404),  # a schema of no use, and warnings in the log
        ("POST", "/translator/translate", b"[]", 422),
        ("POST", "/translator/translate", b'[{"src": "a\\nb"}]', 422),
        ("GET", "/translate", b"", 405),
        ("POST", "/nowhere", b"{}", 404),
    ],
)
def test_other_bad_requests_also_get_one_line_json(client, method, path, body, status):
    response = client.request(method, path, content=body)
    assert response.status_code == status and response.json()["error"]


def test_a_compressed_body_and_a_trailing_slash_get_one_line_json(client):
    import gzip

    body = gzip.compress(b'{"q": "apple"}')
    response = client.post("/translate", content=body, headers={"Content-Encoding": "gzip"})
    assert response.status_code == 415 and "send the JSON uncompressed" in response.json()["error"]
    for path in ("/translate/", "/translator/translate/"):  # no empty redirect to follow
        response = client.post(path, json={"q": "apple"}, follow_redirects=False)
        assert response.status_code == 404 and response.json()["error"], path
    identity = client.post(
        "/translate", json={"q": "apple"}, headers={"Content-Encoding": "identity"}
    )
    assert identity.status_code == 200


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'[{"src": "apple", "id": 100.0}]', "without a decimal point (100, not 100.0)"),
        (b'[{"src": "apple", "id": 7.5}]', '"id" must be an integer: the model id'),
        (b'[{"src": "a\\nb"}]', 'one sentence per string (one {"src": \u2026} object for each)'),
        (b'[{"src": "a"}, {"src": "b", "n_best": 2}]', "object 2 has an unknown key 'n_best'"),
    ],
)
def test_opennmt_api_errors_say_what_its_own_format_needs(client, body, said):
    response = client.post("/translator/translate", content=body)
    assert response.status_code == 422 and said in response.json()["error"]


def test_a_client_gone_while_sending_its_body_leaves_no_traceback_and_the_server_goes_on(
    translator, expected
):
    import logging

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    with serving(translator) as url:
        logging.getLogger("uvicorn.error").addHandler(handler)
        try:
            port = int(url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port)) as client:
                client.sendall(
                    b'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{"q": '
                )  # and gone, 4,994 bytes short
            time.sleep(0.5)
            answer = httpx.post(f"{url}/translate", json={"q": LINES[0]}, timeout=60)
        finally:
            logging.getLogger("uvicorn.error").removeHandler(handler)
    assert answer.json()["translations"][0]["translation"] == expected[LINES[0]]
    assert [r.getMessage() for r in records if r.levelno >= logging.ERROR] == []


def test_a_body_that_stalls_is_refused_after_a_while(translator, monkeypatch):
    from nmt_cli.serve import app

    monkeypatch.setattr(app, "_BODY_S", 0.5)
    with serving(translator) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(
                b'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{"q":'
            )  # and nothing more
            answer = b""
            while not answer.endswith(b"}") and (chunk := client.recv(65536)):
                answer += chunk
    answer = answer.decode()
    assert answer.startswith("HTTP/1.1 408") and "nothing of it came for 0.5 s (5 bytes" in answer


def test_a_request_whose_client_went_away_is_cancelled():
    class Waiting:  # a translator that never answers, and notes what was cancelled
        healthy, models = True, []

        def __init__(self):
            self.futures = []

        def submit(self, request, api):
            self.futures.append(Future())
            return self.futures[-1]

        def close(self):
            pass

    waiting = Waiting()
    server = uvicorn.Server(
        uvicorn.Config(create_app(waiting), host="127.0.0.1", port=0, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        thread.join(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        body = json.dumps({"q": LINES[:3]}).encode()
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(
                b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            while not waiting.futures:  # the request has reached the translator
                assert time.monotonic() < deadline
                time.sleep(0.01)
        # the client has gone without its answer
        while not waiting.futures[0].cancelled():
            assert time.monotonic() < deadline, "the request of a client that left was kept"
            time.sleep(0.05)
    finally:
        server.should_exit = True
        thread.join(60)


def test_concurrent_requests_are_batched_and_equal_nmt_translate(translator, expected):
    with serving(translator, window=0.05) as url:

        def ask(line):
            with httpx.Client(base_url=url) as http:
                return http.post("/translate", json={"q": line}).json()["translations"][0]

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, LINES))
    assert [a["translation"] for a in answers] == [expected[x] for x in LINES]
    assert [a["source"] for a in answers] == LINES


class FakeStream:
    """A search in which a line takes one step per character and comes back upper-cased."""

    def __init__(
        self, beam, align, log, step_seconds=0.0, fail_on=None, refuse=None, add_seconds=0.0
    ):
        self.refuse = refuse  # a line add() raises for, keeping the stream as it was
        self.add_seconds = add_seconds  # how long a join takes
        self.steps = 0  # steps run
        self.key, self.log, self.step_seconds, self.fail_on = (
            (beam, align),
            log,
            step_seconds,
            fail_on,
        )
        self.lines = {}  # tag -> [line, steps left]
        self.most = 0  # the most lines it held at once

    @property
    def active(self):
        return len(self.lines)

    def add(self, items):
        if any(line == self.refuse for _, line in items):
            raise ValueError(f"cannot add {self.refuse}")
        time.sleep(self.add_seconds)
        self.log.append((self.key, [line for _, line in items], id(self), self.steps))
        for tag, line in items:
            self.lines[tag] = [line, len(line)]
        self.most = max(self.most, len(self.lines))

    def step(self):
        time.sleep(self.step_seconds)
        self.steps += 1
        if self.fail_on is not None and any(
            line == self.fail_on for line, _ in self.lines.values()
        ):
            raise RuntimeError(self.fail_on)
        done = []
        for tag, entry in list(self.lines.items()):
            entry[1] -= 1
            if entry[1] <= 0:
                done.append((tag, entry[0].upper()))
                del self.lines[tag]
        return done


def fake_streams(log, **kwargs):
    streams = []

    def open_stream(beam, align):
        streams.append(FakeStream(beam, align, log, **kwargs))
        return streams[-1]

    return open_stream, streams


def test_requests_waiting_together_start_as_one_batch():
    log = []
    open_stream, _ = fake_streams(log)
    batcher = Batcher(open_stream, window=0.0, max_lines=64)
    requests = [TranslateRequest(["a", "b"], 5, False), TranslateRequest(["c"], 5, False)]
    requests.append(TranslateRequest(["d"], 1, False))  # other settings: a search of its own
    futures = [batcher.submit(request) for request in requests]  # queued before the worker runs
    batcher.start().close()
    assert [f.result() for f in futures] == [["A", "B"], ["C"], ["D"]]
    assert [(key, lines) for key, lines, *_ in log] == [
        ((5, False), ["a", "b", "c"]),
        ((1, False), ["d"]),
    ]


def test_the_worker_loop_runs_in_the_calling_thread_until_stopped():
    log = []
    batcher = Batcher(fake_streams(log)[0], window=0.0)
    first = batcher.submit(TranslateRequest(["ab"], 5, False))
    threads = []  # the thread that answered each request
    first.add_done_callback(lambda _: threads.append(threading.current_thread()))
    # a request sent once the first is answered, then stop: the loop finishes it, returns
    first.add_done_callback(lambda _: (batcher.submit(TranslateRequest(["c"], 5, False)),))
    first.add_done_callback(lambda _: batcher.stop())
    batcher.run()
    assert first.result() == ["AB"] and threads == [threading.main_thread()]
    assert [lines for _, lines, *_ in log] == [["ab"], ["c"]]


def test_an_idle_worker_waits_while_requests_keep_coming_within_the_window():
    log = []
    batcher = Batcher(fake_streams(log)[0], window=1.0).start()
    futures = []
    for line in ("a", "b", "c"):  # 0.6 s apart: the last comes past one window after the first
        futures.append(batcher.submit(TranslateRequest([line], 5, False)))
        time.sleep(0.6)
    assert [f.result() for f in futures] == [["A"], ["B"], ["C"]]
    batcher.close()
    assert [lines for _, lines, *_ in log] == [["a", "b", "c"]]


def test_a_request_joins_the_running_search_and_is_answered_when_its_line_is_done():
    log = []
    open_stream, streams = fake_streams(log, step_seconds=0.01)
    batcher = Batcher(open_stream, window=0.0).start()
    long = batcher.submit(TranslateRequest(["x" * 300], 5, False))  # 300 steps: about 3 s
    while not log:
        time.sleep(0.01)
    short = batcher.submit(TranslateRequest(["ab", "c"], 5, False))
    assert short.result(timeout=2) == ["AB", "C"]
    assert not long.done()  # the short request did not wait for the long line
    assert long.result() == ["X" * 300]
    batcher.close()
    assert len(streams) == 1 and [lines for _, lines, *_ in log] == [["x" * 300], ["ab", "c"]]


@pytest.mark.parametrize(
    ("add_seconds", "step_seconds", "steps_waited"),
    [(0.1, 0.001, 8), (0.0, 0.05, 0)],  # a join of 100 ms waits 8 steps of 1 ms; a step of
)  # 50 ms is worth a join at once
def test_lines_wait_to_join_a_running_search_as_long_as_a_join_costs_against_a_step(
    add_seconds, step_seconds, steps_waited
):
    log, submitted, futures = [], {}, []
    open_stream, streams = fake_streams(log, step_seconds=step_seconds, add_seconds=add_seconds)

    def pace(searching):  # before each round of steps: requests come at given steps
        steps = streams[0].steps if streams else 0
        for at, line in ((2, "ab"), (12, "cd")):  # the first join measures what a join costs
            if searching and steps == at and at not in submitted:
                submitted[at] = steps
                futures.append(batcher.submit(TranslateRequest([line], 5, False)))

    batcher = Batcher(open_stream, window=0.0, pace=pace).start()
    long = batcher.submit(TranslateRequest(["x" * 60], 5, False))  # 60 steps
    assert long.result(timeout=30) == ["X" * 60]
    assert [f.result(timeout=30) for f in futures] == [["AB"], ["CD"]]
    batcher.close()
    joined = [steps for _, _, _, steps in log[1:]]  # steps run when each line joined
    assert joined[0] == submitted[2] + 1  # no join measured yet: at the next round
    assert joined[1] == submitted[12] + 1 + steps_waited


def test_no_more_than_max_lines_are_searched_at_once_and_results_keep_their_order():
    log = []
    open_stream, streams = fake_streams(log)
    batcher = Batcher(open_stream, window=0.0, max_lines=2)
    lines = ["aaa", "b", "cc", "d", "eeee"]
    first, second = (batcher.submit(TranslateRequest(x, 5, False)) for x in (lines, ["f"]))
    batcher.start().close()
    assert first.result() == [x.upper() for x in lines] and second.result() == ["F"]
    assert streams[0].most == 2
    assert [x for _, added, *_ in log for x in added] == [*lines, "f"]  # first come, first served


def test_a_failing_search_fails_its_requests_only():
    log = []
    batcher = Batcher(fake_streams(log, fail_on="boom")[0], window=0.0).start()
    failed = batcher.submit(TranslateRequest(["boom"], 5, False))
    with pytest.raises(RuntimeError):
        failed.result()
    assert batcher.submit(TranslateRequest(["fine"], 5, False)).result() == ["FINE"]
    assert batcher.submit(TranslateRequest(["ok"], 1, False)).result() == ["OK"]
    batcher.close()
    assert len({stream for _, _, stream, _ in log}) == 3  # the failed search was replaced


def test_a_request_that_cannot_join_fails_alone_and_the_running_ones_go_on():
    log = []
    batcher = Batcher(fake_streams(log, step_seconds=0.005, refuse="bad")[0], window=0.0).start()
    running = batcher.submit(TranslateRequest(["x" * 100], 5, False))
    while not log:
        time.sleep(0.01)
    refused = batcher.submit(TranslateRequest(["fine", "bad"], 5, False))
    with pytest.raises(ValueError):
        refused.result(timeout=5)
    assert running.result(timeout=5) == ["X" * 100]
    batcher.close()


def test_cancelled_requests_neither_stop_the_worker_nor_stay_behind():
    log = []
    batcher = Batcher(fake_streams(log, step_seconds=0.005)[0], window=0.0)
    empty = batcher.submit(TranslateRequest([], 5, False))
    assert empty.cancel()
    batcher.start()
    long = batcher.submit(TranslateRequest(["y" * 40, "z" * 300], 5, False))
    while not log:
        time.sleep(0.01)
    assert long.cancel()
    assert batcher.submit(TranslateRequest(["ok"], 5, False)).result(timeout=5) == ["OK"]
    batcher.close()  # after the cancelled lines have run out
    assert not any(batcher._running.values())


def test_load_32_clients_50_requests_each_lose_nothing(translator):
    greedy = translator.translate_chunk(LINES, SearchOptions(beam_size=1))
    expected = {line: t.text for line, t in zip(LINES, greedy, strict=True)}

    def client_run(number):
        mismatches = 0
        with httpx.Client(base_url=url, timeout=60) as http:
            for k in range(50):
                line = LINES[(number * 7 + k) % len(LINES)]
                got = http.post("/translate", json={"q": line, "beam": 1}).json()["translations"][0]
                mismatches += got["source"] != line or got["translation"] != expected[line]
        return mismatches

    with serving(translator) as url, ThreadPoolExecutor(32) as pool:
        results = list(pool.map(client_run, range(32)))
    assert results == [0] * 32


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.mark.skipif(_browser() is None, reason="no Chromium installed")
def test_the_page_shows_translation_and_heatmap_in_a_browser(translator, expected):
    playwright = pytest.importorskip("playwright.sync_api")
    with serving(translator) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_browser())
        page = browser.new_page()
        page.goto(url + "/")
        page.fill("#source", LINES[2])
        page.click("button")
        page.wait_for_selector("#heatmap table")
        assert page.inner_text("#translation") == expected[LINES[2]]
        assert page.locator("#heatmap td").count() > 0
        assert "●" in page.inner_text("#heatmap")
        browser.close()


@contextlib.contextmanager
def serve_command(model_dir, *options):
    """`nmt serve` as a user starts it, on a free loopback port; yields (process, URL)."""
    with socket.socket() as probe:  # a free port, released before the server takes it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "nmt_cli", "serve", "-m", str(model_dir)]
    server = subprocess.Popen(
        [*command, "--port", str(port), *options], stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:  # until it listens (or has died)
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "nmt serve did not answer GET /health with 200"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health").status_code == 200:
                    break
            time.sleep(0.1)
        yield server, url
    finally:
        server.kill()


def test_sigterm_drains_the_request_in_flight_and_exits_cleanly(toy_model_dir, expected):
    with serve_command(toy_model_dir, "--window-ms", "1000", "--threads", "1") as (server, url):
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(httpx.post, url + "/translate", json={"q": LINES[3]}, timeout=30)
            time.sleep(0.3)  # the request now waits in the batching window (1 s)
            server.send_signal(signal.SIGTERM)
            response = answer.result()
        assert response.json()["translations"][0]["translation"] == expected[LINES[3]]
        assert server.wait(timeout=30) == 0
        log = server.stderr.read()
        assert "127.0.0.1" in log and "every request answered" in log and "Traceback" not in log


def test_a_second_ctrl_c_stops_at_once_and_says_what_was_dropped(toy_model_dir):
    with serve_command(toy_model_dir, "--window-ms", "1000", "--threads", "1") as (server, url):
        with ThreadPoolExecutor(1) as pool:
            body = {"q": LINES[:32], "beam": 16}
            pending = pool.submit(httpx.post, url + "/translate", json=body, timeout=30)
            time.sleep(0.3)  # waiting in the batching window: the first Ctrl-C waits for it
            server.send_signal(signal.SIGINT)
            time.sleep(0.2)
            server.send_signal(signal.SIGINT)  # the second: stop now
            assert server.wait(timeout=20) == 130  # no wait on the translating process
            response = pending.result()  # answered, in JSON as every other error
            assert response.status_code == 503
            assert "second Ctrl-C" in response.json()["error"]
        log = server.stderr.read()
        last = log.strip().splitlines()[-1]
        assert last.startswith("interrupted:") and "requests in flight were answered 503" in last
        assert "Traceback" not in log, log


def test_the_worker_process_answers_as_the_service_in_this_process(toy_model_dir, translator):
    spec = ModelSpec((toy_model_dir,), device="cpu", threads=1)
    requests = [
        (TranslateRequest(lines=[LINES[4], LINES[5]], beam=5, align=True), NMT_API),
        (TranslateRequest(lines=[LINES[6]], beam=1, align=False), OPENNMT_API),
    ]
    local = Local(translator).start()
    try:
        wanted = [local.submit(r, api).result(timeout=60) for r, api in requests]
    finally:
        local.close()
    worker = WorkerProcess(spec, window=0.0).start()
    try:
        assert worker.models == local.models and worker.healthy
        dropped = worker.submit(TranslateRequest(lines=LINES[:8], beam=5, align=False))
        assert dropped.cancel()  # a client that gave up: forgotten here, dropped in the child
        assert dropped.cancelled() and not worker._futures
        got = [worker.submit(r, api).result(timeout=60) for r, api in requests]
    finally:
        worker.close()
    assert got == wanted
    assert worker._process.exitcode == 0 and not worker._reader.is_alive()
    worker.close()  # a second close does nothing


def test_the_app_over_the_worker_process_and_after_its_death(toy_model_dir, expected):
    worker = WorkerProcess(ModelSpec((toy_model_dir,), device="cpu", threads=1)).start()
    with TestClient(create_app(worker)) as http:
        assert http.get("/health").json() == {"status": "ok"}
        answer = http.post("/translate", json={"q": LINES[7]}).json()["translations"][0]
        assert answer["translation"] == expected[LINES[7]]
        in_flight = worker.submit(TranslateRequest(lines=LINES[:16], beam=5, align=True))
        worker._process.kill()  # as the kernel's OOM killer would
        with pytest.raises(
            NmtError, match=r"stopped \(exit code -9\) before answering: send the request again"
        ):
            in_flight.result(timeout=30)
        health = http.get("/health")
        assert health.status_code == 503 and "restart nmt serve" in health.json()["error"]
        after = http.post("/translate", json={"q": LINES[0]})
        assert after.status_code == 503  # unavailable, as /health says (it was a 500)
        assert "restart nmt serve" in after.json()["error"] and "\n" not in after.json()["error"]
    assert not worker._reader.is_alive() and worker.closed


def test_a_model_the_worker_process_cannot_load_raises_the_loaders_error(tmp_path):
    with pytest.raises(ArtifactError) as raised:
        Translator.load(tmp_path)
    with pytest.raises(ArtifactError) as in_child:
        WorkerProcess(ModelSpec((tmp_path,), device="cpu")).start()
    assert str(in_child.value) == str(raised.value)
    result = invoke("serve", "-m", tmp_path, "--port", "0")
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert str(tmp_path) in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_pool_of_processes_shares_the_requests_and_answers_as_one(
    toy_model_dir, expected, monkeypatch
):
    monkeypatch.setattr("nmt_cli.device.available_cores", lambda: 2)
    said: list[str] = []
    spec = ModelSpec((toy_model_dir,), device="cpu")
    pool = WorkerPool(spec, window=0.05, notify=said.append).start()
    try:  # --workers 0 on 2 cores: 2 processes of 1 thread each
        assert len(pool.workers) == 2 and pool.healthy
        assert all(w._process.is_alive() and w.device == "cpu" for w in pool.workers)
        for worker in pool.workers:  # none answers while the 8 are sent (else a race)
            os.kill(worker._process.pid, signal.SIGSTOP)
        try:
            futures = [
                pool.submit(TranslateRequest(lines=[line], beam=5, align=False))
                for line in LINES[:8]
            ]
            assert [w.in_flight for w in pool.workers] == [
                4,
                4,
            ]  # fewest in flight, first of equals
        finally:
            for worker in pool.workers:
                os.kill(worker._process.pid, signal.SIGCONT)
        got = [f.result(timeout=60)[0]["translation"] for f in futures]
        assert got == [expected[line] for line in LINES[:8]]
        opennmt = pool.submit(TranslateRequest(lines=[LINES[9]], beam=5, align=False), OPENNMT_API)
        assert opennmt.result(timeout=60)[0]["tgt"] == expected[LINES[9]]
        lone = pool.submit(TranslateRequest(lines=[LINES[1]], beam=5, align=False))
        assert [w.in_flight for w in pool.workers] == [1, 0]  # a lone client: the first process
        lone.result(timeout=60)
        pool.submit(TranslateRequest(lines=[LINES[2]], beam=5, align=False))
        assert [w.in_flight for w in pool.workers] == [1, 0]
        pool.busy[0] = 1  # as if killed at work: its flag must not stay set
        pool.workers[0]._process.kill()
        pool.workers[0]._reader.join(30)
        assert pool.busy[0] == 0
        assert not pool.healthy  # died just after it started: not restarted, GET /health 503
        assert len(said) == 1 and "translating process 1 exited (code -9)" in said[0]
        assert "not restarted" in said[0]
        after = pool.submit(
            TranslateRequest(lines=[LINES[3]], beam=5, align=False)
        )  # the live one takes it
        assert after.result(timeout=60)[0]["translation"] == expected[LINES[3]]
    finally:
        pool.close(timeout=30)
    assert pool.closed and not any(w._process.is_alive() for w in pool.workers)


def _nmt_children() -> list:
    return [p for p in multiprocessing.active_children() if p.name == "nmt-translate"]


def test_a_pool_replaces_a_process_that_dies_and_serves_with_the_new_one(toy_model_dir, expected):
    said: list[str] = []
    spec = ModelSpec((toy_model_dir,), device="cpu", threads=1)
    pool = WorkerPool(spec, workers=2, notify=said.append, restart_after=0).start()
    try:
        dead = pool.workers[1]._process
        dead.kill()  # as the kernel's OOM killer would
        deadline = time.monotonic() + 60
        while not (pool.healthy and pool.workers[1]._process is not dead):
            assert time.monotonic() < deadline, said
            time.sleep(0.1)
        assert said == [
            "translating process 2 exited (code -9); restarting it",
            "translating process 2 restarted",
        ]
        request = TranslateRequest(lines=LINES[:3], beam=5, align=False)
        answer = pool.workers[1].submit(request).result(timeout=60)
        assert [a["translation"] for a in answer] == [expected[line] for line in LINES[:3]]
    finally:
        pool.close(timeout=30)
    assert not _nmt_children()


def test_a_pool_does_not_replace_a_process_with_one_of_weights_changed_since(
    toy_model_dir, tmp_path
):
    """A training or `nmt average --force` into the served directory: a replacement would load
    the new weights and answer otherwise than the processes still running the old ones."""
    served = tmp_path / "served"
    shutil.copytree(toy_model_dir, served)
    said: list[str] = []
    spec = ModelSpec((served,), device="cpu", threads=1)
    pool = WorkerPool(spec, workers=2, notify=said.append, restart_after=0).start()
    try:
        weights = served / "model.pt"
        weights.write_bytes(weights.read_bytes())  # rewritten: another modification time
        dead = pool.workers[1]._process
        dead.kill()
        deadline = time.monotonic() + 60
        while not said:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert said == [
            "translating process 2 exited (code -9); not restarted: the weights it would load "
            "changed since the service started, and it would answer otherwise than the "
            "others: restart nmt serve to serve the new weights"
        ]
        assert not pool.healthy and pool.workers[1]._process is dead  # /health says 503
    finally:
        pool.close(timeout=30)
    said.clear()
    lone = WorkerPool(spec, workers=1, notify=said.append, restart_after=0).start()
    try:  # one process has no others to differ from: replaced, with the new weights
        weights.write_bytes(weights.read_bytes())
        dead = lone.workers[0]._process
        dead.kill()
        deadline = time.monotonic() + 60
        while not (lone.healthy and lone.workers[0]._process is not dead):
            assert time.monotonic() < deadline, said
            time.sleep(0.1)
        assert said[-1] == "translating process 1 restarted"
    finally:
        lone.close(timeout=30)
    assert not _nmt_children()


def test_a_pool_closed_while_a_process_is_replaced_leaves_none_behind(toy_model_dir):
    said: list[str] = []
    spec = ModelSpec((toy_model_dir,), device="cpu", threads=1)
    pool = WorkerPool(spec, workers=2, notify=said.append, restart_after=0).start()
    pool.workers[0]._process.kill()
    deadline = time.monotonic() + 30
    while not said:  # the replacement has begun to load
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    pool.close(timeout=10)
    assert time.monotonic() - started < 15
    assert not _nmt_children() and said == ["translating process 1 exited (code -9); restarting it"]


def test_a_replacement_that_dies_as_it_starts_is_not_put_in_the_slot(toy_model_dir, monkeypatch):
    said: list[str] = []
    spec = ModelSpec((toy_model_dir,), device="cpu", threads=1)
    pool = WorkerPool(spec, workers=2, notify=said.append, restart_after=0).start()
    start = WorkerProcess.start

    def start_and_die(self):  # ready, then killed before the pool can take it
        start(self)
        self._process.kill()
        self._reader.join(30)
        return self

    monkeypatch.setattr(WorkerProcess, "start", start_and_die)
    try:
        pool.workers[1]._process.kill()
        deadline = time.monotonic() + 60
        while len(said) < 2:
            assert time.monotonic() < deadline, said
            time.sleep(0.05)
        assert said == [
            "translating process 2 exited (code -9); restarting it",
            "translating process 2 could not restart: it exited (code -9) as it started",
        ]
        assert not pool.healthy and pool.workers[0].healthy
    finally:
        pool.close(timeout=10)
    assert not _nmt_children()


def test_a_process_started_from_another_thread_is_deaf_to_ctrl_c_while_it_loads(toy_model_dir):
    worker = WorkerProcess(ModelSpec((toy_model_dir,), device="cpu", threads=1))
    launcher = threading.Thread(target=worker.launch)  # as a pool replacing a process does
    launcher.start()
    launcher.join()
    time.sleep(0.05)  # the child is still starting its interpreter
    os.kill(worker._process.pid, signal.SIGINT)
    try:
        assert worker.wait_ready().healthy
    finally:
        worker.close(timeout=10)


def test_the_number_of_processes_is_checked_and_kept(toy_model_dir):
    result = invoke("serve", "-m", toy_model_dir, "--workers", "-1")
    assert result.exit_code == 2 and "--workers must be from 0" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    for port in ("99999", "-1"):
        result = invoke("serve", "-m", toy_model_dir, "--port", port)
        assert (
            result.exit_code == 2 and f"--port must be from 0 to 65535, got {port}" in result.stderr
        )
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    pool = WorkerPool(ModelSpec((toy_model_dir,), device="cpu", threads=1), workers=1).start()
    try:
        assert len(pool.workers) == 1 and pool.models == pool.workers[0].models
    finally:
        pool.close()


def test_busy_processes_share_the_threads_and_a_lone_one_has_them_all():
    from multiprocessing import Array

    from nmt_cli.serve.worker import CoreShare

    flags, calls = Array("b", 2, lock=False), {0: [], 1: []}
    shares = [CoreShare(flags, k, 4, calls[k].append) for k in (0, 1)]
    shares[0](True)  # alone at work: keeps all 4 threads (nothing to set)
    shares[1](True)  # both: 2 each (the first learns it at its next round of steps)
    shares[0](True)
    shares[1](False)  # the second waits idle: its threads stay as they were
    shares[0](True)
    assert calls == {0: [2, 4], 1: [2]} and list(flags) == [1, 0]
    shares[0](False)
    assert list(flags) == [0, 0]


def test_the_worker_loop_says_when_it_searches_and_when_it_waits_idle():
    log, paced = [], []
    batcher = Batcher(fake_streams(log)[0], window=0.0, pace=paced.append)
    future = batcher.submit(TranslateRequest(["abc"], 5, False))  # 3 steps
    batcher.stop()
    batcher.run()
    assert future.result() == ["ABC"]
    assert paced == [False, True, True, True]  # idle before the request, then each step


def test_a_pool_closed_without_time_stops_its_processes_at_once(toy_model_dir):
    spec = ModelSpec((toy_model_dir,), device="cpu", threads=1)
    pool = WorkerPool(spec, workers=2).start()
    long = TranslateRequest(lines=LINES[:40], beam=16, align=True)
    pending = [pool.submit(long) for _ in pool.workers]
    time.sleep(0.5)  # both are searching
    started = time.monotonic()
    pool.close(timeout=0)  # what a second Ctrl-C does
    assert time.monotonic() - started < 8  # no grace period per process
    assert not any(w._process.is_alive() for w in pool.workers)
    for future in pending:
        with contextlib.suppress(NmtError):
            future.result(timeout=10)


def test_ctrl_c_right_after_start_stops_the_service_instead_of_being_lost(toy_model_dir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "nmt_cli", "serve", "-m", str(toy_model_dir), "--workers", "2"]
    server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert "nmt: serving" in server.stderr.readline()
        server.send_signal(signal.SIGINT)  # before or just after uvicorn takes the signals
        assert server.wait(timeout=30) == 0
        assert "every request answered" in server.stderr.read()
    finally:
        server.kill()


def test_a_second_ctrl_c_answers_a_request_still_sending_its_body_in_json(toy_model_dir):
    """A client cut off while it was still sending its body gets the same 503 JSON error."""
    with serve_command(toy_model_dir, "--threads", "1") as (server, url):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
            client.sendall(
                b"POST /translate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"q":\r\n'
            )  # and nothing more: the body is still coming
            time.sleep(0.5)
            server.send_signal(signal.SIGINT)
            time.sleep(0.2)
            server.send_signal(signal.SIGINT)
            assert server.wait(timeout=20) == 130
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
    head, _, body = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 503") and "application/json" in head
    assert "second Ctrl-C" in json.loads(body)["error"]


def test_align_asked_of_a_model_without_attention_is_a_422(toy_plain_model_dir):
    # it answered 200 with an empty "alignment", as if no word were linked
    with TestClient(create_app(Local(Translator.load(toy_plain_model_dir)).start())) as http:
        refused = http.post("/translate", json={"q": "apple river", "align": True})
        assert refused.status_code == 422
        assert (
            "--attention none" in refused.json()["error"]
            and '"align": false' in refused.json()["error"]
        )
        answered = http.post("/translate", json={"q": "apple river"})
        assert answered.status_code == 200 and "words" not in answered.json()["translations"][0]
