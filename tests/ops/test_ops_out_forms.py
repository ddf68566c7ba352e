"""Overloads the PyTorch suite found missing on tpu: the out= forms of
any/all, count_nonzero, median/nanmedian, kthvalue, scatter_reduce, take
and range; complex inputs to the ops that only move or test elements, and
complex linspace; and
histc of integer inputs (as CUDA counts them; the CPU refuses them)."""
import pytest
import torch

import torchtpu  # noqa: F401
from optest import DEV, assert_close


def both(fn):
    c, t = fn("cpu"), fn("tpu")
    cs = c if isinstance(c, (tuple, list)) else (c,)
    ts = t if isinstance(t, (tuple, list)) else (t,)
    for a, b in zip(ts, cs):
        a = a.cpu()
        assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
        torch.testing.assert_close(a, b, equal_nan=True)


def data(d, dtype=torch.float32, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g)
    return (x * 3).to(dtype).to(d) if not dtype.is_floating_point else x.to(dtype).to(d)


def test_any_all_out_forms():
    def run(d):
        x = data(d) > 0.3
        outs = []
        for f in (torch.any, torch.all):
            o1 = torch.empty((), dtype=torch.bool, device=d)
            f(x, out=o1)
            o2 = torch.empty(3, dtype=torch.bool, device=d)
            f(x, 1, out=o2)
            o3 = torch.empty(1, 5, dtype=torch.bool, device=d)
            f(x, (0,), keepdim=True, out=o3)
            outs += [o1, o2, o3]
        return outs

    both(run)


def test_count_nonzero_median_kthvalue_out_forms():
    def run(d):
        x = data(d)
        x[0, 1] = float("nan")
        c1 = torch.empty((), dtype=torch.long, device=d)
        torch.ops.aten.count_nonzero.out(x, None, out=c1)
        c2 = torch.empty(3, dtype=torch.long, device=d)
        torch.ops.aten.count_nonzero.dim_IntList_out(x, [1], out=c2)
        v, i = torch.empty(3, device=d), torch.empty(3, dtype=torch.long, device=d)
        torch.median(x, 1, out=(v, i))
        nv, ni = torch.empty(3, device=d), torch.empty(3, dtype=torch.long, device=d)
        torch.nanmedian(x, 1, out=(nv, ni))
        m, nm = torch.empty((), device=d), torch.empty((), device=d)
        torch.ops.aten.median.out(x[1:], out=m)
        torch.ops.aten.nanmedian.out(x, out=nm)
        kv, ki = torch.empty(5, device=d), torch.empty(5, dtype=torch.long, device=d)
        torch.kthvalue(x[1:], 2, 0, out=(kv, ki))
        return [c1, c2, v, i, nv, ni, m, nm, kv, ki]

    both(run)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_scatter_reduce_out(reduce):
    def run(d):
        x = data(d, shape=(6,))
        idx = torch.tensor([0, 2, 2, 1, 0, 5, 5, 5], device=d)
        src = data(d, shape=(8,))
        out = torch.empty(6, device=d)
        torch.scatter_reduce(x, 0, idx, src, reduce, include_self=False, out=out)
        return out

    both(run)


def test_take_and_range_out():
    def run(d):
        x = data(d)
        o = torch.empty(4, device=d)
        torch.take(x, torch.tensor([0, 14, 7, 3], device=d), out=o)
        r = torch.empty(7, device=d)
        with pytest.warns(UserWarning):
            torch.range(0, 3, 0.5, out=r)
        return [o, r]

    both(run)


def test_complex_elements():
    def run(d):
        z = torch.tensor([0j, 1j, 2 + 0j, 0j, -1 - 1j, 3j], dtype=torch.complex64, device=d)
        a = torch.zeros(6, dtype=torch.complex64, device=d)
        a[torch.tensor([1, 4], device=d)] = torch.tensor([5 - 2j, 1j], dtype=torch.complex64, device=d)
        a.index_put_((torch.tensor([1, 1], device=d),), torch.tensor([1j, 1], dtype=torch.complex64, device=d),
                     accumulate=True)
        return [torch.count_nonzero(z), torch.any(z.reshape(2, 3), 1), torch.all(z),
                torch.take(z, torch.tensor([5, 1], device=d)), a,
                torch.linspace(-2 + 3j, 4 - 1j, 7, device=d),
                torch.linspace(0, 1 + 1j, 5, dtype=torch.complex128, device=d)]

    both(run)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
