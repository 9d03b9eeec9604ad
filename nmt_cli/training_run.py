"""One training run end to end: resolve the config, set up the model directory, train, stop cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Any

from nmt_cli import checkpoint
from nmt_cli.config import Config, resolve
from nmt_cli.errors import ArtifactError, ConfigError, Interrupted, NmtError
from nmt_cli.lock import check_not_in_use
from nmt_cli.model.decoder import input_step_offset
from nmt_cli.progress import Event, OnEvent, ignore


def _with_vocab(config: Config, src_vocab: int, tgt_vocab: int, joint: bool) -> Config:
    """The config with the data's vocabulary sizes; embeddings shared only where `joint`."""
    import dataclasses

    # guided: the attention learns to align where the word is read; else at the step itself
    shift = input_step_offset(config.model.decoder_style) if config.train.guided_alignment else 0
    model = dataclasses.replace(
        config.model,
        src_vocab_size=src_vocab,
        tgt_vocab_size=tgt_vocab,
        align_shift=shift,
        # two SentencePiece models (prepare --separate) give one id to unrelated pieces, even
        # where their sizes are equal: one embedding for both would tie them
        share_embeddings=config.model.share_embeddings and joint,
    )
    train = config.train
    if train.alignments:  # saved absolute, so that --resume from another directory finds it
        train = dataclasses.replace(train, alignments=str(Path(train.alignments).absolute()))
    return dataclasses.replace(config, model=model, train=train)


def _prepare_model_dir(output: Path, resume: bool, force: bool) -> None:
    check_model_dir(output, resume, force)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a parent that is a file, a folder of /proc, no permission, ...
        raise ConfigError(
            f"cannot make the model directory {output}: {exc.strerror}; choose another --output"
        ) from None


