"""The C++ glue leaves PyTorch's own dispatcher entries alone: importing
torchtpu does not change what aten's Meta kernels do for other users of the
process. The engine's meta shapes for ops PyTorch ships none for (geqrf,
the margin-loss backwards, histogram, unique's .out overloads, ...) are a
registry the engine kernel calls, not Meta kernels."""
import json
import os
import subprocess
import sys
import textwrap

import torch

import torchtpu  # noqa: F401

# Each op the engine has a meta shape for, called on meta tensors. The
# outcome: the result's dtypes, sizes, strides and devices, or the
# exception's type and the first line of its message.
PROBE = textwrap.dedent('''
    import json, sys, torch
    aten = torch.ops.aten
    L = torch.long

    def m(*sizes, dtype=torch.float32):
        return torch.empty(*sizes, device="meta", dtype=dtype)

    CALLS = {
        "geqrf": lambda: aten.geqrf(m(3, 3)),
        "geqrf 1-d": lambda: aten.geqrf(m(3)),
        "multi_margin_loss_backward": lambda: aten.multi_margin_loss_backward(
            m(4, 3), m(4, 3), m(4, dtype=L), 1, 1.0, None, 1),
        "multilabel_margin_loss_backward": lambda: aten.multilabel_margin_loss_backward(
            m(()), m(4, 3), m(4, 3, dtype=L), 1, m(4, 3)),
        "_cummax_helper": lambda: aten._cummax_helper(m(4, 3), m(4, 3), m(4, 3, dtype=L), 1),
        "_cummin_helper": lambda: aten._cummin_helper(m(4, 3), m(4, 3), m(4, 3, dtype=L), 5),
        "_logcumsumexp": lambda: aten._logcumsumexp(m(4, 3), 1),
        "_logcumsumexp.out": lambda: aten._logcumsumexp.out(m(4, 3), 1, out=m(0)),
        "_ctc_loss_backward": lambda: aten._ctc_loss_backward(
            m(()), m(5, 2, 4), m(2, 3, dtype=L), [5, 5], [3, 3], m(2), m(2, 5, 7), 0, False),
        "linalg_lstsq.out": lambda: aten.linalg_lstsq.out(
            m(4, 3), m(4, 2), None, driver="gelsd", solution=m(0), residuals=m(0),
            rank=m(0, dtype=L), singular_values=m(0)),
        "fractional_max_pool3d_backward": lambda: aten.fractional_max_pool3d_backward(
            m(1, 2, 2, 2, 2), m(1, 4, 4, 4, 4), [2, 2, 2], [2, 2, 2], m(1, 2, 2, 2, 2, dtype=L)),
        "fractional_max_pool3d_backward.grad_input":
            lambda: aten.fractional_max_pool3d_backward.grad_input(
                m(1, 2, 2, 2, 2), m(1, 4, 4, 4, 4), [2, 2, 2], [2, 2, 2],
                m(1, 2, 2, 2, 2, dtype=L), grad_input=m(0)),
        "_unique2.out": lambda: aten._unique2.out(
            m(5), True, True, True, out0=m(5), out1=m(5, dtype=L), out2=m(5, dtype=L)),
        "unique_consecutive.out": lambda: aten.unique_consecutive.out(
            m(5), True, True, None, out0=m(5), out1=m(5, dtype=L), out2=m(5, dtype=L)),
        "unique_dim.out": lambda: aten.unique_dim.out(
            m(5, 2), 0, True, True, True, out0=m(5, 2), out1=m(5, dtype=L), out2=m(5, dtype=L)),
        "unique_dim_consecutive.out": lambda: aten.unique_dim_consecutive.out(
            m(5, 2), 0, True, True, out0=m(5, 2), out1=m(5, dtype=L), out2=m(5, dtype=L)),
        "histogram.bin_ct": lambda: aten.histogram.bin_ct(m(10), 4),
        "histogram.bin_ct_out": lambda: aten.histogram.bin_ct_out(
            m(10), 4, hist=m(0), bin_edges=m(0)),
        "histogram.bins_tensor": lambda: aten.histogram.bins_tensor(m(10), m(5)),
        "histogram.bins_tensor_out": lambda: aten.histogram.bins_tensor_out(
            m(10), m(5), hist=m(0), bin_edges=m(0)),
        "_histogramdd_bin_edges": lambda: aten._histogramdd_bin_edges(m(10, 2), [3, 4]),
        "_histogramdd_from_bin_cts": lambda: aten._histogramdd_from_bin_cts(m(10, 2), [3, 4]),
        "_histogramdd_from_bin_tensors": lambda: aten._histogramdd_from_bin_tensors(
            m(10, 2), [m(4), m(5)]),
        "multi_margin_loss": lambda: aten.multi_margin_loss(m(3), m((), dtype=L), 1, 1.0, None, 0),
    }

    def describe(r):
        if isinstance(r, torch.Tensor):
            return [str(r.dtype), list(r.shape), list(r.stride()), str(r.device)]
        if isinstance(r, (tuple, list)):
            return [describe(x) for x in r]
        return repr(r)

    def outcomes():
        out = {}
        for name, call in CALLS.items():
            try:
                out[name] = ["result", describe(call())]
            except Exception as e:
                out[name] = ["error", type(e).__name__, str(e).split(chr(10))[0]]
        return out

    if __name__ == "__main__":
        print(json.dumps(outcomes()))
''')


def test_meta_kernels_unchanged_by_import():
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    proc = subprocess.run([sys.executable, "-c", PROBE + "\nassert 'torchtpu' not in sys.modules\n"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    reference = json.loads(proc.stdout)
    scope = {"__name__": "probe"}
    exec(PROBE, scope)
    here = json.loads(json.dumps(scope["outcomes"]()))
    assert set(here) == set(reference)
    for name in reference:
        assert here[name] == reference[name], name


def test_engine_still_sizes_ops_without_meta_kernels():
    # The same ops on tpu tensors: the engine kernel's registry sizes them.
    x = torch.tensor([[2.0, 1.0], [1.0, 3.0]], device="tpu")
    a, tau = torch.geqrf(x)
    ra, rtau = torch.geqrf(x.cpu())
    assert a.shape == ra.shape and tau.shape == rtau.shape
    torch.testing.assert_close(a.cpu(), ra)
    torch.testing.assert_close(tau.cpu(), rtau)
    h, edges = torch.histogram(torch.arange(10.0, device="tpu"), 4)
    rh, redges = torch.histogram(torch.arange(10.0), 4)
    torch.testing.assert_close(h.cpu(), rh)
    torch.testing.assert_close(edges.cpu(), redges)
    # multi_margin_loss of a 1-D input, reduction='none': 0-d, as on the CPU.
    loss = torch.nn.functional.multi_margin_loss(
        torch.tensor([0.1, 0.8, 0.3], device="tpu"), torch.tensor([1], device="tpu"),
        reduction="none")
    assert loss.dim() == 0
