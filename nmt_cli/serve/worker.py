"""Where `nmt serve` translates: a `Batcher` over a loaded translator, in this process (`Local`),
in a child process of its own (`WorkerProcess`), or in several (`WorkerPool`, what `nmt serve`
runs).

Both take a checked request and the API it came by, and give a future of the JSON records the
API answers with. In one process the search shares the GIL with the HTTP event loop: every torch
operator releases it and must win it back: under 32 loopback clients a search step over ~22
sentences of the demo model took 4.5-4.9 ms there, and 3.1-3.3 ms in a child process, where the
search has a GIL of its own; only the requests and the records cross the pipe.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from nmt_cli.errors import NmtError
from nmt_cli.serve.batcher import Batcher, settle
from nmt_cli.serve.requests import TranslateRequest
from nmt_cli.threads import deaf_to_stop_signals, signals_ignored

if TYPE_CHECKING:
    from nmt_cli.translator import Translation, Translator

NMT_API, OPENNMT_API = "nmt", "opennmt"  # POST /translate and POST /translator/translate


class WorkerStopped(NmtError):
    """The translating process is gone: the service cannot answer (HTTP 503) until restarted."""


class Local:
    """The batcher over `translator` in this process (the tests' service, and the child's)."""

    healthy = True

    def __init__(
        self, translator: Translator, window: float = 0.005, max_lines: int = 64, pace=None
    ):
        from nmt_cli.aligner import TranslationAligner

        self.translator = translator
        self.aligner = TranslationAligner.for_model(translator)  # `nmt translate --align`'s links
        self.batcher = Batcher(_streams_of(translator), window, max_lines, pace)
        self.models = [describe(t) for t in (translator, *translator.partners)]

    def start(self) -> Local:
        self.batcher.start()
        return self

    def submit(self, request: TranslateRequest, api: str = NMT_API) -> Future:
        """A future of the request's records; cancelling it drops the request's lines."""
        job, records = self.batcher.submit(request), Future()
        records.add_done_callback(lambda done: done.cancelled() and job.cancel())
        job.add_done_callback(partial(_render, records, request, api, self.aligner))
        return records

    def close(self) -> None:
        """Finish the requests already submitted, then stop."""
        self.batcher.close()


def _streams_of(translator: Translator):
    """The batcher's searches over `translator`: the search of `nmt translate` at each beam."""
    from nmt_cli.translator import SearchOptions

    def open_stream(beam: int, align: bool):
        return translator.stream(SearchOptions(beam_size=beam), with_attention=align)

    return open_stream


def _render(records: Future, request: TranslateRequest, api: str, aligner, job: Future) -> None:
    if job.cancelled():
        return
    try:
        translations = job.result()
        if api == OPENNMT_API:
            result = [opennmt_record(t, aligner) for t in translations]
        else:
            result = [record(t, request.align, aligner) for t in translations]
    except Exception as exc:
        settle(records, error=exc)
    else:
        settle(records, result)


def record(translation: Translation, align: bool, aligner) -> dict:
    """What POST /translate answers for a line: `nmt translate --json`'s object, and with
    `align` the word-level weights (T, S) and words the page draws."""
    from nmt_cli.aligner import shown_words
    from nmt_cli.render.translation import as_record

    result = as_record(translation, aligner.links(translation))
    words = shown_words(translation, aligner.options.unit) if align else None  # as linked
    if words is not None:
        weights = [[round(float(w), 4) for w in row] for row in words.weights]
        result["words"] = {"src": words.src_words, "tgt": words.tgt_words, "weights": weights}
    return result


def opennmt_record(translation: Translation, aligner) -> dict:
    """What OpenNMT-py's server answers for a line."""
    from nmt_cli.alignment import format_pharaoh

    source = translation.source  # its spaces at either end put back, as OpenNMT-py's server does
    lead, trail = source[: len(source) - len(source.lstrip())], source[len(source.rstrip()) :]
    return {
        "src": source,
        "tgt": f"{lead}{translation.text}{trail}" if translation.text else translation.text,
        "pred_score": round(float(translation.score), 4),
        "n_best": 1,
        "align": [format_pharaoh(aligner.links(translation))],
    }


