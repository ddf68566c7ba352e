"""torch.compile over growing tensors (docs/design/shapes.md): a graph whose
input is stored padded compiles one program per bucket, and a graph that
grows a tensor inside itself stays correct when it runs again at sizes it
has seen (a graph over padded storages is recorded, never replayed with
the sizes of its capture)."""
import torch

import torchtpu
from torchtpu import debug

DEV = "tpu"


def compiles():
    torch.tpu.synchronize()
    return debug.metrics()["compiles"]


def attend(q, kv):
    return ((q @ kv.transpose(-1, -2)) * 0.25).softmax(-1) @ kv


def test_graph_over_a_grown_cache_compiles_once_per_bucket():
    torch.manual_seed(0)
    f = torch.compile(attend, backend="tpu", dynamic=True)
    q, kv = torch.randn(1, 4, 1, 16), torch.randn(1, 4, 60, 16)
    qt, kvt = q.to(DEV), kv.to(DEV)
    counts = {}
    for n in range(61, 100):
        new = torch.randn(1, 4, 1, 16)
        kv = torch.cat([kv, new], 2)
        kvt = torch.cat([kvt, new.to(DEV)], 2)
        torch.testing.assert_close(f(qt, kvt).cpu(), attend(q, kv), rtol=1e-5, atol=1e-5)
        counts[n] = compiles()
    assert counts[99] - counts[70] == 0, counts


def test_graph_growing_inside_runs_again_at_seen_sizes():
    def step(x, row):
        y = torch.cat([x, row], 1)
        return y, (y * 2).sum(1)

    f = torch.compile(step, backend="tpu", dynamic=True)
    torch.manual_seed(1)
    base = torch.randn(3, 90, 4)
    for rep in range(2):  # the second pass sees every size again
        x, xt = base[:, :70], base[:, :70].to(DEV)
        for n in range(70, 80):
            row = base[:, n:n + 1]
            x, s = step(x, row)
            xt, st = f(xt, row.to(DEV))
            torch.testing.assert_close(st.cpu(), s, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(xt.cpu(), x)
