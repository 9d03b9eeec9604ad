"""`nmt serve -m MODEL_DIR`: translation over HTTP (FastAPI + uvicorn), batched across requests."""

from __future__ import annotations

import contextlib
import socket
import sys
from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary
from nmt_cli.cli.options import (
    beam_option,
    bf16_option,
    check_device_options,
    device_option,
    in_panel,
    model_option,
    quantize_option,
    threads_option,
)

_limit = in_panel("Limits and batching")


@command_boundary
def serve(
    model: list[Path] = model_option(repeat=True),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to listen on, IPv4 or IPv6; 0.0.0.0, :: or '' listen on every interface "
        "(unprotected: the service has no authentication).",
    ),
    port: int = typer.Option(5000, "--port", help="Port to listen on (0: a free one, printed)."),
    beam: int = beam_option(help="Beam size of requests that name none (and of OpenNMT-py's)."),
    max_lines: int = _limit(64, "Lines per request at most (more: 413).", "--max-lines"),
    max_chars: int = _limit(10_000, "Characters per request at most (more: 413).", "--max-chars"),
    max_beam: int = _limit(16, "Largest beam a request may ask for.", "--max-beam"),
    max_batch: int = _limit(64, "Lines translated together at most.", "--max-batch"),
    window_ms: float = _limit(
        5.0,
        "When idle, start once no request came for this many ms (8 times that after the first).",
        "--window-ms",
    ),
    quantize: bool = quantize_option(),
    bf16: bool = bf16_option(),
    workers: int = typer.Option(
        0,
        "--workers",
        help="Translating processes, each with the model (0: one per CPU core, at most 4, "
        "sharing --threads; one on CUDA).",
    ),
    threads: int = threads_option(),
    device: str = device_option(),
) -> None:
    """Serve translations over HTTP: POST /translate, OpenNMT-py's POST /translator/translate, a page at /."""
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.errors import ConfigError, Interrupted

    try:
        import uvicorn

        from nmt_cli.serve.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"nmt serve needs FastAPI and uvicorn ({exc.name} is missing): "
            f"{sys.executable} -m pip install fastapi uvicorn httptools"
        ) from None
    from nmt_cli.serve.requests import Limits
    from nmt_cli.serve.worker import ModelSpec, WorkerPool

    _check_serve_options(beam, max_beam, max_lines, max_chars, max_batch, window_ms, workers)
    check_device_options(device, threads)
    host = host.removeprefix("[").removesuffix("]")  # [::1], as URLs write IPv6 addresses
    listening = _listen(host, port)  # held until uvicorn serves on it: no one takes it
    port = listening.getsockname()[1]  # --port 0: the free port the system picked
    spec = ModelSpec(tuple(model), device, quantize, threads, bf16)

    def say(message: str) -> None:  # also from the pool's threads, when a process is replaced
        stderr_console().print(f"nmt: {message}", markup=False)

    _warn_when_rates_damaged(model[0], say)
    if _every_interface(listening):
        say(
            f"warning: --host {host or '(all)'} listens on every network interface: whoever "
            "reaches this machine can use the service (it has no authentication)"
        )

    try:
        translator = WorkerPool(spec, workers, window_ms / 1000, max_batch, notify=say).start()
    except BaseException:
        listening.close()
        raise
    try:  # from here on, whatever happens, the translating processes are stopped
        limits = Limits(max_lines=max_lines, max_chars=max_chars, max_beam=max_beam, beam=beam)
        app = create_app(translator, limits)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        shown = host or ("::" if listening.family == socket.AF_INET6 else "0.0.0.0")
        address = f"[{shown}]" if ":" in shown else shown  # IPv6, as URLs write it
        serving = (
            f"serving {' + '.join(map(str, model))} on http://{address}:{port}/ (Ctrl-C to stop)"
        )
        _start_listening(listening, host, port)
        with _quiet_when_forced(server):
            _serve_until_signalled(server, lambda: say(serving), [listening])
    finally:
        listening.close()
        drained = translator.closed  # the app closed it after the requests in flight
        translator.close(timeout=0)  # else (a second Ctrl-C, or an error): stopped now
    if not drained:
        raise Interrupted(
            "nmt serve stopped at once (a second Ctrl-C): requests in flight were answered 503, "
            "without their translations"
        )
    say("stopped, every request answered")


