"""The output layer's loss computed chunk by chunk (`output_loss`) against the plain way."""

import pytest
import torch
import torch.nn.functional as F

from nmt_cli import loss as loss_module
from nmt_cli.loss import output_loss


def plain(layer: torch.nn.Linear, x: torch.Tensor, targets: torch.Tensor, smoothing: float):
    logits = layer(x).float()
    return F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction="sum")


def gradients(layer: torch.nn.Linear, x: torch.Tensor) -> list[torch.Tensor]:
    found = [x.grad, layer.weight.grad] + ([] if layer.bias is None else [layer.bias.grad])
    x.grad = None
    layer.zero_grad(set_to_none=True)
    return found


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_and_gradients_equal_cross_entropy_over_several_chunks(bias, smoothing, monkeypatch):
    monkeypatch.setattr(loss_module, "_CHUNK_FLOATS", 7 * 50)  # 7 rows per chunk: 5 chunks
    torch.manual_seed(0)
    layer = torch.nn.Linear(12, 50, bias=bias)
    x = torch.randn(31, 12, requires_grad=True)
    targets = torch.randint(0, 50, (31,))

    (0.3 * plain(layer, x, targets, smoothing)).backward()
    expected = gradients(layer, x)
    loss, nll = output_loss(layer, x, targets, smoothing)
    (0.3 * loss).backward()
    got = gradients(layer, x)

    assert loss.item() == pytest.approx(plain(layer, x, targets, smoothing).item(), rel=1e-5)
    assert nll.item() == pytest.approx(plain(layer, x, targets, 0.0).item(), rel=1e-5)
    assert not nll.requires_grad
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-6)
    with torch.no_grad():  # no gradient wanted: the same sums, nothing kept for backward
        again, again_nll = output_loss(layer, x, targets, smoothing)
    assert again.item() == pytest.approx(loss.item(), rel=1e-6)
    assert again_nll.item() == pytest.approx(nll.item(), rel=1e-6)


@pytest.mark.parametrize("rows", [40, 37])  # 37: the products pad them to 40 (`low_mm`)
def test_bfloat16_autocast_matches_autocasts_own_backward(monkeypatch, rows):
    monkeypatch.setattr(loss_module, "_CHUNK_FLOATS", 9 * 64)  # several chunks
    torch.manual_seed(1)
    layer = torch.nn.Linear(16, 64)
    x = torch.randn(rows, 16, requires_grad=True)
    targets = torch.randint(0, 64, (rows,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reference = plain(layer, x, targets, 0.1)
    reference.backward()
    expected = gradients(layer, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = output_loss(layer, x, targets, 0.1)
    loss.backward()
    got = gradients(layer, x)

    assert loss.item() == pytest.approx(reference.item(), rel=1e-4)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype == torch.float32
        torch.testing.assert_close(have, want, rtol=0.02, atol=0.02 * float(want.abs().max()))


def test_float64_model_keeps_float64():
    torch.manual_seed(2)
    layer = torch.nn.Linear(8, 30).double()
    x = torch.randn(20, 8, dtype=torch.double, requires_grad=True)
    targets = torch.randint(0, 30, (20,))
    loss, _ = output_loss(layer, x, targets, 0.1)
    loss.backward()
    assert loss.dtype == x.grad.dtype == layer.weight.grad.dtype == torch.float64
    logits = layer(x.detach())
    reference = F.cross_entropy(logits, targets, label_smoothing=0.1, reduction="sum")
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)


def test_float16_autocast_keeps_the_small_probabilities_of_the_weight_gradient():
    """Under float16 the logit gradients (mostly tiny probabilities) must not be stored in
    float16: unscaled, those below its range would vanish from the weight gradient."""
    torch.manual_seed(3)
    layer = torch.nn.Linear(16, 512, bias=False)
    x = (30 * torch.randn(64, 16)).requires_grad_()  # peaked: most probabilities far below 1e-8
    targets = torch.randint(0, 512, (64,))
    with torch.autocast("cpu", dtype=torch.float16):
        loss, _ = output_loss(layer, x, targets, 0.0)
    loss.backward()
    got = layer.weight.grad.clone()
    layer.zero_grad()
    plain(layer, x, targets, 0.0).backward()  # float32 throughout
    want = layer.weight.grad
    rows = want.norm(dim=1) > 0
    error = (got - want).norm(dim=1)[rows] / want.norm(dim=1)[rows]
    assert float(error.max()) < 0.1
