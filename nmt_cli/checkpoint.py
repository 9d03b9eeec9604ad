"""The checkpoint and model-directory format: safe to load, atomic to write.

A model directory holds:
  config.json          the resolved configuration (model + training)
  model.pt             the best weights, {"format", "version", "config", "weights", "meta"}
  src.model, tgt.model the SentencePiece models (identical files for a joint vocabulary)
  meta.json            training metadata: steps, best dev BLEU, data fingerprint, versions
  shortlist.npz        the lexical shortlist of `translate --shortlist` (nmt_cli.shortlist)
  train.jsonl          one JSON object per progress report and validation
  checkpoints/last.pt  everything needed to resume (optimizer, schedule, step, RNG, data position)

Every file is written to a temporary sibling, fsynced and renamed, so a kill at any moment
leaves the previous version intact. Loading uses torch's weights-only unpickler: a file that
would run code when unpickled is refused, never executed.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from nmt_cli import atomic
from nmt_cli.errors import ArtifactError

FORMAT = "nmt-checkpoint"
VERSION = 1
MODEL_FILE = "model.pt"
LAST_FILE = "checkpoints/last.pt"
CONFIG_FILE = "config.json"
META_FILE = "meta.json"
SRC_SPM = "src.model"
TGT_SPM = "tgt.model"


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
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # torch warns about foreign pickle protocols; we refuse them
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
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
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
    missing = [f for f in (MODEL_FILE, SRC_SPM, TGT_SPM) if not (model_dir / f).is_file()]
    if missing:
        raise ArtifactError(
            f"{model_dir} is not a complete nmt model directory (missing {', '.join(missing)}); "
            "pass the directory written by `nmt train -o`, after at least one validation"
        )
