"""The checkpoint and model-directory format: safe to load, atomic to write.

A model directory holds:
  config.json          the resolved configuration (model + training)
  model.pt             the best weights, {"format", "version", "config", "weights", "meta"}
  src.model, tgt.model the SentencePiece models (identical files for a joint vocabulary)
  meta.json            training metadata: steps, best dev BLEU, data fingerprint, versions
  shortlist.npz        the lexical shortlist of `translate --shortlist` (nmt_cli.shortlist)
  link_rates.tsv       with guided alignment: how often two words were linked when they met
                       in a training pair (`nmt align --link-prior`); one "source target links
                       meetings" line per linked word pair, tab-separated
  train.jsonl          one JSON object per progress report and validation
  checkpoints/last.pt  everything needed to resume (optimizer, schedule, step, RNG, data position)
  checkpoints/step-N.pt the weights at update N, the last `train --keep-checkpoints` validations
                       (same layout as model.pt), which `nmt average` averages

Every file is written to a temporary sibling, fsynced and renamed, so a kill at any moment
leaves the previous version intact. Loading uses torch's weights-only unpickler: a file that
would run code when unpickled is refused, never executed. `load_model` rebuilds the model from
the configuration stored beside its weights: translation, alignment, evaluation and a resumed
training all load a model directory through it.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import re
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt_cli import atomic
from nmt_cli.errors import ArtifactError, ConfigError
from nmt_cli.progress import counted_epoch

if TYPE_CHECKING:
    from nmt_cli.alignment import LinkRates
    from nmt_cli.config import Config
    from nmt_cli.model.seq2seq import Seq2Seq

FORMAT = "nmt-checkpoint"
VERSION = 1
MODEL_FILE = "model.pt"
LAST_FILE = "checkpoints/last.pt"
KEPT_PATTERN = "checkpoints/step-*.pt"  # kept checkpoints, named by update: step-00001200.pt
CONFIG_FILE = "config.json"
META_FILE = "meta.json"
SRC_SPM = "src.model"
TGT_SPM = "tgt.model"
SHORTLIST_FILE = "shortlist.npz"
LINK_RATES_FILE = "link_rates.tsv"
LOG_FILE = "train.jsonl"
# The top-level names a training run writes into its directory
RUN_FILES = frozenset(
    (MODEL_FILE, LAST_FILE.split("/")[0], CONFIG_FILE, META_FILE, SRC_SPM, TGT_SPM,
     SHORTLIST_FILE, LINK_RATES_FILE, LOG_FILE)
)  # fmt: skip


def save(path: Path, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically (temp file, fsync, rename)."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, **payload}, buffer)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise atomic.write_error(path, exc) from exc
    _remove_stale_temporaries(path)
    atomic.write_bytes(path, buffer.getvalue())


def _remove_stale_temporaries(path: Path) -> None:
    """Delete the temporary files of earlier saves of `path` that were killed mid-write.

    Only one training run writes a model directory at a time (nmt_cli.lock), so every such
    file is a leftover, never another run's write in progress.
    """
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)


def load(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with the weights-only unpickler; any other content is an ArtifactError."""
    if not path.is_file():
        raise ArtifactError(
            f"{path} does not exist: train a model first (nmt train) or check the path"
        )
    try:
        if not _looks_like_a_checkpoint(path):  # text copied over it, say
            raise ArtifactError(
                f"{path} is not a PyTorch checkpoint (neither a zip archive nor a pickle); "
                "retrain or copy the file again"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns of foreign pickle protocols; refused
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        what = (
            f"it would import {found.group(1)}" if found else "it holds objects other than weights"
        )
        raise ArtifactError(
            f"{path} was refused: {what}, and loading it could run code; "
            "only load model files you trust, written by nmt"
        ) from None
    except PermissionError as exc:  # the file is fine; reading it is not allowed
        raise ArtifactError(f"cannot read {path}: {exc.strerror}; check its permissions") from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, IndexError) as exc:
        raise ArtifactError(
            f"{path} is truncated or not an nmt checkpoint ({type(exc).__name__}); "
            "retrain or copy the file again"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ArtifactError(
            f"{path} is not an nmt checkpoint (no '{FORMAT}' marker): pass a model directory "
            "written by `nmt train`"
        )
    if payload.get("version") != VERSION:
        raise ArtifactError(
            f"{path} has checkpoint format version {payload.get('version')}, this nmt reads "
            f"{VERSION}: use the nmt version that wrote it, or retrain"
        )
    return payload


def _looks_like_a_checkpoint(path: Path) -> bool:
    """Whether the file starts as torch.save writes: a zip archive, or a pickle (protocol 2+);
    an empty file is left to torch.load, which names it truncated."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    return not head or head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic.write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path} is missing: the directory is incomplete") from None
    except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError) as exc:
        raise ArtifactError(
            f"{path} is corrupt ({type(exc).__name__}): retrain or restore it"
        ) from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{path} is corrupt: expected a JSON object")
    return data


def check_not_a_model_dir(data_dir: Path) -> None:
    """Refuse a model directory given where a data directory belongs, naming the data
    directory its training read (meta.json's data_dir) when it can."""
    try:
        model = any((data_dir / name).is_file() for name in (MODEL_FILE, LAST_FILE, META_FILE))
        if not model or (data_dir / "prepare.json").is_file():  # data.datadir.MANIFEST
            return
        meta = read_json(data_dir / META_FILE) if (data_dir / META_FILE).is_file() else {}
    except (OSError, ArtifactError):
        return  # not readable as a model directory: the data directory's checks speak
    trained_on = meta.get("data_dir") if isinstance(meta, dict) else None
    hint = f" ({data_dir}'s training read {trained_on})" if isinstance(trained_on, str) else ""
    raise ArtifactError(
        f"{data_dir} is a model directory, not a data directory: give the directory "
        f"`nmt prepare -o` wrote{hint}"
    )


def check_model_dir(model_dir: Path) -> None:
    """Refuse a path that is not a model directory, with a hint on how to make one."""
    if not model_dir.exists():
        raise ArtifactError(
            f"model directory {model_dir} does not exist: train one with `nmt train`"
        )
    if not model_dir.is_dir():
        raise ArtifactError(
            f"{model_dir} is not a directory: pass the model directory from `nmt train -o`"
        )
    try:
        missing = [f for f in (MODEL_FILE, SRC_SPM, TGT_SPM) if not (model_dir / f).is_file()]
        prepared = (model_dir / "prepare.json").is_file()  # data.datadir.MANIFEST
    except OSError as exc:
        raise ArtifactError(f"cannot read {model_dir}: {exc.strerror}") from None
    if missing and prepared:
        raise ArtifactError(
            f"{model_dir} is a data directory (written by `nmt prepare`), not a model: pass "
            "the directory written by `nmt train -o`"
        )
    if missing and missing[0] == MODEL_FILE and (model_dir / LAST_FILE).is_file():
        raise ArtifactError(
            f"{model_dir} holds a training stopped before its first validation (no "
            f"{MODEL_FILE} yet): continue it with `nmt train DATA_DIR -o {model_dir} --resume` "
            "until it has validated once"
        )
    if missing:
        raise ArtifactError(
            f"{model_dir} is not a complete nmt model directory (missing {', '.join(missing)}); "
            "pass the directory written by `nmt train -o`, after at least one validation"
        )


@dataclass
class LoadedModel:
    """A model rebuilt from its directory, in eval mode on `device`, with its configuration."""

    model: Seq2Seq
    config: Config
    device: torch.device
    model_dir: Path
    meta: dict = field(default_factory=dict)  # what training recorded beside the weights


def load_model(
    model_dir: Path,
    device: str = "auto",
    quantize: bool = False,
    threads: int = 0,
    bf16: bool = False,
) -> LoadedModel:
    """The best weights of a model directory on `device`: int8 on CPU when `quantize`, in
    bfloat16 when `bf16` (see `to_bf16`)."""
    from nmt_cli.device import pick_device, set_threads

    model_dir = Path(model_dir)
    check_model_dir(model_dir)
    set_threads(threads)
    path = model_dir / MODEL_FILE
    payload = load(path)
    model, config = build_model(payload, path)
    torch_device = pick_device(device)
    if quantize and bf16:
        raise ConfigError("--quantize (int8) and --bf16 are two precisions: choose one")
    if quantize:
        if torch_device.type != "cpu":
            raise ConfigError("--quantize is for CPU inference; add --device cpu")
        model = quantize_model(model)
    if bf16:
        model = to_bf16(model, torch_device)
    model.to(torch_device).eval()
    meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
    return LoadedModel(model, config, torch_device, model_dir, meta)


def build_model(payload: dict, path: Path) -> tuple[Seq2Seq, Config]:
    """Rebuild the model from the configuration stored inside the checkpoint."""
    from nmt_cli.config import Config
    from nmt_cli.model.seq2seq import Seq2Seq

    try:
        config = Config.from_dict(payload["config"], str(path))
        # On the meta device: no memory until the weights are known to fit the config.
        model = without_init(lambda: Seq2Seq(config.model), torch.device("meta"))
        _check_shapes(model, payload["weights"], path)
        model.load_state_dict(payload["weights"], assign=True)
    except (KeyError, TypeError, RuntimeError, ConfigError) as exc:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ArtifactError(
            f"{path} does not hold a usable nmt model ({reason}): retrain it"
        ) from None
    return model, config


class _SkipInit(torch.overrides.TorchFunctionMode):
    """Within this mode torch.nn.init's initialisers return their tensor untouched.

    Every nn.init function hands itself to the active torch-function mode first, so the
    initialisers are skipped for the modules built inside the mode only: nothing global is
    replaced, and other threads are not affected.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


def without_init(build: Callable[[], Any], device: torch.device | None = None) -> Any:
    """`build()` with random initialisation skipped, on `device` when given: for modules whose
    every value is loaded next. (Random init of meta tensors runs through torch._refs, whose
    first use imports torch._dynamo: about a second of start-up.)"""
    with _SkipInit(), device if device is not None else contextlib.nullcontext():
        return build()


def _check_shapes(model: Seq2Seq, weights: dict, path: Path) -> None:
    """Refuse weights whose names, shapes or number types differ from what the stored config
    builds (float32 everywhere: a float16 tensor would fail inside the first search)."""
    expected = {name: (tuple(t.shape), t.dtype) for name, t in model.state_dict().items()}
    given = {
        name: (tuple(getattr(t, "shape", ())), getattr(t, "dtype", None))
        for name, t in weights.items()
    }
    if expected != given:
        wrong = sorted(set(expected) ^ set(given)) or sorted(
            n for n in expected if expected[n] != given.get(n)
        )
        first = wrong[0]
        if first in expected and first in given and expected[first][0] == given[first][0]:
            kinds = [str(t[1]).removeprefix("torch.") for t in (given[first], expected[first])]
            first += " is {}, where the model holds {}".format(*kinds)  # the shape fits
        raise ArtifactError(
            f"{path}: the weights do not fit the stored configuration (first mismatch: "
            f"{first}); the file is damaged or was edited: retrain or restore it"
        )


def quantize_model(model: Seq2Seq) -> Seq2Seq:
    """int8 dynamic quantization of the linear and recurrent layers (CPU inference only).

    torch maps only the exact nn.GRU class to its quantized GRU, so each `FastGRU` (whose fast
    path serves training only) is first handed over as a plain nn.GRU with the same weights.
    Additive attention's score vector v stays float32: its input is the (rows, S, A) tensor of
    every step, and quantizing that input costs more than the int8 product saves (greedy and
    beam 5 ran 8–10 % faster without it on the Multi30k test set, BLEU within 0.03).
    The model given is left as it is; the quantized one is a copy.
    """
    import copy

    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    from nmt_cli.model.gru import FastGRU

    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is FastGRU:
                setattr(module, name, _plain_gru(child))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notices are not the user's concern
        layers = (torch.nn.Linear, torch.nn.GRU, torch.nn.LSTM)
        spec = {
            name: default_dynamic_qconfig
            for name, module in model.named_modules()
            if isinstance(module, layers) and name != "decoder.attention.v"
        }
        return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)


BF16_ROW_BUCKET = 32  # a bfloat16 model's search steps run on a multiple of this many rows


def to_bf16(model: Seq2Seq, device: torch.device) -> Seq2Seq:
    """The model in bfloat16 for inference: weights, matrix products and recurrent states (8
    significant bits instead of float32's 24). The output layer's logits are turned into float32
    before the log-softmax, and the search's scores stay float32. Attention runs in float32 but
    for its query projection (see nmt_cli/model/attention.py): on the CPU that made beam 5 at
    batch 64 about 1.35× as fast as with all of it in bfloat16. Search steps pad their rows to
    a multiple of `BF16_ROW_BUCKET` (see `padded_rows`), shortlists their columns.

    On CPUs with AMX (Intel Sapphire Rapids and later) a bfloat16 product runs several times as
    fast as a float32 one; without AMX or AVX-512 BF16, torch emulates it, slower than float32,
    and this refuses. Translations may differ from float32's in a few sentences.
    """
    from nmt_cli.device import check_bf16

    check_bf16(device, "--bf16", "drop --bf16")
    model = model.to(torch.bfloat16)
    if model.decoder.attention is not None:
        model.decoder.attention.keep_keys_float32()
    model.decoder.row_bucket = BF16_ROW_BUCKET
    return model


def _plain_gru(gru: torch.nn.GRU) -> torch.nn.GRU:
    """An nn.GRU with the same shape and weights as `gru`."""
    plain = without_init(
        lambda: torch.nn.GRU(
            gru.input_size,
            gru.hidden_size,
            num_layers=gru.num_layers,
            bias=gru.bias,
            batch_first=gru.batch_first,
            dropout=gru.dropout,
            bidirectional=gru.bidirectional,
        )
    )
    plain.load_state_dict(gru.state_dict())
    return plain.to(next(gru.parameters()).device).train(gru.training)


def shortlist_by_default(model_dir: Path, meta: dict) -> bool:
    """Whether `nmt translate` uses the model's shortlist without being told: where meta.json
    records that the shortlist cost no dev BLEU for these weights (the step of `meta`, the
    checkpoint's own), and the shortlist is there."""
    path = model_dir / META_FILE
    if not (model_dir / SHORTLIST_FILE).is_file() or not path.is_file():
        return False  # nothing to choose (meta.json, written by every training, not read)
    try:
        record = read_json(path).get("shortlist")
    except ArtifactError:  # refused as every damaged file of the model is: nothing guessed
        raise ArtifactError(
            f"{path} is damaged (not the JSON object training writes): restore it from a "
            "copy of the model, delete it, or give --no-shortlist (the one choice it holds "
            "for translation)"
        ) from None
    return (
        isinstance(record, dict)
        and record.get("default") is True
        and record.get("step") is not None
        and record.get("step") == meta.get("step")
    )


def forget_shortlist_check(model_dir: Path) -> None:
    """Drop meta.json's record of a shortlist check that no longer holds."""
    path = model_dir / META_FILE
    meta = read_json(path) if path.is_file() else {}
    if "shortlist" in meta:
        write_json(path, {key: value for key, value in meta.items() if key != "shortlist"})


def save_best(model_dir: Path, config: dict, weights: dict, meta: dict[str, Any]) -> None:
    """The best weights so far (`model.pt`, what translation loads) and their `meta.json`."""
    save(model_dir / MODEL_FILE, {"config": config, "weights": weights, "meta": meta})
    write_json(model_dir / META_FILE, meta)


def save_resume(model_dir: Path, state: dict[str, Any], keep: int = 0) -> None:
    """The resume checkpoint: `state` (config, weights, optimizer, progress, scaler, data
    fingerprint) with the random generators' states added; with `keep`, also the weights as a
    kept checkpoint, of which the last `keep` stay (see `save_kept`)."""
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    save(model_dir / LAST_FILE, {**state, "rng": rng})
    if keep:
        progress = state["progress"]
        meta = {
            "step": progress["step"],
            "epoch": counted_epoch(progress["epoch"], progress["batch_index"]),  # as logged
            "tokens_seen": progress.get("tokens_seen"),
            "train_seconds": round(progress.get("train_seconds", 0.0), 1),
            "data_fingerprint": state.get("data_fingerprint"),  # nmt average checks it
        }
        weights = {"config": state["config"], "weights": state["weights"], "meta": meta}
        save_kept(model_dir, progress["step"], weights, keep)


def save_kept(model_dir: Path, step: int, payload: dict[str, Any], keep: int) -> None:
    """Write the checkpoint of update `step`, then remove all but the last `keep`: the new one
    is in place (atomic rename) before any older one goes."""
    save(model_dir / KEPT_PATTERN.replace("*", f"{step:08d}"), payload)
    for old in kept_checkpoints(model_dir)[:-keep]:
        old.unlink(missing_ok=True)


def kept_checkpoints(model_dir: Path) -> list[Path]:
    """The kept checkpoints of a model directory, oldest first (by update)."""
    return sorted(Path(model_dir).glob(KEPT_PATTERN))


def load_resume(
    model_dir: Path,
    device: torch.device,
    fingerprint: str,
    data: Path,
    restore: Callable,
    model_options: dict | None = None,
) -> dict:
    """Read the resume checkpoint, hand it to `restore` (which loads model, optimizer, gradient
    scaler and progress from it), then put the random generators back as they were when it was saved.

    A checkpoint of other data (fingerprint) or of other `model_options` (this run's
    [model] table) is refused, naming the options that differ.
    """
    path = model_dir / LAST_FILE
    payload = load(path, map_location=device)
    if payload.get("data_fingerprint") != fingerprint:
        raise ConfigError(
            f"{model_dir} was trained on other data (fingerprint differs from {data}); resume "
            "with the same data directory or train anew"
        )
    changed = _changed_model_options(payload.get("config", {}).get("model", {}), model_options)
    if changed:
        raise ConfigError(
            f"{model_dir} was trained with other model options ({changed}); resume with the "
            "same ones or train anew"
        )
    try:
        restore(payload)
    except (KeyError, RuntimeError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{path} does not match this configuration ({type(exc).__name__}); resume with "
            "the same options or train anew"
        ) from None
    torch.set_rng_state(payload["rng"]["torch"].cpu())
    if "cuda" in payload["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in payload["rng"]["cuda"]])
    return payload


def _changed_model_options(saved: dict, wanted: dict | None) -> str:
    """The [model] options whose value differs between a checkpoint and this run, as
    "--hidden-size 32 → 64" items (empty when none does, or nothing is known)."""
    if not wanted:
        return ""
    return ", ".join(
        f"--{name.replace('_', '-')} {saved[name]} → {value}"
        for name, value in wanted.items()
        if name in saved and saved[name] != value and name not in _FREE_ON_RESUME
    )


# [model] options that shape no weight: a resumed run may change them (dropout), or derives
# them from [train] (the step guided alignment trains the attention at)
_FREE_ON_RESUME = frozenset({"dropout", "align_shift"})


def copy_tokenizers(src_spm: Path, tgt_spm: Path, model_dir: Path) -> None:
    """Make the model directory self-contained: translation needs only it."""
    for source, name in ((src_spm, SRC_SPM), (tgt_spm, TGT_SPM)):
        atomic.write_bytes(model_dir / name, Path(source).read_bytes())


def remove_training_files(model_dir: Path) -> None:
    """Delete a previous run's weights, checkpoint, metadata and log (`train --force`)."""
    for path in (
        *(model_dir / n for n in (MODEL_FILE, LAST_FILE, META_FILE, LOG_FILE)),
        model_dir / LINK_RATES_FILE,
        *kept_checkpoints(model_dir),
    ):
        path.unlink(missing_ok=True)


_RATES_HEADER = "#pairs"  # the first line: "#pairs<TAB>N", then N word pairs


def save_link_rates(model_dir: Path, rates: LinkRates) -> None:
    """Write the link rates of the training pairs (LINK_RATES_FILE), atomically: a header
    with their number (so a file cut short is told from a whole one), then one per line."""
    counts = list(rates.counts())
    lines = (f"{e}\t{f}\t{linked}\t{met}\n" for e, f, linked, met in counts)
    with atomic.atomic_open(model_dir / LINK_RATES_FILE, "w", encoding="utf-8") as handle:
        handle.write(f"{_RATES_HEADER}\t{len(counts)}\n")
        handle.writelines(lines)


def load_link_rates(model_dir: Path) -> LinkRates | None:
    """The link rates kept with a model (None when it has none: trained without guided
    alignment, or by an older nmt); ArtifactError naming the line when the file is damaged."""
    from nmt_cli.alignment import LINK_PRIOR_SMOOTHING, LinkRates

    path = model_dir / LINK_RATES_FILE
    if not path.is_file():
        return None
    counts, expected = [], None  # expected: the header's number (files before it have none)
    damaged = "the file is damaged: retrain, or delete it to align without the link prior"
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                fields = line.rstrip("\n").split("\t")
                if number == 1 and fields[0] == _RATES_HEADER and len(fields) == 2:
                    if fields[1].isascii() and fields[1].isdigit():
                        expected = int(fields[1])
                        continue
                counts_ok = all(f.isascii() and f.isdigit() for f in fields[2:])
                if len(fields) != 4 or not counts_ok:
                    raise ArtifactError(
                        f"{path} line {number}: expected 'source<TAB>target<TAB>links<TAB>"
                        f"meetings'; {damaged}"
                    )
                counts.append((fields[0], fields[1], int(fields[2]), int(fields[3])))
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path} could not be read ({type(exc).__name__}): {exc}") from None
    if not counts or (expected is not None and len(counts) != expected):
        held = f"{len(counts):,} word pairs" + (
            f" of the {expected:,} it names" if expected else ""
        )
        raise ArtifactError(f"{path} holds {held}: {damaged}")
    return LinkRates.from_counts(counts, LINK_PRIOR_SMOOTHING)


def check_reverse_of(model_dir: Path, reverse_dir: Path) -> None:
    """Refuse a reverse model that is the forward model itself, or was trained on the same data
    directory (so in the same direction), or whose recorded languages are not the forward
    model's swapped (nothing to compare when either meta.json lacks them)."""
    langs, fingerprints = [], []
    for directory in (model_dir, reverse_dir):
        try:
            data = read_json(directory / META_FILE)
        except (ArtifactError, OSError):  # meta.json is optional here: loading checks the rest
            data = {}
        langs.append(tuple(str(data.get(key) or "") for key in ("src_lang", "tgt_lang")))
        fingerprints.append(data.get("data_fingerprint"))
    (src, tgt), (rev_src, rev_tgt) = langs
    if model_dir.resolve() == reverse_dir.resolve() or (
        fingerprints[0] and fingerprints[0] == fingerprints[1]
    ):
        raise ConfigError(
            f"--reverse-model {reverse_dir} translates the same way as -m {model_dir} (the same "
            "model, or one trained on the same data directory): give a model trained the other "
            "way, on data prepared with --src and --tgt swapped"
        )

    def base(code: str) -> str:  # "zh-CN" and "ZH" are "zh"
        return code.replace("_", "-").split("-")[0].lower()

    same = (base(rev_src), base(rev_tgt)) == (base(tgt), base(src))
    if all((src, tgt, rev_src, rev_tgt)) and not same:
        raise ConfigError(
            f"--reverse-model {reverse_dir} translates {rev_src}→{rev_tgt}, but the reverse of "
            f"{model_dir} ({src}→{tgt}) is {tgt}→{src}: give a model trained the other way"
        )


def check_trained_on(model_dir: Path, fingerprint: str, data: Path) -> None:
    """Refuse a data directory other than the one the model was trained on (by fingerprint)."""
    if not model_dir.is_dir():
        raise ArtifactError(f"{model_dir} is not a directory: give the model directory")
    meta = model_dir / META_FILE
    if not meta.exists():
        return  # no record to compare with: the vocabulary check at load time still applies
    trained_on = read_json(meta).get("data_fingerprint")
    if trained_on and trained_on != fingerprint:
        raise ArtifactError(
            f"{model_dir} was trained on other data than {data} (fingerprints differ); "
            "give the data directory it was trained on"
        )
