"""Checkpoint averaging: the element-wise mean of the last checkpoints a training run kept.

`train --keep-checkpoints N` keeps the weights of its last N validations (and of its final
save; `checkpoint.kept_checkpoints`); their mean is often a little better than any one of them, for the price of a file copy.
The result is a model directory like the one `nmt train` writes, so every command takes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nmt_cli import atomic, checkpoint
from nmt_cli.errors import ArtifactError, ConfigError, InputError


@dataclass(frozen=True)
class Averaged:
    """What `average_checkpoints` wrote: the output directory and the checkpoints averaged."""

    out_dir: Path
    sources: list[Path]


def _averaged(directory: Path) -> bool:
    """Whether nmt average wrote `directory`: its meta.json names the averaged checkpoints."""
    meta_file = directory / checkpoint.META_FILE
    try:
        return meta_file.is_file() and bool(checkpoint.read_json(meta_file).get("averaged"))
    except ArtifactError:  # a damaged meta.json says nothing
        return False


def average_checkpoints(model_dir: Path, last: int, out_dir: Path, force: bool = False) -> Averaged:
    """Average the weights of `model_dir`'s last `last` kept checkpoints into `out_dir`, a new
    directory (or, with `force`, one nmt average wrote: replaced once the new one is whole)."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    checkpoint.check_model_dir(model_dir)
    if last < 1:
        raise ConfigError(f"--last must be ≥ 1, got {last}")
    if out_dir.resolve() == model_dir.resolve():
        raise ConfigError(f"-o {out_dir} is the model directory itself: give a new directory")
    if model_dir.resolve() in out_dir.resolve().parents:
        raise ConfigError(f"-o {out_dir} lies inside {model_dir}: give a directory outside it")
    kept = checkpoint.kept_checkpoints(model_dir)
    if len(kept) < last:
        config_file = model_dir / checkpoint.CONFIG_FILE
        config = checkpoint.read_json(config_file) if config_file.is_file() else {}
        asked = config.get("train", {}).get("keep_checkpoints", 0)
        fix = f"train it with --keep-checkpoints {last} (or more) to keep them"
        if _averaged(model_dir):
            fix = "it was written by nmt average: average the model directory it came from"
        elif asked >= last:  # kept as asked: it stopped before validating that often
            fix = (
                f"it was trained with --keep-checkpoints {asked} but stopped after fewer "
                f"validations: lower --last, or train on (--resume with a larger budget)"
            )
        raise ArtifactError(
            f"{model_dir} keeps {len(kept)} checkpoint{'s' * (len(kept) != 1)}, fewer than "
            f"--last {last}: {fix}"
        )
    sources = kept[-last:]
    payloads = [checkpoint.load(path) for path in sources]
    _check_one_run(payloads, sources)
    _check_of_this_directory(model_dir, payloads[-1], sources[-1])
    weights = mean_weights([p["weights"] for p in payloads], sources)
    config = payloads[-1]["config"]
    checkpoint.build_model({"config": config, "weights": weights}, sources[-1])  # fits its config
    meta_file = model_dir / checkpoint.META_FILE
    meta = checkpoint.read_json(meta_file) if meta_file.is_file() else {}
    meta["averaged"] = [path.name for path in sources]
    # the source's scores are those of its best checkpoint: these weights were never validated
    meta.update(best_dev_bleu=None, best_step=None)
    # nor were they checked with the shortlist: translate uses it only when told, until
    # `nmt shortlist DATA_DIR OUT_DIR` checks them
    meta.pop("shortlist", None)
    last = payloads[-1].get("meta", {})  # progress at the last averaged checkpoint
    for key in ("step", "epoch", "tokens_seen", "train_seconds"):
        meta[key] = last.get(key)  # None where an older checkpoint did not keep it
    model_there = (out_dir / checkpoint.MODEL_FILE).is_file() and not out_dir.is_symlink()
    if force and model_there and not _averaged(out_dir):  # (staged_directory refuses others)
        raise InputError(
            f"{out_dir} was not written by nmt average (its meta.json names no averaged "
            "checkpoints), so --force does not replace it: choose another output directory"
        )
    with atomic.staged_directory(out_dir, force, [model_dir], checkpoint.MODEL_FILE) as stage:
        checkpoint.write_json(stage / checkpoint.CONFIG_FILE, config)
        kept = (
            checkpoint.SRC_SPM,
            checkpoint.TGT_SPM,
            checkpoint.SHORTLIST_FILE,
            checkpoint.LINK_RATES_FILE,
        )
        for name in kept:
            if (model_dir / name).is_file():
                atomic.write_bytes(stage / name, (model_dir / name).read_bytes())
        checkpoint.save_best(stage, config, weights, meta)
    return Averaged(out_dir, sources)


