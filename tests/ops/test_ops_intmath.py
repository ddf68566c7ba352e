"""gcd, lcm (functional, in-place, out=) and hash_tensor on tpu vs CPU."""
import pytest
import torch

from optest import DEV, check

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def _grid(dt, lcm=False):
    """Every pair of a value set with zeros, signs and the dtype's extremes
    (the CPU's lcm traps on the int32/int64 minimum, so lcm leaves it out)."""
    info = torch.iinfo(dt)
    vals = [0, 1, 2, 6, 7, 12, 35, 100, info.max]
    if dt != torch.uint8:
        vals += [-1, -2, -9, -12, -35, -128 if dt != torch.uint8 else 0]
        if not (lcm and dt in (torch.int32, torch.int64)):
            vals.append(info.min)
    v = torch.tensor(vals, dtype=torch.int64).to(dt)
    n = len(vals)
    return v[:, None].expand(n, n).contiguous(), v[None, :].expand(n, n).contiguous()


@pytest.mark.parametrize("dt", INT_DTYPES)
@pytest.mark.parametrize("fn", [torch.gcd, torch.lcm], ids=["gcd", "lcm"])
def test_gcd_lcm_grid(fn, dt):
    a, b = _grid(dt, lcm=fn is torch.lcm)
    check(fn, a, b)


@pytest.mark.parametrize("fn", [torch.gcd, torch.lcm], ids=["gcd", "lcm"])
def test_broadcast_promotion(fn):
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-60, 60, (4, 1, 5), generator=g, dtype=torch.int8)
    b = torch.randint(-1000, 1000, (3, 1), generator=g, dtype=torch.int32)
    check(fn, a, b)
    check(fn, b, torch.tensor(12))           # 0-d operand
    check(fn, torch.tensor(0), torch.tensor(0))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_inplace_and_out(name):
    g = torch.Generator().manual_seed(1)
    base = torch.randint(-50, 50, (4, 6), generator=g)
    other = torch.randint(-50, 50, (4,), generator=g)
    cpu = base.clone()
    getattr(cpu[:, 1], name + "_")(other)       # in place through a view
    tpu = base.clone().to(DEV)
    getattr(tpu[:, 1], name + "_")(other.to(DEV))
    assert torch.equal(tpu.cpu(), cpu)
    out_c = torch.empty(4, 6, dtype=torch.int64)
    out_t = torch.empty(4, 6, dtype=torch.int64, device=DEV)
    getattr(torch, name)(base, other[:, None].expand(4, 6), out=out_c)
    getattr(torch, name)(base.to(DEV), other[:, None].expand(4, 6).to(DEV), out=out_t)
    assert torch.equal(out_t.cpu(), out_c)
    # a non-contiguous out
    o_c = torch.zeros(6, 4, dtype=torch.int64).t()
    o_t = torch.zeros(6, 4, dtype=torch.int64, device=DEV).t()
    getattr(torch, name)(base, base.flip(1), out=o_c)
    getattr(torch, name)(base.to(DEV), base.flip(1).to(DEV), out=o_t)
    assert torch.equal(o_t.cpu(), o_c)


@pytest.mark.parametrize("dt", [torch.float32, torch.bool, torch.bfloat16])
def test_gcd_rejects_non_integers(dt):
    x = torch.ones(3, dtype=dt)
    for fn in (torch.gcd, torch.lcm):
        with pytest.raises(NotImplementedError):
            fn(x, x)
        # lcm of bool: PyTorch's meta function (which the tpu kernel runs
        # first to size its output) raises RuntimeError before any kernel
        exc = RuntimeError if (fn is torch.lcm and dt == torch.bool) else NotImplementedError
        with pytest.raises(exc):
            fn(x.to(DEV), x.to(DEV))


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bool])
def test_gcd_refusal_message(dt):
    """The refusal names CPU's kernel and dtype as CPU does."""
    x = torch.ones(3, dtype=dt)
    fns = (torch.gcd,) if dt == torch.bool else (torch.gcd, torch.lcm)
    for fn in fns:
        with pytest.raises(NotImplementedError) as cpu:
            fn(x, x)
        with pytest.raises(NotImplementedError) as tpu:
            fn(x.to(DEV), x.to(DEV)).cpu()
        assert str(cpu.value) in str(tpu.value)