def test_histc_of_integers_counts_as_cuda(dtype):
    x = torch.tensor([1, 2, 2, 5, 3, 9, 0, 4, 4, 4], dtype=dtype)
    t = x.to("tpu")
    # CUDA's bins: (x - min) * bins / (max - min) in integers, max in the last
    for bins, lo, hi in ((4, 0, 5), (3, 0, 0), (5, 1, 4), (1, 2, 2)):
        got = torch.histc(t, bins=bins, min=lo, max=hi).cpu()
        a, b = (lo, hi) if lo != hi else (int(x.min()), int(x.max()))
        if a == b:
            a, b = a - 1, b + 1
        want = torch.zeros(bins, dtype=dtype)
        for v in x.tolist():
            if a <= v <= b:
                want[min((v - a) * bins // (b - a), bins - 1)] += 1
        assert got.dtype == dtype
        torch.testing.assert_close(got, want)
    # float inputs as before
    f = torch.tensor([0.1, 0.5, 0.55, 2.0])
    torch.testing.assert_close(torch.histc(f.to("tpu"), bins=4, min=0, max=2).cpu(),
                               torch.histc(f, bins=4, min=0, max=2))


@pytest.mark.parametrize("name", ["sort", "kthvalue", "mode", "median", "max", "aminmax", "frexp",
                                  "lu_factor", "eigh", "topk", "cummax"])
def test_outs_of_an_op_with_several_take_the_results_dtypes(name):
    """An op with several outs refuses an out of another dtype than its
    result's, as every CPU kernel of such an op does, in the CPU's words (a
    single out may be of any dtype the result casts to); the right dtypes
    work."""
    calls = {
        "sort": lambda x, out: torch.sort(x, 1, out=out),
        "kthvalue": lambda x, out: torch.kthvalue(x, 2, out=out),
        "mode": lambda x, out: torch.mode(x, 1, out=out),
        "median": lambda x, out: torch.median(x, 1, out=out),
        "max": lambda x, out: torch.max(x, 1, out=out),
        "aminmax": lambda x, out: torch.aminmax(x, dim=1, out=out),
        "frexp": lambda x, out: torch.frexp(x, out=out),
        "lu_factor": lambda x, out: torch.linalg.lu_factor(x[:, :4], out=out),
        "eigh": lambda x, out: torch.linalg.eigh(x[:, :4], out=out),
        "topk": lambda x, out: torch.topk(x, 2, out=out),
        "cummax": lambda x, out: torch.cummax(x, 1, out=out),
    }
    call = calls[name]
    x = torch.rand(4, 5, generator=torch.Generator().manual_seed(3))
    right = [r.dtype for r in call(x, None) if isinstance(r, torch.Tensor)] if name != "aminmax" \
        else [torch.float32, torch.float32]
    wrong = [torch.float64 if d.is_floating_point else torch.int16 for d in right]
    for dtypes in ([wrong[0]] + right[1:], right[:1] + wrong[1:]):
        outs = lambda dev: tuple(torch.empty(0, dtype=d, device=dev) for d in dtypes)  # noqa: E731
        with pytest.raises(RuntimeError) as cpu_error:
            call(x, outs("cpu"))
        with pytest.raises(RuntimeError) as tpu_error:
            call(x.to(DEV), outs(DEV))
        assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]
    cpu = call(x, tuple(torch.empty(0, dtype=d) for d in right))
    dev = call(x.to(DEV), tuple(torch.empty(0, dtype=d, device=DEV) for d in right))
    for c, d in zip(cpu, dev):
        if name != "eigh":   # eigenvectors' signs are the solver's choice
            assert_close(d, c)


def test_resizing_an_out_of_elements_warns_on_every_call():
    """The CPU warns each time an out= of elements is resized; tpu answers
    repeated calls from its cache of meta-kernel answers and still warns
    each time (and never for an empty out)."""
    import warnings

    for make_out, warns in ((lambda d: torch.empty(5, device=d), 1), (lambda d: torch.empty(0, device=d), 0)):
        for _ in range(3):
            for d in ("cpu", DEV):
                a = torch.rand(3, device=d)
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    torch.mul(a, a, out=make_out(d))
                said = [m for m in w if "was resized" in str(m.message)]
                assert len(said) == warns, (d, [str(m.message) for m in w])
