"""`--bf16`: bfloat16 weights and products for search, float32 scores and attention; refused
where the CPU would only emulate bfloat16."""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np
import pytest
import torch
from cli_runner import WORDS, invoke
from test_quantize import probs_after_three_steps

from nmt_cli import device
from nmt_cli.checkpoint import to_bf16
from nmt_cli.config import ModelConfig
from nmt_cli.decoding import _shortlist_columns
from nmt_cli.errors import ConfigError
from nmt_cli.model.decoder import padded_rows
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import BOS_ID, EOS_ID
from nmt_cli.translator import Translator

NATIVE = device.native_bf16()
needs_bf16 = pytest.mark.skipif(not NATIVE, reason="this CPU has neither AMX nor AVX-512 BF16")
LINES = ["apple river", "", "green bird sun", "stone"]


@needs_bf16
def test_a_bf16_model_scores_like_the_float_one_in_float32(toy_model_dir):
    exact = Translator.load(toy_model_dir, device="cpu")
    half = Translator.load(toy_model_dir, device="cpu", bf16=True)
    float32 = {name for name, p in half.model.named_parameters() if p.dtype == torch.float32}
    assert float32 == {"decoder.attention.key_proj.weight"}  # general attention's keys
    assert {p.dtype for p in exact.model.parameters()} == {torch.float32}  # not converted
    probs = []
    for translator in (exact, half):
        step_probs, dtypes = probs_after_three_steps(translator.model)
        assert dtypes == {torch.float32}  # the log-probs search sums, the attention it keeps
        probs.append(step_probs)
    assert (probs[0] - probs[1]).abs().max() < 0.05
    assert not torch.equal(probs[0], probs[1])  # the products did run in bfloat16


@needs_bf16
def test_additive_attention_of_a_bf16_model_runs_in_float32_but_its_query_projection():
    config = ModelConfig(
        src_vocab_size=30, tgt_vocab_size=30, emb_size=8, hidden_size=4, attention="additive"
    )
    model = to_bf16(Seq2Seq(config).eval(), torch.device("cpu"))
    float32 = {name for name, p in model.named_parameters() if p.dtype == torch.float32}
    assert float32 == {"decoder.attention.key_proj.weight", "decoder.attention.v.weight"}
    with torch.inference_mode():
        state = model.encode(torch.tensor([[5, 9, 3], [6, 3, 0]]), torch.tensor([3, 2]))
        log_probs, (decoder_state, memory), weights = model.step_log_probs(
            torch.full((2,), BOS_ID), state
        )
    assert memory.keys.dtype == memory.states.dtype == torch.float32
    assert weights.dtype == log_probs.dtype == torch.float32
    assert decoder_state.hidden.dtype == torch.bfloat16  # the recurrence stays bfloat16


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("cpu", torch.float32),
        pytest.param(
            "cuda",
            torch.bfloat16,
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        ),
    ],
)
def test_under_mixed_precision_additive_attention_runs_in_float32_on_a_cpu_only(where, expected):
    """Under CUDA autocast (nmt train's AMP) the (B, T, S, A) tanh tensor follows the keys'
    half precision. Under CPU autocast (nmt train --bf16) attention runs in float32: oneDNN
    would compile a kernel for every (B, T, S) of its batched products."""
    config = ModelConfig(
        src_vocab_size=30, tgt_vocab_size=30, emb_size=8, hidden_size=4, attention="additive"
    )
    model, seen = Seq2Seq(config).eval().to(where), []
    model.decoder.attention.v.register_forward_pre_hook(lambda _, args: seen.append(args[0].dtype))
    src, lengths = torch.tensor([[5, 9, 3], [6, 3, 0]], device=where), torch.tensor([3, 2])
    with torch.no_grad(), torch.autocast(where, dtype=torch.bfloat16):
        state = model.encode(src, lengths)
        model.step_log_probs(torch.full((2,), BOS_ID, device=where), state)
    assert seen == [expected]


@needs_bf16
def test_bf16_translate_json_and_align_keep_every_line(toy_model_dir):
    text = "\n".join(LINES) + "\n"
    plain = invoke("translate", "-m", toy_model_dir, "--bf16", input=text)
    assert plain.exit_code == 0, plain.output
    out = plain.stdout.split("\n")
    assert len(out) - 1 == len(LINES) and out[1] == "" and out[0] and out[2] and out[3]
    records = invoke("translate", "-m", toy_model_dir, "--bf16", "--json", input=text)
    assert records.exit_code == 0, records.output
    rows = [
        row for line in records.stdout.splitlines() for row in json.loads(line)["attention"] or []
    ]
    assert len(rows) > len(LINES)  # a row per target piece of the three lines with text
    assert all(abs(sum(row) - 1) < 1e-3 for row in rows)  # float32 weights: rows sum to 1
    aligned = invoke("translate", "-m", toy_model_dir, "--bf16", "--align", "--shortlist",
                     input=text)  # fmt: skip
    assert aligned.exit_code == 0, aligned.output
    assert all(" ||| " in line for line in aligned.stdout.splitlines() if line.split(" ||| ")[0])