def check_model_dir(output: Path, resume: bool, force: bool) -> None:
    """Refuse an OUTPUT the run cannot write as asked (nothing is written): `nmt train --nproc`
    calls it before it starts processes or probes, then every rank again."""
    if resume and force:
        raise ConfigError(
            "--resume continues the run in OUTPUT and --force starts it afresh: give one of them"
        )
    if output.exists() and not output.is_dir():
        raise ConfigError(f"{output} exists and is not a directory; choose another --output")
    if os.environ.get("RANK", "0") == "0":  # the other ranks: their rank 0 may hold it
        check_not_in_use(output)  # first: a run still starting has written little yet
    has_model = (output / checkpoint.LAST_FILE).exists() or (
        output / checkpoint.MODEL_FILE
    ).exists()
    if output.is_dir() and not has_model:
        # another folder (a project, a home directory): a run would write its config.json,
        # meta.json, ... among files it does not own, and --force would delete those names
        foreign = sorted(
            entry.name
            for entry in output.iterdir()
            if entry.name not in checkpoint.RUN_FILES and not entry.name.startswith(".")
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (
                f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            )
            raise ConfigError(
                f"{output} holds other files and no model ({shown}): choose a new or empty "
                "directory for -o"
            )
    if resume and not (output / checkpoint.LAST_FILE).exists():
        meta_file = output / checkpoint.META_FILE
        if meta_file.is_file() and checkpoint.read_json(meta_file).get("averaged"):
            raise ConfigError(
                f"{output} was written by `nmt average`: it keeps no training state to resume; "
                "train into a new -o (or into this one without --resume and with --force, which "
                "replaces the average)"
            )
        raise ConfigError(
            f"nothing to resume in {output}: {checkpoint.LAST_FILE} is missing; drop --resume"
        )
    if has_model and not resume and not force:
        hint = "add --resume to continue it or --force to start afresh"
        if not (output / checkpoint.LAST_FILE).exists():
            hint = f"add --force to start afresh (it has no {checkpoint.LAST_FILE} to resume)"
        raise ConfigError(f"{output} already holds a model: {hint}")


class _StoppedAtOnce(KeyboardInterrupt):
    """A second SIGINT, while the trainer saves after the first."""


class _StopOnSignal:
    """SIGINT/SIGTERM ask the trainer to save and stop; a second SIGINT stops at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise _StoppedAtOnce
        self.event.set()

    def __enter__(self) -> threading.Event:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self.event

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run_training(
    data_dir: Path,
    output: Path,
    config_file: Path | None,
    overrides: dict[str, dict[str, Any]],
    resume: bool = False,
    force: bool = False,
    on_event: OnEvent = ignore,
):
    """Train a model into `output`; returns the final Progress."""
    from nmt_cli.device import pick_device
    from nmt_cli.distributed import from_environment, shutdown

    data, config = checked_settings(data_dir, output, config_file, overrides, resume)
    created = not output.exists()
    _prepare_model_dir(output, resume, force)  # every rank checks; creating it is idempotent
    ranks = from_environment(pick_device(config.train.device).type == "cuda")
    if ranks.main and config.train.alignments and not config.train.guided_alignment:
        on_event(Event("warning", {"message": (
            f"--alignments {config.train.alignments} is not used: it trains the attention only "
            "with --guided-alignment above 0 (e.g. --guided-alignment 1)"
        )}))  # fmt: skip
    if ranks.main and config.train.align_unit != "word" and not config.train.guided_alignment:
        on_event(Event("warning", {"message": (
            f"--align-unit {config.train.align_unit} is not used: it is the unit of the links "
            "the attention is trained towards, with --guided-alignment above 0"
        )}))  # fmt: skip
    try:
        return _train_ranked(data, output, config, ranks, resume, force, on_event)
    except _StoppedAtOnce:  # nothing saved for it (a first Ctrl-C before the trainer's
        # handlers are set is a plain KeyboardInterrupt: "interrupted")
        raise Interrupted(_stopped_at_once(output)) from None
    except NmtError:  # refused before anything was written (a bad --alignments file, say):
        if created and ranks.main:  # the directory this run made goes too, if still empty
            with contextlib.suppress(OSError):
                output.rmdir()
        raise
    finally:
        shutdown()


def checked_settings(
    data_dir: Path,
    output: Path,
    config_file: Path | None,
    overrides: dict[str, dict[str, Any]],
    resume: bool = False,
):
    """The data directory and the configuration of a training run, every setting checked
    against them; nothing is written. (`nmt train --nproc N` calls it before it starts
    the processes, so that a bad setting ends in one line, not in one per process.)"""
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.device import check_bf16, pick_device

    checkpoint.check_not_a_model_dir(Path(data_dir))
    data = load_data_dir(data_dir)
    if Path(output).resolve() == Path(data_dir).resolve():
        raise ConfigError(
            f"-o {output} is the data directory: give the model its own directory (e.g. "
            f"{Path(output).name}-model)"
        )
    saved = None
    if resume and (output / checkpoint.CONFIG_FILE).exists():
        saved = checkpoint.read_json(output / checkpoint.CONFIG_FILE)
    base = saved if config_file is None else None  # resume with the saved config
    config = resolve(config_file, overrides, base=base)
    shared = data.joint  # a resumed model keeps the embeddings it was built with:
    if saved is not None:
        shared = bool(saved.get("model", {}).get("share_embeddings", True))
    config = _with_vocab(
        config, Tokenizer(data.src_spm).vocab_size, Tokenizer(data.tgt_spm).vocab_size, shared
    )
    if not resume:  # (a model saved before these checks resumes as it was)
        _check_input_feed(config.model)
        _check_decoder_style(config.model)
        _check_schedule(config.train)
    _ = data.dev_references  # a damaged dev reference fails now (read once, kept for BLEU)
    try:
        device = pick_device(config.train.device)  # an absent GPU is refused here
    except ConfigError:
        origin = config_file if base is None else output / checkpoint.CONFIG_FILE  # (resumed)
        if origin is None or overrides.get("train", {}).get("device") is not None:
            raise
        raise ConfigError(
            f'{origin} asks for device "{config.train.device}", and no CUDA device is '
            f"available: give --device cpu{'' if base else ' (or set device there)'}"
        ) from None
    t = config.train
    if t.guided_alignment and t.alignments and not Path(t.alignments).is_file():
        raise ConfigError(
            f"--alignments {t.alignments} is not a file; give the Pharaoh links of the training "
            "pairs, or drop --alignments to have them computed"
        )
    if config.train.bf16:
        from nmt_cli.updates import BF16_FIX, BF16_FLAG

        check_bf16(device, BF16_FLAG, BF16_FIX)
    return data, config


def _check_input_feed(model) -> None:
    """Input feeding exists only for a Luong decoder with attention: refuse it elsewhere,
    rather than train without it under a config that says it is on."""
    if not model.input_feed or (model.decoder_style == "luong" and model.attention != "none"):
        return
    if model.attention == "none":
        why = "--attention none has no attentional vector to feed"
    else:
        why = "a bahdanau decoder reads the context before its RNN step instead"
    raise ConfigError(
        f"--input-feed feeds a Luong decoder's attentional vector into its next step, and {why}: "
        "add --no-input-feed (or input_feed = false in the --config file)"
    )


def _check_schedule(train) -> None:
    """inverse_sqrt decays from the end of the warm-up: without one it would be constant."""
    if train.schedule == "inverse_sqrt" and not train.warmup_steps:
        raise ConfigError(
            'schedule = "inverse_sqrt" decays from the end of the warm-up, and warmup_steps is '
            '0: set warmup_steps ≥ 1 (e.g. 4000), or schedule = "constant", in [train] of the '
            "--config file"
        )


def _check_decoder_style(model) -> None:
    """A decoder style says where the attention sits in a decoder step: refuse a bahdanau
    style without attention, rather than train the plain decoder under a config that says
    otherwise."""
    if model.decoder_style == "bahdanau" and model.attention == "none":
        raise ConfigError(
            "--decoder-style bahdanau places the attention before the RNN step, and --attention "
            "none has none: drop --decoder-style (or decoder_style in the --config file), or "
            "choose dot, general or additive attention"
        )


def _stopped_at_once(output: Path) -> str:
    """What a second Ctrl-C left: the last state saved before it, if any, and how to go on."""
    last = output / checkpoint.LAST_FILE
    if last.exists():
        return (
            f"training stopped at once (a second Ctrl-C) without saving; {last} holds the last "
            "state saved before it: continue from there with --resume"
        )
    return (
        "training stopped at once (a second Ctrl-C) before any state was saved: start it again "
        "(with --force if the directory is refused)"
    )


def _train_ranked(data, output: Path, config: Config, ranks, resume: bool, force: bool, on_event):
    from nmt_cli.distributed import barrier
    from nmt_cli.lock import directory_lock

    barrier(ranks)
    lock = directory_lock(output) if ranks.main else contextlib.nullcontext()
    with lock:
        progress, interrupted = _train_with_signals(
            data, output, config, ranks, resume, force, on_event
        )
        if ranks.main and not interrupted:  # the model is saved: the check cannot undo that
            _check_shortlist_after_training(data, output, config.train.device, on_event)
        return progress


def _train_with_signals(data, output: Path, config: Config, ranks, resume, force, on_event):
    """Train under the signal handlers; returns the progress and whether a signal stopped it."""
    from nmt_cli.shortlist import shortlist_of
    from nmt_cli.trainer import Trainer

    with _StopOnSignal() as stop:
        if force and not resume and ranks.main:
            checkpoint.remove_training_files(output)
        trainer = Trainer(config, data, output, on_event=on_event, stop=stop, ranks=ranks)
        if resume:
            trainer.resume()  # refuses other data or options before anything is written
        if ranks.main:
            checkpoint.write_json(output / checkpoint.CONFIG_FILE, config.to_dict())
            checkpoint.copy_tokenizers(data.src_spm, data.tgt_spm, output)
            on_event(
                Event(
                    "config",
                    {
                        "config": config.to_dict(),
                        "device": str(trainer.device),
                        "parameters": sum(p.numel() for p in trainer.model.parameters()),
                        "train_pairs": len(trainer.train_rows),
                        "long_pairs": len(trainer.train_src.lengths) - len(trainer.train_rows),
                        "max_len": config.train.max_len,
                        "output": str(output),
                    },
                )
            )
        shortlist = output / checkpoint.SHORTLIST_FILE
        if ranks.main and not (resume and shortlist.exists()):
            shortlist_of(data).save(shortlist)
        if ranks.main and trainer.guides is not None and trainer.guides.rates is not None:
            checkpoint.save_link_rates(output, trainer.guides.rates)
        progress = trainer.train()
        return progress, stop.is_set()


def _check_shortlist_after_training(data, output: Path, device: str, on_event: OnEvent) -> None:
    """`record_shortlist_check` once training has saved its model: what stops or fails the check
    (Ctrl-C, a shortlist.npz replaced by hand, too little memory) is a warning, not a failure."""
    try:
        record = record_shortlist_check(data, output, device, on_event)
    except (NmtError, RuntimeError, KeyboardInterrupt) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        on_event(Event("warning", {"message": (
            f"the shortlist was not checked ({why}); the model is saved, and translate uses "
            f"the shortlist only with --shortlist until `nmt shortlist DATA_DIR {output}` checks it"
        )}))  # fmt: skip
        return
    on_event(shortlist_event(record))


def record_shortlist_check(
    data, model_dir: Path, device: str = "auto", on_event: OnEvent = ignore
) -> dict | None:
    """Translate the dev split (see `validation.check_shortlist`) with the model's best
    weights, with and without its shortlist, and record in meta.json whether `nmt translate`
    should use the shortlist by default (see `validation.ShortlistCheck`); None without a dev
    split."""
    from nmt_cli.shortlist import Shortlist
    from nmt_cli.validation import SHORTLIST_SENTENCES, check_shortlist

    meta_file = model_dir / checkpoint.META_FILE  # (a copy of the checkpoint's own meta)
    if not data.has_split("dev"):  # nothing to check on: an earlier check may be of other data
        checkpoint.forget_shortlist_check(model_dir)
        return None
    sentences = min(len(data.ids("dev", "src")), SHORTLIST_SENTENCES)
    on_event(Event("shortlist", {"checking": sentences}))  # tens of seconds on a CPU
    loaded = checkpoint.load_model(model_dir, device)
    path = model_dir / checkpoint.SHORTLIST_FILE
    config = loaded.config
    meta = checkpoint.read_json(meta_file) if meta_file.is_file() else loaded.meta
    try:
        shortlist = Shortlist.load(path).check(
            config.model.src_vocab_size, config.model.tgt_vocab_size, path
        )
    except ArtifactError:  # an earlier check was of another shortlist: it no longer holds
        checkpoint.forget_shortlist_check(model_dir)
        raise
    found = check_shortlist(loaded.model, data, config.train, loaded.device, shortlist)
    assert found is not None, "the dev split was there"
    record = {**found.record(), "step": loaded.meta.get("step")}
    checkpoint.write_json(meta_file, {**meta, "shortlist": record})
    return record


def shortlist_event(record: dict | None) -> Event:
    """The progress event that says what the shortlist check found."""
    return Event("shortlist", record or {})


def write_shortlist(
    data_dir: Path, model_dir: Path, on_event: OnEvent = ignore
) -> tuple[Path, dict | None]:
    """(Re)write the lexical shortlist of a model from the data directory it was trained on,
    and check it again on the dev split (see `record_shortlist_check`)."""
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.lock import directory_lock
    from nmt_cli.shortlist import shortlist_of

    checkpoint.check_model_dir(model_dir)  # never a shortlist.npz into another directory
    data = load_data_dir(data_dir)
    checkpoint.check_trained_on(model_dir, data.fingerprint, data.path)
    with directory_lock(model_dir):  # not while a training writes its meta.json
        path = model_dir / checkpoint.SHORTLIST_FILE
        shortlist_of(data).save(path)
        return path, record_shortlist_check(data, model_dir, on_event=on_event)