def describe(translator: Translator) -> dict:
    """A model as GET /models lists it."""
    from nmt_cli import checkpoint

    meta_file = translator.model_dir / checkpoint.META_FILE
    meta = checkpoint.read_json(meta_file) if meta_file.is_file() else {}
    return {
        "path": str(translator.model_dir),
        "src_lang": meta.get("src_lang"),
        "tgt_lang": meta.get("tgt_lang"),
        "step": meta.get("step"),
        "attention": translator.config.model.attention,
        "src_vocab_size": translator.config.model.src_vocab_size,
        "tgt_vocab_size": translator.config.model.tgt_vocab_size,
        "precision": _precision(translator.model),
    }


def _precision(model) -> str:
    """How the model computes: "int8" (`--quantize`), "bfloat16" (`--bf16`) or "float32"."""
    import torch

    if callable(model.generator.weight):  # a dynamically quantized output layer
        return "int8"
    return "bfloat16" if model.generator.weight.dtype == torch.bfloat16 else "float32"


@dataclass(frozen=True)
class ModelSpec:
    """What the child process loads: `Translator.load`'s arguments (the first model, and the
    rest as the partners of an ensemble)."""

    models: tuple[Path, ...]
    device: str = "auto"
    quantize: bool = False
    threads: int = 0
    bf16: bool = False