def test_inplace_narrowing_and_errors():
    # int8.gcd_(int32): computed in int32, written back into int8
    a = torch.tensor([100, -120, 64], dtype=torch.int8)
    b = torch.tensor([300, 1000, 4096], dtype=torch.int32)
    ta = a.to(DEV)
    ta.gcd_(b.to(DEV))
    assert torch.equal(ta.cpu(), a.clone().gcd_(b))
    # the broadcast result must fit self
    x, y = torch.ones(3, dtype=torch.int64), torch.ones(2, 3, dtype=torch.int64)
    with pytest.raises(RuntimeError):
        x.clone().lcm_(y)
    with pytest.raises(RuntimeError):
        x.to(DEV).lcm_(y.to(DEV))


HASH_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64,
               torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dt", HASH_DTYPES)
def test_hash_tensor(dt):
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(3, 4, 5, generator=g) * 100).to(dt)
    if dt.is_floating_point:
        x.view(-1)[:6] = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, -3e-42,
                                       torch.finfo(dt).tiny / 4]).to(dt)
    for kw in [dict(), dict(dim=1), dict(dim=[0, 2], keepdim=True), dict(dim=-1),
               dict(dim=[], keepdim=True)]:
        check(torch.hash_tensor, x, **kw)


def test_hash_tensor_shapes_and_out():
    check(torch.hash_tensor, torch.tensor(5.0))
    check(torch.hash_tensor, torch.zeros(0, 3), dim=1)
    x = torch.arange(24).reshape(2, 3, 4)
    out_c = torch.empty(3, dtype=torch.uint64)
    out_t = torch.empty(3, dtype=torch.uint64, device=DEV)
    torch.hash_tensor(x, [0, 2], out=out_c)
    torch.hash_tensor(x.to(DEV), [0, 2], out=out_t)
    assert torch.equal(out_t.cpu(), out_c)


@pytest.mark.parametrize("kw,exc", [
    (dict(mode=1), RuntimeError),
    (dict(dim=5), IndexError),
    (dict(dim=[0, 0]), RuntimeError),
])
def test_hash_tensor_errors(kw, exc):
    x = torch.arange(12).reshape(3, 4)
    with pytest.raises(exc):
        torch.hash_tensor(x, **kw)
    with pytest.raises(exc):
        torch.hash_tensor(x.to(DEV), **kw)


def test_hash_tensor_empty_errors():
    for x, kw, exc in [(torch.zeros(0, 3), {}, RuntimeError),
                       (torch.zeros(0, 3), dict(dim=0), IndexError)]:
        with pytest.raises(exc):
            torch.hash_tensor(x, **kw)
        with pytest.raises(exc):
            torch.hash_tensor(x.to(DEV), **kw)


def test_hash_tensor_unsupported_dtype():
    x = torch.arange(4, dtype=torch.int32).to(torch.uint32)
    with pytest.raises(NotImplementedError):
        torch.hash_tensor(x)
    with pytest.raises(NotImplementedError):
        torch.hash_tensor(x.to(DEV))


def test_cpu_scalar_operand():
    # a 0-d CPU tensor next to a tpu tensor, as the CPU kernels accept it
    x = torch.tensor([12, -18, 0, 7])
    s8 = torch.tensor(8, dtype=torch.int8)
    assert torch.equal(torch.gcd(x.to(DEV), torch.tensor(8)).cpu(), torch.gcd(x, torch.tensor(8)))
    assert torch.equal(torch.lcm(x.to(DEV), s8).cpu(), torch.lcm(x, s8))
    y = x.to(DEV)
    y.gcd_(torch.tensor(6))
    assert torch.equal(y.cpu(), x.clone().gcd_(torch.tensor(6)))