def _check_one_run(payloads: list[dict], paths: list[Path]) -> None:
    """Refuse checkpoints that cannot come from one training run: another architecture or
    dropout, or other data (where recorded). Copies of one checkpoint pass: their mean is it."""
    first = payloads[0]
    for path, payload in zip(paths, payloads, strict=True):
        theirs = payload.get("config", {}).get("model") or {}
        ours = first.get("config", {}).get("model") or {}
        if theirs != ours:
            differ = sorted(k for k in {**theirs, **ours} if theirs.get(k) != ours.get(k))
            raise ArtifactError(
                f"{path} has other model settings ({', '.join(differ)}) than {paths[0]}: average "
                "checkpoints of one training run"
            )
        meta, first_meta = payload.get("meta", {}), first.get("meta", {})
        data, first_data = meta.get("data_fingerprint"), first_meta.get("data_fingerprint")
        if data and first_data and data != first_data:
            raise ArtifactError(
                f"{path} was trained on other data than {paths[0]}: average checkpoints of one "
                "training run"
            )


def _check_of_this_directory(model_dir: Path, payload: dict, path: Path) -> None:
    """Refuse checkpoints of another model than `model_dir`'s own (a file copied in by hand):
    the averaged weights get this directory's tokenizers, which must be theirs. Only what ties
    the weights to the tokenizers is compared, the vocabulary sizes and the data (where both
    record them): a resumed run may change other settings (dropout) between its checkpoints."""
    config_file, meta_file = model_dir / checkpoint.CONFIG_FILE, model_dir / checkpoint.META_FILE
    ours = checkpoint.read_json(config_file).get("model") if config_file.is_file() else None
    theirs = payload.get("config", {}).get("model")
    sizes = ("src_vocab_size", "tgt_vocab_size")
    differ = [
        k for k in sizes if ours and theirs and k in ours and k in theirs and ours[k] != theirs[k]
    ]
    if differ:
        raise ArtifactError(
            f"{path} has other vocabulary sizes ({', '.join(differ)}) than {config_file}: it "
            f"is not a checkpoint of this model; remove it from {path.parent}"
        )
    data = payload.get("meta", {}).get("data_fingerprint")
    own = checkpoint.read_json(meta_file).get("data_fingerprint") if meta_file.is_file() else None
    if data and own and data != own:
        raise ArtifactError(
            f"{path} was trained on other data than {model_dir}: it is not a checkpoint of this "
            f"model; remove it from {path.parent}"
        )


def mean_weights(states: list[dict[str, torch.Tensor]], paths: list[Path]) -> dict:
    """The element-wise mean of state dicts of one architecture (summed in float64, so the mean
    of identical weights is those weights exactly); weights tied in the first stay tied."""
    first = states[0]
    for path, state in zip(paths[1:], states[1:], strict=True):
        for name in sorted(set(first) | set(state)):
            shapes = [tuple(s[name].shape) if name in s else None for s in (first, state)]
            if shapes[0] != shapes[1]:
                raise ArtifactError(
                    f"{path}: {name} has shape {shapes[1]} but {paths[0]} has {shapes[0]}; "
                    "average checkpoints of one architecture (one training run)"
                )
    means: dict[tuple, torch.Tensor] = {}  # by storage: a tied weight is averaged once
    averaged = {}
    for name, tensor in first.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
        if key not in means:
            if tensor.is_floating_point():
                total = sum(state[name].double() for state in states)
                means[key] = (total / len(states)).to(tensor.dtype)
            else:  # counters and the like: the latest value
                means[key] = states[-1][name]
        averaged[name] = means[key]
    return averaged