def _warn_when_rates_damaged(model_dir: Path, say) -> None:
    """The translating processes draw links without a damaged link_rates.tsv: say so once."""
    from nmt_cli.checkpoint import load_link_rates
    from nmt_cli.errors import ArtifactError

    try:
        load_link_rates(model_dir)
    except ArtifactError as exc:
        say(f"warning: {exc}; word links come from the attention alone")


@contextlib.contextmanager
def _quiet_when_forced(server):
    """Once a second Ctrl-C forces uvicorn to stop, it cancels the requests in flight and the
    app's shutdown, and logs each as an error with a traceback; the command says what happened
    in one line instead, so those records are dropped (and only those: before, errors show)."""
    import logging

    def keep(_record: logging.LogRecord) -> bool:
        return not server.force_exit

    log = logging.getLogger("uvicorn.error")
    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def _serve_until_signalled(server, announce, sockets=None) -> None:
    """Run the server; SIGINT and SIGTERM make it drain (no new connections, requests in
    flight answered) and return, so the command exits 0.

    uvicorn handles both signals while it runs and afterwards raises them again for the
    handlers that were there before it. Those set here only ask the server to stop: one that
    comes before uvicorn has set its own makes it stop as soon as it has started, instead of
    being lost, and the ones raised again afterwards do nothing more. `announce` runs once
    they are set, so a Ctrl-C after it always drains.
    """
    import signal

    def stop(*_) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        announce()
        server.run(sockets=sockets)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _every_interface(listening: socket.socket) -> bool:
    """Whether the socket is bound to every interface, however --host spelled it ("0",
    "::0", "0.0.0.0", "")."""
    import ipaddress

    return ipaddress.ip_address(listening.getsockname()[0].split("%")[0]).is_unspecified


def _start_listening(listening: socket.socket, host: str, port: int) -> None:
    """Listen on the socket `_listen` bound, once the model is loaded: before "serving" is
    said. Two sockets bound to one port (both with SO_REUSEADDR) cannot both listen, so a
    second `nmt serve` started on the port while the first loaded is refused here."""
    from nmt_cli.errors import ConfigError

    try:
        listening.listen(2048)  # uvicorn's backlog; it listens again, to no effect
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port or --host"
        ) from None


def _check_serve_options(
    beam, max_beam, max_lines, max_chars, max_batch, window_ms, workers
) -> None:
    from nmt_cli.errors import ConfigError

    if max_beam < 1:
        raise ConfigError(f"--max-beam must be ≥ 1, got {max_beam}")
    if not 1 <= beam <= max_beam:
        raise ConfigError(f"--beam must be from 1 to --max-beam ({max_beam}), got {beam}")
    for name, value in (
        ("--max-lines", max_lines),
        ("--max-chars", max_chars),
        ("--max-batch", max_batch),
    ):
        if value < 1:
            raise ConfigError(f"{name} must be ≥ 1, got {value}")
    if not 0 <= window_ms <= 1000:
        raise ConfigError(f"--window-ms must be from 0 to 1000, got {window_ms}")
    if not 0 <= workers <= 64:
        raise ConfigError(f"--workers must be from 0 (automatic) to 64, got {workers}")


def _listen(host: str, port: int):
    """The socket of the service, bound before the model is loaded, so that an address that
    cannot be listened on is refused at once (for port 0, the system picks a free port). It
    listens only once the model is loaded (`_start_listening`): until then a client is
    refused, not left hanging, and another server bound to the port meanwhile (as this one
    is, with SO_REUSEADDR) is found out there. An IPv6 address binds IPv6; "" and "::" bind every
    interface, IPv4 and IPv6 where the system can."""
    from nmt_cli.errors import ConfigError

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {port}")
    every = host in ("", "::")
    try:
        if every and socket.has_dualstack_ipv6():
            family, address = socket.AF_INET6, ("::", port)
        elif every:
            family, address = socket.AF_INET, ("0.0.0.0", port)
        else:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, address = found[0][0], found[0][4]
        # IPPROTO_TCP named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
        # connections of a socket that says so; with proto 0 each answer waited ~40 ms
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if every else 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        return sock
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port or --host"
        ) from None