class WorkerProcess:
    """`Local` in a child process: `start` loads the model there (its error, if any, is raised
    here), `submit` sends a request over a pipe, and a reader thread settles the futures.

    If the child dies, the requests in it and every later one fail with a one-line NmtError,
    and `healthy` turns False (GET /health then answers 503).
    """

    def __init__(
        self,
        spec: ModelSpec,
        window: float = 0.005,
        max_lines: int = 64,
        share=None,
        on_exit: Callable[[WorkerProcess], None] | None = None,
    ):
        """`share`: (one busy flag per process of a `WorkerPool`, this one's index), for torch
        threads that follow how many are busy (`CoreShare`). `on_exit(self)` is called (from
        the reader thread) once the child has died without being asked to stop."""
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked threads
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_work,
            args=(child, spec, window, max_lines, share),
            name="nmt-translate",
            daemon=True,
        )
        self._child_end = child
        self._futures: dict[int, Future] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()  # one message on the pipe at a time
        self._abandoning = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="nmt-answers", daemon=True)
        self._stopped: str | None = None  # why requests fail, once the child is gone
        self._closed = False
        self.models: list[dict] = []
        self.device = ""  # where the child translates ("cpu", "cuda"), once it is ready
        self.ready_at = 0.0  # time.monotonic() when the child had loaded the model
        self._share = share
        self._on_exit = on_exit

    @property
    def healthy(self) -> bool:
        return self._stopped is None and self._process.is_alive()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._futures)

    def start(self) -> WorkerProcess:
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the child, which begins loading the model (`wait_ready` waits for it)."""
        try:
            with signals_ignored():  # the child starts deaf to Ctrl-C: the parent stops it
                self._process.start()
        except BaseException:
            self._abandon()
            raise
        self._child_end.close()

    def wait_ready(self) -> WorkerProcess:
        """Wait until the child has loaded the model; its error, if any, is raised here."""
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            self._abandon()
            raise NmtError(
                f"the translating process exited with code {self._process.exitcode} while "
                "loading the model"
            ) from None
        except BaseException:  # Ctrl-C while the model loads: the child must not go on
            self._abandon()
            raise
        if kind == "error":
            self._abandon()
            raise payload
        self.models, self.device = payload
        self.ready_at = time.monotonic()
        self._reader.start()
        return self

    def submit(self, request: TranslateRequest, api: str = NMT_API) -> Future:
        future: Future = Future()
        with self._lock:
            if self._stopped is not None:
                future.set_exception(WorkerStopped(self._stopped))
                return future
            ident = next(self._ids)
            self._futures[ident] = future
            try:
                self._conn.send((ident, request, api))
            except OSError:  # the child is gone; the reader is about to see it
                del self._futures[ident]
                future.set_exception(WorkerStopped(STOPPED))
                return future
        future.add_done_callback(lambda done: done.cancelled() and self._cancel(ident))
        return future

    def _cancel(self, ident: int) -> None:
        with self._lock, contextlib.suppress(OSError):
            if self._futures.pop(ident, None) is not None and self._stopped is None:
                self._conn.send((ident, None, None))

    def close(self, timeout: float = 60.0) -> None:
        """Let the child finish what it holds, for at most `timeout` s, then make sure it has
        exited (killed if need be). A second call does nothing."""
        self.stop()
        self.wait_closed(timeout)

    def stop(self) -> None:
        """Ask the child to finish what it holds and exit; do not wait."""
        if self._closed:
            return
        self._closed = True
        with self._lock, contextlib.suppress(OSError):
            if self._stopped is None:
                self._conn.send(None)

    def wait_closed(self, timeout: float = 60.0) -> None:
        """After `stop`: wait up to `timeout` s in all for the child's answers and its exit,
        then kill it if it is still there (timeout 0: at once)."""
        if self._conn.closed:
            return
        deadline = time.monotonic() + timeout
        if self._reader.is_alive():
            self._reader.join(timeout)
        self._process.join(max(0.0, deadline - time.monotonic()))
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._reader.join(5)  # the child is gone: its pipe has ended
        self._conn.close()

    def _abandon(self) -> None:
        """Stop a child that failed to start or was interrupted while loading (from any
        thread: a pool closing kills a replacement that another thread waits for)."""
        with self._abandoning:
            if self._process.pid is not None:
                if self._process.is_alive():
                    self._process.kill()
                self._process.join()
            self._conn.close()
            self._closed = True

    def _read(self) -> None:
        while True:
            try:
                ident, error, records = self._conn.recv()
            except (EOFError, OSError):
                break
            if ident is None:  # the child closed in order
                break
            future = self._futures.pop(ident, None)
            if future is not None:
                settle(future, records, error)
        self._process.join(timeout=5)
        if self._share is not None:  # a child that died at work is no longer busy
            flags, index = self._share
            flags[index] = 0
        with self._lock:
            self._stopped = (
                f"the translating process stopped (exit code {self._process.exitcode}) before "
                "answering: send the request again; if GET /health answers 503 for long, "
                "restart nmt serve"
            )
            left, self._futures = list(self._futures.values()), {}
        for future in left:
            settle(future, error=WorkerStopped(self._stopped))
        if not self._closed and self._on_exit is not None:
            self._on_exit(self)

    @property
    def exitcode(self) -> int | None:
        return self._process.exitcode


# GET /health while a process is down; a pool replaces it unless it died soon after starting
STOPPED = "a translating process has stopped: if this lasts, restart nmt serve"
AUTO_MOST_WORKERS = 4  # --workers 0 on a CPU: one process per core, up to this many
# A pool's process that dies is replaced, unless it had been ready for less than this many
# seconds: then the next would most likely die the same way (a model too big for memory).
RESTART_AFTER = 30.0


class WorkerPool:
    """`nmt serve`'s translating processes: copies of `WorkerProcess` over the same models,
    each request sent to the one with the fewest requests in flight.

    On a CPU the search is mostly Python between small operators, so one process keeps about
    one core busy whatever its torch threads: under 32 clients two processes of one thread
    served the demo model 8-43 % faster than one process of two threads (4 alternated rounds),
    and the reference model as fast. `workers=0` picks one per core, at most
    `AUTO_MOST_WORKERS`, on a CPU and one on CUDA. The busy processes share the torch threads
    (`CoreShare`): a lone request still gets them all. `healthy` only while
    every process is.

    A process that dies (killed for memory, say) fails the requests it held; the others take
    the next ones while a new process loads the model in its place (`notify` is told), unless
    it died within `restart_after` s of being ready: then it stays down and GET /health
    answers 503.
    """

    def __init__(
        self,
        spec: ModelSpec,
        workers: int = 0,
        window: float = 0.005,
        max_lines: int = 64,
        notify: Callable[[str], None] | None = None,
        restart_after: float = RESTART_AFTER,
    ):
        self.spec, self.requested = spec, workers
        self.window, self.max_lines = window, max_lines
        self.notify, self.restart_after = notify or (lambda message: None), restart_after
        self.workers: list[WorkerProcess] = []
        self.busy = None  # once started with several: one flag per process, set while it searches
        self._lock = threading.Lock()  # guards the slots while a process is being replaced
        self._closing = False
        self._loading: dict[int, WorkerProcess] = {}  # slot -> its replacement, loading
        self._restarts: list[threading.Thread] = []
        self._spawn: Callable[[int], WorkerProcess] | None = None  # set by start
        self._weights: list[tuple | None] = []  # set by start: see `_weights_stamp`

    @property
    def models(self) -> list[dict]:
        return self.workers[0].models

    @property
    def healthy(self) -> bool:
        return bool(self.workers) and all(w.healthy for w in self.workers)

    @property
    def closed(self) -> bool:
        return all(w.closed for w in self.workers)

    def start(self) -> WorkerPool:
        """Load the first process; then, as many more as wanted, all loading at once."""
        from nmt_cli.device import available_cores

        cores = available_cores()
        count = self.requested or min(AUTO_MOST_WORKERS, cores)
        flags = multiprocessing.get_context("spawn").Array("b", count, lock=False)
        self.busy = flags

        self._spawn = process = partial(self._new_process, flags if count > 1 else None)
        self.workers = [process(0).start()]
        launched: list[WorkerProcess] = []
        try:
            if not self.requested and self.workers[0].device != "cpu":
                count = 1  # one process keeps an accelerator busy
            rest = [process(k) for k in range(1, count)]
            for worker in rest:
                worker.launch()
                launched.append(worker)
            for worker in rest:
                self.workers.append(worker.wait_ready())
            # the weights files as the processes loaded them: one changed since is not loaded
            # into a replacement, which would answer otherwise than the others
            self._weights = _weights_stamp(self.spec)
        except BaseException:
            for worker in launched:
                if worker not in self.workers:
                    worker._abandon()
            self.close(timeout=0)
            raise
        return self

    def _new_process(self, flags, index: int) -> WorkerProcess:
        share = None if flags is None else (flags, index)
        on_exit = partial(self._exited, index)  # called with the process
        return WorkerProcess(self.spec, self.window, self.max_lines, share, on_exit)

    def _exited(self, index: int, dead: WorkerProcess) -> None:
        """Slot `index`'s process `dead` died unasked (called from its reader thread): replace
        it. A process not (or no longer) in its slot is none of the pool's concern."""
        lived = time.monotonic() - dead.ready_at
        with self._lock:
            if self._closing or index >= len(self.workers) or self.workers[index] is not dead:
                return
            thread = None
            # (a lone process has no others: its replacement serves the new weights)
            changed = len(self.workers) > 1 and _weights_stamp(self.spec) != self._weights
            if lived >= self.restart_after and not changed:
                self._loading[index] = replacement = self._spawn(index)
                thread = threading.Thread(target=self._replace, args=(index, replacement))
                thread.daemon = True
                self._restarts = [*(t for t in self._restarts if t.is_alive()), thread]
        if thread is None and changed:
            self.notify(
                f"translating process {index + 1} exited (code {dead.exitcode}); not restarted: "
                "the weights it would load changed since the service started, and it would "
                "answer otherwise than the others: restart nmt serve to serve the new weights"
            )
            return
        if thread is None:
            self.notify(
                f"translating process {index + 1} exited (code {dead.exitcode}) {lived:.0f} s "
                "after it started; not restarted: GET /health answers 503"
            )
            return
        self.notify(f"translating process {index + 1} exited (code {dead.exitcode}); restarting it")
        thread.start()

    def _replace(self, index: int, replacement: WorkerProcess) -> None:
        error = None
        try:
            replacement.start()
        except Exception as exc:  # the model no longer loads, or close() killed it loading
            error = exc
        with self._lock:
            self._loading.pop(index, None)
            closing = self._closing
            if error is None and not closing and replacement.healthy:
                self.workers[index] = replacement
        if closing:
            replacement.close(timeout=0)
        elif self.workers[index] is replacement:
            self.notify(f"translating process {index + 1} restarted")
        else:  # it failed to load, or died before it could take the slot
            reason = error or f"it exited (code {replacement.exitcode}) as it started"
            self.notify(f"translating process {index + 1} could not restart: {reason}")
            replacement.close(timeout=0)

    def submit(self, request: TranslateRequest, api: str = NMT_API) -> Future:
        """To the live process with the fewest requests in flight, the first of equals: a lone
        client keeps one process warm. Sent to equals in turn, one client's requests went
        2-23 % slower than with a single process (reference model, 3 alternated rounds);
        this way as fast (15.5-18.1 against 13.6-19.1 sentences/s)."""
        worker = min(self.workers, key=lambda w: (not w.healthy, w.in_flight))
        return worker.submit(request, api)

    def close(self, timeout: float = 60.0) -> None:
        """Let every process finish what it holds, all at once, for at most `timeout` s in
        all; then make sure they have exited (killed if need be). A second call does
        nothing."""
        with self._lock:
            self._closing = True
            loading = list(self._loading.values())
        for replacement in loading:  # nothing of its own to finish: stopped at once
            replacement._abandon()
        for worker in self.workers:
            worker.stop()
        deadline = time.monotonic() + timeout
        for worker in self.workers:  # past the deadline, each is killed at once
            worker.wait_closed(max(0.0, deadline - time.monotonic()))
        for thread in self._restarts:
            thread.join(max(0.0, deadline - time.monotonic()))


