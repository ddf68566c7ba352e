"""nn.LSTM, nn.GRU and their cells on tpu: ATen runs them on an
accelerator through the fused cells (_thnn_fused_lstm_cell,
_thnn_fused_gru_cell) and their backwards, which the engine lowers.
Forward values, gradients of the input and of every parameter, and second
derivatives, against the CPU's unfused path."""
import copy

import pytest
import torch

import torchtpu  # noqa: F401
from optest import DEV


def _run(mod, x, dev, dtype):
    m = copy.deepcopy(mod).to(dev).to(dtype)
    xi = x.to(dev).to(dtype).detach().requires_grad_()
    out = m(xi)
    y = out[0] if isinstance(out, tuple) else out
    weight = torch.linspace(-1, 1, y.numel(), device=dev).view(y.shape)
    loss = (y.float() * weight).sum()
    if isinstance(out, tuple) and isinstance(out[1], tuple):   # LSTM: (h_n, c_n)
        loss = loss + out[1][1].float().sum()
    elif isinstance(out, tuple):                               # GRU: h_n
        loss = loss + out[1].float().sum()
    loss.backward()
    return [y.detach(), xi.grad] + [p.grad for p in m.parameters()]


CASES = {
    "lstm": lambda: (torch.nn.LSTM(4, 5, num_layers=2, batch_first=True), (3, 6, 4)),
    "lstm_no_bias": lambda: (torch.nn.LSTM(4, 5, bias=False), (6, 3, 4)),
    "lstm_bidirectional_proj": lambda: (torch.nn.LSTM(4, 6, bidirectional=True, proj_size=3), (6, 3, 4)),
    "gru": lambda: (torch.nn.GRU(4, 5, num_layers=2, batch_first=True), (3, 6, 4)),
    "gru_no_bias_bidirectional": lambda: (torch.nn.GRU(4, 5, bias=False, bidirectional=True), (6, 3, 4)),
    "lstm_cell": lambda: (torch.nn.LSTMCell(4, 5), (3, 4)),
    "gru_cell": lambda: (torch.nn.GRUCell(4, 5), (3, 4)),
    "gru_cell_no_bias": lambda: (torch.nn.GRUCell(4, 5, bias=False), (3, 4)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_layers_match_cpu(case, dtype):
    torch.manual_seed(0)
    mod, shape = CASES[case]()
    x = torch.randn(shape)
    want = _run(mod, x, "cpu", dtype)
    got = _run(mod, x, DEV, dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=4e-2, atol=4e-2)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu().float(), w.float(), **tol)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cells_second_derivatives(cell):
    torch.manual_seed(1)
    mod = (torch.nn.LSTMCell if cell == "lstm" else torch.nn.GRUCell)(3, 2).double().to(DEV)
    x = torch.randn(2, 3, dtype=torch.float64, device=DEV, requires_grad=True)

    def f(x):
        out = mod(x)
        return out[0] + out[1] if isinstance(out, tuple) else out

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def test_fused_cells_check_their_sizes():
    """The fused cells called directly refuse gates of the wrong size
    (RuntimeError, as their meta kernel and CUDA kernels do)."""
    g = torch.randn(3, 15, device=DEV)
    h = torch.randn(3, 5, device=DEV)
    assert torch.ops.aten._thnn_fused_gru_cell(g, g, h)[0].shape == (3, 5)
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(g, g, torch.randn(3, 4, device=DEV))
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(g, torch.randn(3, 12, device=DEV), h)
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, h)     # 15 gates are not 4 x 5