def test_bf16_is_refused_where_the_cpu_would_emulate_it(toy_model_dir, monkeypatch):
    monkeypatch.setattr(device, "native_bf16", lambda: False)
    result = invoke("translate", "-m", toy_model_dir, "--bf16", "--device", "cpu", input="a\n")
    assert result.exit_code == 2
    assert "--bf16 needs a CPU with AMX or AVX-512 BF16" in result.stderr
    assert "Traceback" not in result.output


def test_bf16_and_quantize_are_refused_together(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, "--bf16", "--quantize", input="a\n")
    assert result.exit_code == 2
    assert "choose one" in result.stderr and "Traceback" not in result.output


def test_padded_rows_gives_each_row_what_it_gives_alone():
    seen = []

    def row_sums(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append(x.size(0))
        return x.sum(1) + y[:, 0]

    x, y = torch.randn(37, 4), torch.randn(37, 2)
    padded = padded_rows(row_sums, 32, x, y)
    assert seen == [64]  # the rows were padded to the bucket
    assert torch.equal(padded, row_sums(x, y))  # and cut back: the same 37 results
    assert seen[-1] == 37
    assert torch.equal(padded_rows(row_sums, 0, x, y), padded)  # bucket 0: as they are
    assert seen[-1] == 37
    assert torch.equal(padded_rows(row_sums, 32, x[:5], y[:5]), padded[:5])
    assert seen[-1] == 5  # no more rows than the bucket: as they are
    padded_rows(row_sums, 32, x[:33], y[:33])
    assert seen[-1] == 64


def test_a_bf16_shortlist_is_padded_with_closed_columns():
    class Lists:  # one sentence may produce 3, 7 and 8; the other 5
        def ids_for(self, sources):
            return np.array([3, 7, 8] if len(sources[0]) == 2 else [5])

    sources = [np.array([4, 4]), np.array([6])]
    ids, allowed = _shortlist_columns(Lists(), sources)
    assert ids.tolist() == sorted({3, 5, 7, 8, BOS_ID, EOS_ID})
    wide, wide_allowed = _shortlist_columns(Lists(), sources, multiple=8, vocab=30)
    assert len(wide) == 8 and list(wide) == sorted(wide) and set(ids) <= set(wide)
    kept = np.searchsorted(wide, ids)
    assert torch.equal(wide_allowed[:, kept], allowed)  # the same columns open as before
    assert wide_allowed.sum() == allowed.sum()  # and no other
    tight = _shortlist_columns(Lists(), sources, multiple=16, vocab=9)[0]
    assert tight.tolist() == list(range(9))  # no more ids than the vocabulary has


@needs_bf16
@pytest.mark.parametrize("shortlist", [[], ["--shortlist"]], ids=["full", "shortlist"])
def test_bf16_search_on_padded_rows_keeps_every_line_and_its_alignment(toy_model_dir, shortlist):
    lines = [" ".join(WORDS[i % 7 : i % 7 + 2 + i % 5]) for i in range(12)]  # 60 rows at beam 5
    text = "\n".join(lines) + "\n"
    exact = invoke("translate", "-m", toy_model_dir, "--align", *shortlist, input=text)
    half = invoke("translate", "-m", toy_model_dir, "--bf16", "--align", *shortlist, input=text)
    assert exact.exit_code == 0 and half.exit_code == 0, half.output
    rows = [line.split(" ||| ") for line in half.stdout.splitlines()]
    assert len(rows) == len(lines) and all(len(row) == 2 and row[0] for row in rows)
    pairs = zip(exact.stdout.splitlines(), half.stdout.splitlines(), strict=True)
    same = sum(a == b for a, b in pairs)
    assert same >= len(lines) - 2  # bfloat16 may change a few translations, not the rest


def test_fast_gru_under_cpu_autocast_computes_like_float32_and_keeps_float32_gradients():
    """`nmt train --bf16`: the GRU's products run in bfloat16 (results and gradients close to
    float32's, not equal), its states stay float32."""
    from nmt_cli.model.gru import FastGRU

    torch.manual_seed(0)
    gru = FastGRU(6, 5, bidirectional=True, batch_first=True)
    x = torch.randn(3, 7, 6, requires_grad=True)
    lengths = torch.tensor([7, 4, 2])
    mask = (torch.arange(7)[None, :] < lengths[:, None]).unsqueeze(-1)
    runs = []
    for low in (False, True):
        gru.zero_grad()
        x.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            out, final = gru.forward_padded(x, lengths)
            assert out.dtype == final.dtype == torch.float32
            ((out * mask).pow(2).sum() + final.sum()).backward()
        grads = [p.grad for p in gru.parameters()] + [x.grad]
        runs.append((out * mask, final, grads))
    (out_a, fin_a, grads_a), (out_b, fin_b, grads_b) = runs
    assert not torch.equal(out_a, out_b)  # the products did run in bfloat16
    assert torch.allclose(out_a, out_b, atol=0.03) and torch.allclose(fin_a, fin_b, atol=0.03)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert (a - b).norm() <= 0.05 * a.norm()


@needs_bf16
def test_training_with_bf16_trains_in_bfloat16_and_saves_a_float32_model(toy_data_dir, tmp_path):
    saved = {}
    for name, flags in (("float32", []), ("bf16", ["--bf16"])):
        out = tmp_path / name
        result = invoke(
            "train", toy_data_dir, "-o", out, "--emb-size", "16", "--hidden-size", "16",
            "--max-steps", "8", "--valid-every", "4", "--batch-tokens", "300", "--threads", "1",
            "--attention", "additive", *flags,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        saved[name] = torch.load(out / "model.pt", map_location="cpu", weights_only=True)
    assert saved["bf16"]["config"]["train"]["bf16"] is True
    weights = saved["bf16"]["weights"]
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float32}
    same_seed = saved["float32"]["weights"]  # the same seed and batches: only precision differs
    assert any(not torch.equal(weights[k], same_seed[k]) for k in weights)
    close = [(weights[k] - same_seed[k]).abs().max() < 0.05 for k in weights]
    assert all(close)  # 8 updates apart by rounding only
    translated = invoke("translate", "-m", tmp_path / "bf16", input="apple river\n")
    assert translated.exit_code == 0, translated.output


def test_bf16_training_is_refused_where_the_cpu_would_emulate_it(
    toy_data_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(device, "native_bf16", lambda: False)
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--bf16", "--device", "cpu")
    assert result.exit_code == 2
    assert "AMX or AVX-512 BF16" in result.output and "(--no-bf16)" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists()  # refused before the model directory was made


@pytest.mark.parametrize(
    ("capability", "hip", "native"),
    [((7, 5), None, False), ((8, 0), None, True), ((7, 0), "6.0", True)],
)
def test_a_gpu_counts_as_bfloat16_hardware_from_ampere_or_on_rocm(
    monkeypatch, capability, hip, native
):
    """torch.cuda.is_bf16_supported() says True on a T4 (7.5), where bfloat16 is emulated; amp
    then picks float16 there, and --bf16 is refused."""
    from nmt_cli.updates import autocast_for

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.version, "hip", hip)
    gpu = torch.device("cuda", 0)
    assert device.gpu_bf16(gpu) is native
    if native:
        device.check_bf16(gpu, "--bf16", "drop --bf16")
    else:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
        with pytest.raises(ConfigError, match="Tesla T4 has no bfloat16 hardware"):
            device.check_bf16(gpu, "--bf16", "drop --bf16")
        monkeypatch.setattr(torch.amp, "GradScaler", lambda *args: "scaler")
        with warnings.catch_warnings():  # no CUDA here: torch warns that it disables autocast
            warnings.simplefilter("ignore")
            context, scaler = autocast_for(gpu, amp=True)
        assert context.fast_dtype == torch.float16 and scaler == "scaler"


def test_product_rows_are_few_sizes_close_above_the_rows():
    sizes = [device.product_rows(rows) for rows in range(1, 4097)]
    for rows, size in enumerate(sizes, start=1):
        assert rows <= size <= max(rows + 7, rows * 1.125)
        assert device.product_rows(size) == size  # a padded count stays as it is
    assert sizes[:64] == [8 * (1 + i // 8) for i in range(64)]  # multiples of 8 up to 64
    assert len(set(sizes)) == 8 + 6 * 8  # then eight per octave: 64–128, …, 2048–4096


def test_low_precision_products_pad_their_rows_and_equal_the_plain_ones():
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(shape, generator=gen) for shape in ((37, 12), (12, 9), (37, 5)))
    for dtype in (torch.float32, torch.bfloat16):
        x, w, y = a.to(dtype), b.to(dtype), c.to(dtype)
        assert device.low_mm(x, w).shape == (37, 9)
        assert torch.allclose(device.low_mm(x, w).float(), (x @ w).float(), atol=1e-2)
        assert torch.allclose(device.low_tmm(x, y).float(), (x.t() @ y).float(), atol=1e-2)
    seen = []
    with _ProductShapes(seen):
        device.low_mm(a, b)
        device.low_tmm(a, c)
    assert seen == [(40, 12, 9), (12, 40, 5)]  # 37 rows padded to 40


class _ProductShapes(torch.utils._python_dispatch.TorchDispatchMode):
    """Records (M, K, N) of every matrix product torch runs (batched ones as (B·M, K, N))."""

    PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}

    def __init__(self, seen: list, dtype: torch.dtype | None = None):
        super().__init__()
        self.seen, self.dtype = seen, dtype

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.PRODUCTS:
            a, b = args[-2:]
            if self.dtype is None or a.dtype == self.dtype:
                self.seen.append((a.shape[:-1].numel(), a.shape[-1], b.shape[-1]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("attention", ["additive", "general"])
@pytest.mark.parametrize("input_feed", [True, False])  # the step loop, or all steps at once
def test_bf16_training_products_take_few_row_counts(attention, input_feed):
    """Under `nmt train --bf16` on a CPU, oneDNN compiles and keeps a kernel for every product
    shape; the batches' row counts (B, B·S, B·T) are padded to `product_rows` sizes, and the
    attention's batched products, (B, T, S) apiece, run in float32."""
    from nmt_cli.batching import collate
    from nmt_cli.loss import Objective

    config = ModelConfig(
        src_vocab_size=50, tgt_vocab_size=50, emb_size=24, hidden_size=40, dropout=0.1,
        input_feed=input_feed, attention=attention,
    )  # fmt: skip
    model = Seq2Seq(config).train()
    objective = Objective(model, label_smoothing=0.1)
    gen = torch.Generator().manual_seed(0)
    seen = []
    for batch_size, length in ((13, 11), (21, 6)):  # B·S = 143 and 126, B = 13 and 21
        ids = [torch.randint(4, 50, (length,), generator=gen).numpy() for _ in range(batch_size)]
        batch = collate(ids, [pair[2:] for pair in ids])
        with _ProductShapes(seen, torch.bfloat16):
            with torch.autocast("cpu", dtype=torch.bfloat16):  # backward after it, as training's
                loss, _, _ = objective(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out)
            loss.backward()
    model_sizes = {24, 40, 80, 50, 120, 160, 1}  # E, H, encoder's 2H, V, 3H, 2H + 2H; v
    rows = {size for shape in seen for size in shape} - model_sizes
    assert seen and rows  # bfloat16 products ran, over the batches' rows
    assert all(device.product_rows(size) == size for size in rows), sorted(rows)


def test_bf16_output_loss_pads_only_its_last_chunk_of_rows(monkeypatch):
    from nmt_cli import loss as loss_module

    monkeypatch.setattr(loss_module, "_CHUNK_FLOATS", 9 * 64)  # chunks of 9 rows, 8 under bf16
    layer = torch.nn.Linear(16, 64)
    x = torch.randn(37, 16, requires_grad=True)
    seen = []
    with _ProductShapes(seen, torch.bfloat16), torch.autocast("cpu", dtype=torch.bfloat16):
        loss_module.output_loss(layer, x, torch.randint(0, 64, (37,)), 0.1)
    logits_rows = [m for m, k, n in seen if (k, n) == (16, 64)]
    assert logits_rows == [8, 8, 8, 8, 8]  # 37 rows: four whole chunks, the last 5 padded to 8


@needs_bf16
def test_bf16_training_validates_in_float32_on_a_cpu(toy_data_dir, tmp_path):
    """Dev scores of `nmt train --bf16` on a CPU are those of the float32 model, as `nmt
    translate` runs it (and search under bfloat16 autocast would cost oneDNN a kernel for
    every row count of its steps)."""
    from nmt_cli.config import Config, TrainConfig
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.trainer import Trainer
    from nmt_cli.validation import Validator

    data = load_data_dir(toy_data_dir)
    model = ModelConfig(
        emb_size=8, hidden_size=8, src_vocab_size=data.src_vocab_size,
        tgt_vocab_size=data.tgt_vocab_size,
    )  # fmt: skip
    config = Config(model=model, train=TrainConfig(threads=1, bf16=True, device="cpu"))
    torch.manual_seed(0)
    trainer = Trainer(config, data, tmp_path / "model")
    got = trainer.validate.dev_loss(trainer.model)
    float32 = Validator(data, config.train, torch.device("cpu"), contextlib.nullcontext())
    low = torch.autocast("cpu", dtype=torch.bfloat16)
    assert got == float32.dev_loss(trainer.model)
    assert got != Validator(data, config.train, torch.device("cpu"), low).dev_loss(trainer.model)
