"""torch.compile over sizes that change (docs/design/shapes.md): a graph
whose input is stored padded (grown in eager mode, or an input whose size
Dynamo made symbolic) compiles one program per bucket; a graph that grows
a tensor inside itself stays correct when it runs again at sizes it has
seen; a graph over padded storages replays only at the true sizes of its
recording."""
import pytest
import torch

import torchtpu
from _proc import check, run_script
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


class _Block(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        h = self.ln(x)
        a = torch.nn.functional.scaled_dot_product_attention(self.q(h), h, h, is_causal=True)
        return x + self.o(a)


LENGTHS = [70, 77, 90, 100, 128, 65, 111, 70]


def _train_dynamic(how):
    """A compiled forward and backward (MSE loss) over float inputs of
    varying length, made dynamic `how`; gradients against the CPU's. The
    compile count after each length."""
    torch.manual_seed(0)
    cpu = _Block()
    tpu = _Block().to(DEV)
    tpu.load_state_dict(cpu.state_dict())
    kw = {"dynamic": True} if how == "dynamic=True" else {}

    def loss(m, x):
        return torch.nn.functional.mse_loss(m(x), x * 0.5)

    f = torch.compile(lambda x: loss(tpu, x), backend="tpu", **kw)
    counts = []
    for n in LENGTHS:
        x = torch.randn(2, n, 32)
        xt = x.to(DEV)
        if how == "mark_dynamic":
            torch._dynamo.mark_dynamic(xt, 1)
        for p in list(cpu.parameters()) + list(tpu.parameters()):
            p.grad = None
        got = f(xt)
        got.backward()
        want = loss(cpu, x)
        want.backward()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
        for p, q in zip(tpu.parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-3, atol=1e-4)
        counts.append(compiles())
    return counts


@pytest.mark.parametrize("how", ["mark_dynamic", "automatic", "dynamic=True"])
def test_symbolic_sizes_compile_one_program_per_bucket(how):
    """Graphs whose input sizes Dynamo made symbolic (mark_dynamic, its
    automatic dynamic shapes after a second size, dynamic=True) take their
    inputs padded along the symbolic dim: once the bucket's programs exist,
    new lengths in it compile nothing, forward and backward. dynamic=True
    pads from the call that shows which dim changes. In a process of its
    own: what earlier tests left in Dynamo's and the engine's memory of
    sizes must not decide where the counts settle."""
    settled = {"mark_dynamic": 1, "automatic": 2, "dynamic=True": 3}[how]
    check(run_script(f"""
        import sys
        sys.path.insert(0, "tests/compile")
        from test_buckets_compile import _train_dynamic
        counts = _train_dynamic({how!r})
        assert counts[-1] == counts[{settled}], counts
        print("ok")
    """, timeout=300))


def test_graph_over_padded_inputs_replays_at_a_seen_size():
    """A graph over padded inputs replays where the sizes are those of a
    recording (each size of a bucket keeps its own replay, since the
    program takes the true size as a run-time value)."""
    f = torch.compile(lambda x: (x * 2).softmax(1).sum(1), backend="tpu", dynamic=True)
    for rep in range(3):
        for n in (70, 90):
            x = torch.randn(2, n, 8)
            xt = x.to(DEV)
            torch._dynamo.mark_dynamic(xt, 1)
            before = debug.metrics()["graph_replays"]
            torch.testing.assert_close(f(xt).cpu(), (x * 2).softmax(1).sum(1), rtol=1e-5, atol=1e-5)
            if rep == 2:
                assert debug.metrics()["graph_replays"] == before + 1


@pytest.mark.parametrize("n", [70, 128])
def test_scatters_of_a_view_over_padded_storages(n):
    """slice_scatter and select_scatter (a flat clone of the storage, then
    a write through a view) keep a padded input padded: values equal the
    CPU's and a second length compiles nothing."""
    def run(m):
        x, y = torch.randn(2, 3, m, 8), torch.randn(2, 3, m, 4)
        xt, yt, rt = x.to(DEV), y.to(DEV), y[..., 0].contiguous().to(DEV)
        for t in (xt, yt, rt):
            assert torchtpu._C._pad_graph_input(t, 2)
        close(torch.slice_scatter(xt, yt, 3, 0, 4), torch.slice_scatter(x, y, 3, 0, 4))
        close(torch.select_scatter(xt, rt, 3, 5), torch.select_scatter(x, y[..., 0], 3, 5))

    run(n)
    before = compiles()
    run(n - 3)
    assert compiles() == before


def close(got, want):
    torch.testing.assert_close(got.cpu(), want)


def test_padding_an_input_leaves_its_values():
    """_pad_graph_input stores a tensor padded without changing what it
    holds; views, non-contiguous tensors and tiny sizes are left exact."""
    x = torch.randn(3, 70, 5)
    xt = x.to(DEV)
    assert torchtpu._C._pad_graph_input(xt, 1)
    assert torchtpu._C._pad_graph_input(xt, 1)  # already padded
    close(xt, x)
    assert not torchtpu._C._pad_graph_input(xt.transpose(0, 1), 0)
    assert not torchtpu._C._pad_graph_input(torch.randn(4, 2, device=DEV), 1)  # 128 > 4 * 2
    with pytest.raises(IndexError):
        torchtpu._C._pad_graph_input(torch.randn(4, 2, device=DEV), 5)