def _weights_stamp(spec: ModelSpec) -> list[tuple | None]:
    """Size, modification time and inode of each model's weights file (None: missing): a new
    training, `--resume` or `nmt average --force` into a served directory changes it."""
    from nmt_cli.checkpoint import MODEL_FILE

    stamps = []
    for model in spec.models:
        try:
            found = (Path(model) / MODEL_FILE).stat()
        except OSError:
            stamps.append(None)
            continue
        stamps.append((found.st_size, found.st_mtime_ns, found.st_ino))
    return stamps


class CoreShare:
    """Torch threads of one of several translating processes, set before each round of search
    steps: the threads it was given (`--threads`, else torch's default) shared evenly by the
    processes busy at that moment, so one process alone at work has them all and busy ones
    never run more threads than that between them (two processes of two threads on 2 cores
    served 4-33 sentences/s under 32 clients, against 64-77 with one thread each). Each
    process writes only its own flag (its parent clears it if the process dies)."""

    def __init__(self, flags, index: int, threads: int, set_threads: Callable[[int], None]):
        self.flags, self.index, self.total = flags, index, threads
        self.set_threads = set_threads
        self.threads = threads

    def __call__(self, working: bool) -> None:
        self.flags[self.index] = 1 if working else 0
        if working:
            wanted = max(1, self.total // max(1, sum(self.flags)))
            if wanted != self.threads:
                self.set_threads(wanted)
                self.threads = wanted


def _work(conn, spec: ModelSpec, window: float, max_lines: int, share=None) -> None:
    """The child: load the model, then serve the parent's requests until it says stop (None)
    or goes away. Ctrl-C and SIGTERM are the parent's to handle: it stops the child once the
    requests in flight are answered."""
    deaf_to_stop_signals()
    from nmt_cli.translator import Translator

    try:
        first, *partners = spec.models
        translator = Translator.load(
            first, spec.device, spec.quantize, spec.threads, partners=partners, bf16=spec.bf16
        )
        pace = None
        if share is not None:
            import torch

            pace = CoreShare(*share, torch.get_num_threads(), torch.set_num_threads)
        local = Local(translator, window, max_lines, pace)
    except Exception as exc:
        conn.send(("error", _portable(exc)))
        return
    lock = threading.Lock()

    def send(message) -> None:
        with lock, contextlib.suppress(OSError):  # OSError: the parent is gone
            conn.send(message)

    send(("ready", (local.models, translator.device.type)))
    relay = threading.Thread(target=_relay, args=(conn, local, send), name="nmt-requests")
    relay.start()
    # The search in the main thread: there torch's CPU operators run on all the threads it was
    # given; run from another thread the same continuous batch went at about the rate of one
    # torch thread (demo model, 32 clients: 176-185 against 102-133 sentences/s, same process).
    local.batcher.run()
    relay.join()
    send((None, None, None))


def _relay(conn, local: Local, send) -> None:
    """The child's requests from the pipe to the batcher, until the parent says stop (None) or
    goes away; then the batcher finishes what it holds and stops."""
    futures: dict[int, Future] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            break
        if message is None:
            break
        ident, request, api = message
        if request is None:  # the parent's client gave up on it
            if (future := futures.pop(ident, None)) is not None:
                future.cancel()
            continue
        futures[ident] = future = local.submit(request, api)
        future.add_done_callback(partial(_answer, send, futures, ident))
    local.batcher.stop()


def _answer(send, futures: dict[int, Future], ident: int, future: Future) -> None:
    futures.pop(ident, None)
    if future.cancelled():
        return
    error = future.exception()
    send((ident, None if error is None else _portable(error), None if error else future.result()))


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives the pipe, else an NmtError with its message."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return NmtError(f"{type(exc).__name__}: {exc}")
    return exc
