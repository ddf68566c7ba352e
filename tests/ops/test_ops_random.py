"""Random ops on tpu: distributions (moments over 1e5 samples, ranges),
determinism under torch.manual_seed and generators, dropout and its
backward, in-place sampling through views, and CPU-identical errors.

The tpu stream is not CPU's (mt19937), so distributions are compared by
law. The stream itself is defined (threefry2x32-20, counter-based): it is
checked value by value against a NumPy reference of the generator, which is
checked against the published known-answer vectors."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from optest import DEV

N = 100_000
FLOATS = [torch.float32, torch.bfloat16]


def sample(fn, dtype=torch.float32, n=N):
    x = torch.empty(n, device=DEV, dtype=dtype)
    out = fn(x)
    assert out.device.type == DEV
    return out.cpu().double()


def moments(c):
    return c.mean().item(), c.var().item()


# ------------------------------------------------------------------ uniform


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.float16])
def test_uniform_unit(dtype):
    c = sample(lambda x: x.uniform_(), dtype)
    assert c.min() >= 0 and c.max() < 1.0
    m, v = moments(c)
    assert abs(m - 0.5) < 0.01 and abs(v - 1 / 12) < 0.004


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_range(dtype):
    c = sample(lambda x: x.uniform_(-3.0, 5.0), dtype)
    assert c.min() >= -3.0 and c.max() < 5.0
    m, v = moments(c)
    assert abs(m - 1.0) < 0.05 and abs(v - 64 / 12) < 0.1


def test_uniform_degenerate_range():
    c = sample(lambda x: x.uniform_(2.0, 2.0), n=64)
    assert (c == 2.0).all()


def test_rand_factories():
    for dtype in FLOATS:
        c = torch.rand(N, device=DEV, dtype=dtype).cpu().double()
        assert c.min() >= 0 and c.max() < 1.0 and abs(c.mean() - 0.5) < 0.01
    like = torch.rand_like(torch.zeros(2, 3, device=DEV))
    assert like.shape == (2, 3) and like.device.type == DEV


# ------------------------------------------------------------------ normal


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_normal_(dtype):
    c = sample(lambda x: x.normal_(2.0, 3.0), dtype)
    m, v = moments(c)
    assert abs(m - 2.0) < 0.05 and abs(math.sqrt(v) - 3.0) < 0.05
    # Gaussian shape: ~68.3% within one sigma
    frac = ((c - 2.0).abs() < 3.0).double().mean().item()
    assert abs(frac - 0.6827) < 0.01


def test_randn_factories():
    c = torch.randn(N, device=DEV).cpu().double()
    m, v = moments(c)
    assert abs(m) < 0.02 and abs(v - 1.0) < 0.02
    c = torch.randn_like(torch.zeros(N, device=DEV, dtype=torch.bfloat16))
    assert c.dtype == torch.bfloat16
    c = torch.normal(1.0, 0.5, size=(N,), device=DEV).cpu().double()
    m, v = moments(c)
    assert abs(m - 1.0) < 0.01 and abs(math.sqrt(v) - 0.5) < 0.01


def test_normal_tensor_overloads():
    mean = torch.linspace(-5, 5, N).to(DEV)
    std = torch.linspace(0.5, 2.0, N).to(DEV)
    for out, m, s in [
        (torch.normal(mean, 2.0), mean, 2.0),
        (torch.normal(3.0, std), 3.0, std),
        (torch.normal(mean, std), mean, std),
    ]:
        assert out.device.type == DEV and out.shape == (N,)
        z = ((out - m) / s).cpu().double()
        zm, zv = moments(z)
        assert abs(zm) < 0.02 and abs(zv - 1.0) < 0.02
    # broadcasting mean [N] against std [1]
    out = torch.normal(mean, torch.ones(1, device=DEV))
    assert out.shape == (N,)
    out = torch.normal(mean.to(torch.bfloat16), 1.0)
    assert out.dtype == torch.bfloat16


def test_log_normal_():
    c = sample(lambda x: x.log_normal_(0.5, 0.25))
    assert c.min() > 0
    lm, lv = moments(c.log())
    assert abs(lm - 0.5) < 0.01 and abs(math.sqrt(lv) - 0.25) < 0.01


# ------------------------------------------------------------------ others


@pytest.mark.parametrize("dtype", FLOATS)
def test_exponential_(dtype):
    c = sample(lambda x: x.exponential_(2.0), dtype)
    assert c.min() >= 0
    m, v = moments(c)
    assert abs(m - 0.5) < 0.01 and abs(v - 0.25) < 0.02


def test_cauchy_():
    c = sample(lambda x: x.cauchy_(1.0, 2.0))
    q = torch.quantile(c[:50_000], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    assert abs(q[1] - 1.0) < 0.1
    assert abs((q[2] - q[0]) - 4.0) < 0.2  # IQR of Cauchy is 2 sigma


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_geometric_(dtype):
    c = sample(lambda x: x.geometric_(0.3), dtype)
    assert c.min() >= 1 and (c == c.round()).all()
    m, v = moments(c)
    assert abs(m - 1 / 0.3) < 0.05 and abs(v - 0.7 / 0.09) < 0.4


# ------------------------------------------------------------------ bernoulli


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_bernoulli_float(dtype):
    c = sample(lambda x: x.bernoulli_(0.3), dtype)
    assert set(c.unique().tolist()) <= {0.0, 1.0}
    assert abs(c.mean() - 0.3) < 0.01
    assert (sample(lambda x: x.bernoulli_(0.0), dtype, n=1000) == 0).all()
    assert (sample(lambda x: x.bernoulli_(1.0), dtype, n=1000) == 1).all()


def test_bernoulli_tensor_p():
    p = torch.cat([torch.zeros(1000), torch.ones(1000), torch.full((N,), 0.25)])
    out = torch.bernoulli(p.to(DEV))  # bernoulli (default) -> bernoulli_.Tensor
    assert out.dtype == torch.float32 and out.device.type == DEV
    c = out.cpu()
    assert (c[:1000] == 0).all() and (c[1000:2000] == 1).all()
    assert abs(c[2000:].mean() - 0.25) < 0.01
    # p broadcast into self; p a CPU scalar
    x = torch.empty(4, N // 4, device=DEV).bernoulli_(torch.tensor([0.0, 1.0, 0.5, 0.9], device=DEV)[:, None])
    c = x.cpu()
    assert (c[0] == 0).all() and (c[1] == 1).all() and abs(c[2].mean() - 0.5) < 0.02
    x = torch.empty(N, device=DEV).bernoulli_(torch.tensor(0.7))
    assert abs(x.cpu().mean() - 0.7) < 0.01


def test_out_variants():
    out = torch.empty(N, device=DEV)
    r = torch.normal(torch.zeros(N, device=DEV), 2.0, out=out)
    assert r is out and abs(out.cpu().std() - 2.0) < 0.05
    torch.normal(1.0, torch.full((N,), 0.5, device=DEV), out=out)
    assert abs(out.cpu().mean() - 1.0) < 0.01
    torch.normal(torch.zeros(N, device=DEV), torch.ones(N, device=DEV), out=out)
    assert abs(out.cpu().std() - 1.0) < 0.02
    b = torch.empty(N, device=DEV)
    torch.bernoulli(torch.full((N,), 0.25, device=DEV), out=b)
    assert abs(b.cpu().mean() - 0.25) < 0.01


def test_bernoulli_p():
    c = torch.bernoulli(torch.empty(N, device=DEV, dtype=torch.bfloat16), 0.2)
    assert c.dtype == torch.bfloat16
    assert abs(c.cpu().double().mean() - 0.2) < 0.01


# ------------------------------------------------------------------ integers


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8,
                                   torch.float32, torch.bfloat16])
def test_random_from_to(dtype):
    c = sample(lambda x: x.random_(-3 if dtype != torch.uint8 else 0, 7), dtype)
    lo = -3 if dtype != torch.uint8 else 0
    assert c.min() == lo and c.max() == 6
    assert set(c.unique().tolist()) == set(range(lo, 7))
    counts = torch.bincount((c - lo).long())
    assert (counts.double() / len(c) - 1 / (7 - lo)).abs().max() < 0.01


def test_random_to_and_default():
    c = sample(lambda x: x.random_(5), torch.int64)
    assert set(c.unique().tolist()) == set(range(5))
    for dtype, hi in [(torch.int8, 127), (torch.uint8, 255), (torch.int16, 32767),
                      (torch.bfloat16, 256), (torch.float32, 2 ** 24)]:
        c = sample(lambda x: x.random_(), dtype)
        assert c.min() >= 0 and c.max() <= hi and c.max() > hi * 0.9
        assert (c == c.round()).all()
    c = sample(lambda x: x.random_(), torch.bool, n=1000)
    assert 0.3 < c.mean() < 0.7
    c = sample(lambda x: x.random_(), torch.int64, n=1000)
    assert c.min() >= 0 and c.max() > 2 ** 62
    # from without to: [from, max]
    c = sample(lambda x: x.random_(100, None), torch.int8, n=10000)
    assert c.min() >= 100 and c.max() <= 127


def test_randint():
    x = torch.randint(3, 10, (N,), device=DEV)
    assert x.dtype == torch.int64 and x.device.type == DEV
    c = x.cpu()
    assert c.min() == 3 and c.max() == 9
    x = torch.randint(0, 2 ** 40, (1000,), device=DEV).cpu()
    assert x.min() >= 0 and x.max() < 2 ** 40 and x.max() > 2 ** 38
    x = torch.randint_like(torch.zeros(10, device=DEV, dtype=torch.int32), 4).cpu()
    assert x.dtype == torch.int32 and x.max() < 4


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_randperm(dtype):
    p = torch.randperm(1000, device=DEV, dtype=dtype)
    assert p.dtype == dtype and p.device.type == DEV
    c = p.cpu()
    assert torch.equal(c.sort().values, torch.arange(1000, dtype=dtype))
    assert not torch.equal(c, torch.arange(1000, dtype=dtype))
    assert torch.randperm(0, device=DEV).shape == (0,)
    assert torch.randperm(1, device=DEV).cpu().tolist() == [0]


def test_multinomial():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    s = torch.multinomial(p.to(DEV), N // 4, replacement=True)
    assert s.dtype == torch.int64 and s.shape == (2, N // 4)
    c = s.cpu()
    for r in range(2):
        freq = torch.bincount(c[r], minlength=4).double() / c.shape[1]
        assert (freq - p[r] / p[r].sum()).abs().max() < 0.015
    # without replacement: distinct, never a zero-weight category
    for _ in range(3):
        c = torch.multinomial(p.to(DEV), 3).cpu()
        assert sorted(c[0].tolist()) == [0, 2, 3] and sorted(c[1].tolist()) == [0, 1, 3]
    # first draw follows p
    draws = torch.multinomial(torch.tensor([0.2, 0.8]).to(DEV).expand(N // 10, 2), 1).cpu()
    assert abs(draws.double().mean() - 0.8) < 0.02
    one = torch.multinomial(torch.tensor([1.0, 3.0], device=DEV), 2)
    assert one.shape == (2,) and sorted(one.cpu().tolist()) == [0, 1]


# ------------------------------------------------------------------ determinism


def test_manual_seed_reproduces():
    torch.manual_seed(123)
    a = torch.rand(1000, device=DEV).cpu()
    b = torch.randn(1000, device=DEV).cpu()
    torch.manual_seed(123)
    a2 = torch.rand(1000, device=DEV).cpu()
    b2 = torch.randn(1000, device=DEV).cpu()
    assert torch.equal(a, a2) and torch.equal(b, b2)
    assert not torch.equal(a, torch.rand(1000, device=DEV).cpu())  # state advanced
    torch.manual_seed(124)
    assert not torch.equal(a, torch.rand(1000, device=DEV).cpu())


def test_device_manual_seed_and_state():
    tpu = getattr(torch, "tpu", None)
    if tpu is None or not hasattr(tpu, "manual_seed"):
        pytest.skip("torch.tpu.manual_seed is not available")
    tpu.manual_seed(7)
    a = torch.rand(100, device=DEV).cpu()
    tpu.manual_seed(7)
    assert torch.equal(a, torch.rand(100, device=DEV).cpu())
    if hasattr(tpu, "get_rng_state"):
        state = tpu.get_rng_state()
        a = torch.randint(0, 100, (100,), device=DEV).cpu()
        tpu.set_rng_state(state)
        assert torch.equal(a, torch.randint(0, 100, (100,), device=DEV).cpu())


def test_generator_argument():
    g = torch.Generator(device=DEV)
    g.manual_seed(5)
    a = torch.rand(100, device=DEV, generator=g).cpu()
    torch.manual_seed(5)
    noise = torch.rand(100, device=DEV)  # the default state moves independently
    g.manual_seed(5)
    b = torch.rand(100, device=DEV, generator=g).cpu()
    assert torch.equal(a, b)
    x = torch.empty(100, device=DEV)
    g.manual_seed(5)
    x.uniform_(generator=g)
    assert torch.equal(x.cpu(), a)
    assert noise.device.type == DEV


def test_different_draws_per_call_same_program():
    x = torch.empty(64, device=DEV)
    draws = {tuple(x.normal_().cpu().tolist()) for _ in range(4)}
    assert len(draws) == 4


# ------------------------------------------------------------------ views


def test_sampling_in_place_through_views():
    base = torch.zeros(4, 6, device=DEV)
    base[:, 1].uniform_(1.0, 2.0)
    c = base.cpu()
    assert (c[:, 1] >= 1).all() and (c[:, 1] < 2).all()
    c[:, 1] = 0
    assert (c == 0).all()
    t = torch.zeros(6, 4, device=DEV).t()  # non-contiguous
    t.normal_()
    assert (t.cpu() != 0).all()
    b = torch.zeros(4, 6, device=DEV, dtype=torch.int64)
    b[1:3, ::2].random_(1, 4)
    c = b.cpu()
    assert (c[1:3, ::2] >= 1).all() and (c[1:3, ::2] < 4).all()
    c[1:3, ::2] = 0
    assert (c == 0).all()


# ------------------------------------------------------------------ dropout


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_mask_scaling_and_backward(dtype):
    p = 0.3
    x = (torch.rand(200, 500) + 0.5).to(dtype)
    xt = x.to(DEV).requires_grad_(True)
    y = F.dropout(xt, p=p, training=True)
    yc = y.detach().cpu()
    keep = yc != 0
    assert abs(keep.double().mean() - (1 - p)) < 0.01
    expected = (x.float() * (1 / (1 - p))).to(dtype)
    torch.testing.assert_close(yc[keep], expected[keep], atol=0, rtol=0 if dtype == torch.float32 else 1e-2)
    g = torch.randn(200, 500).to(dtype)
    y.backward(g.to(DEV))
    gc = xt.grad.cpu()
    want = (g.float() * keep.float() * (1 / (1 - p))).to(dtype)
    torch.testing.assert_close(gc, want, atol=1e-6, rtol=1e-6 if dtype == torch.float32 else 1e-2)


def test_native_dropout_direct():
    x = torch.randn(50, 40)
    out, mask = torch.ops.aten.native_dropout(x.to(DEV), 0.5, True)
    assert mask.dtype == torch.bool and mask.shape == x.shape
    torch.testing.assert_close(out.cpu(), x * mask.cpu() * 2.0)
    out, mask = torch.ops.aten.native_dropout(x.to(DEV), 0.5, False)
    assert mask.cpu().all() and torch.equal(out.cpu(), x)
    out, mask = torch.ops.aten.native_dropout(x.to(DEV), 1.0, True)
    assert not mask.cpu().any() and (out.cpu() == 0).all()
    out, mask = torch.ops.aten.native_dropout(x.to(DEV), 0.0, True)
    assert mask.cpu().all() and torch.equal(out.cpu(), x)
    g = torch.randn(50, 40)
    m = torch.rand(50, 40) > 0.5
    r = torch.ops.aten.native_dropout_backward(g.to(DEV), m.to(DEV), 1.25)
    torch.testing.assert_close(r.cpu(), torch.ops.aten.native_dropout_backward(g, m, 1.25))


def test_dropout_edge_probabilities_and_eval():
    x = torch.randn(30, 20)
    xt = x.to(DEV)
    assert torch.equal(F.dropout(xt, 0.0, training=True).cpu(), x)
    assert torch.equal(F.dropout(xt, 0.5, training=False).cpu(), x)
    layer = torch.nn.Dropout(0.4).to(DEV)
    layer.eval()
    assert torch.equal(layer(xt).cpu(), x)
    layer.train()
    y = layer(xt).cpu()
    assert ((y == 0) | torch.isclose(y, x / 0.6)).all()


def test_inplace_dropout():
    x = torch.ones(N, device=DEV)
    F.dropout(x, 0.5, training=True, inplace=True)  # bernoulli_.float + div_ + mul_
    c = x.cpu()
    assert set(c.unique().tolist()) == {0.0, 2.0} and abs((c == 0).double().mean() - 0.5) < 0.01


def test_feature_dropout():
    x = torch.ones(8, 16, 5, 5)
    y = F.dropout2d(x.to(DEV), 0.5, training=True).cpu()
    per_channel = y.view(8, 16, -1)
    # whole channels are either dropped or scaled by 2
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("fn", [
    lambda d: torch.empty(3, device=d).uniform_(2, 1),
    lambda d: torch.empty(3, device=d).normal_(0, -1),
    lambda d: torch.empty(3, device=d).bernoulli_(1.5),
    lambda d: torch.empty(3, device=d).bernoulli_(torch.tensor([0.5, 1.5, 0.0], device=d)),
    lambda d: torch.bernoulli(torch.tensor([0.5, float("nan")], device=d)),
    lambda d: torch.bernoulli(torch.empty(3, device=d), -0.1),
    lambda d: torch.empty(3, device=d).random_(5, 2),
    lambda d: torch.empty(3, dtype=torch.int8, device=d).random_(0, 1000),
    lambda d: torch.empty(3, device=d).exponential_(-1),
    lambda d: torch.empty(3, dtype=torch.long, device=d).exponential_(),
    lambda d: torch.empty(3, device=d).log_normal_(0, -1),
    lambda d: torch.empty(3, device=d).geometric_(1.5),
    lambda d: torch.randperm(-1, device=d),
    lambda d: torch.randperm(1000, dtype=torch.int8, device=d),
    lambda d: torch.multinomial(torch.ones(2, device=d), 3),
    lambda d: torch.multinomial(torch.ones(2, 2, 2, device=d), 1),
    lambda d: torch.multinomial(torch.ones(2, dtype=torch.long, device=d), 1),
    lambda d: torch.multinomial(torch.tensor([1.0, -1.0], device=d), 1),
    lambda d: torch.multinomial(torch.tensor([[1.0, 1.0], [0.0, 0.0]], device=d), 1, True),
    lambda d: torch.multinomial(torch.tensor([1.0, float("nan")], device=d), 1),
    lambda d: torch.normal(0.0, torch.tensor([1.0, -1.0], device=d)),
    lambda d: torch.normal(torch.zeros(2, device=d), torch.tensor([1.0, -1.0], device=d)),
    lambda d: torch.ops.aten.native_dropout(torch.ones(3, device=d), 1.5, True),
    lambda d: torch.normal(torch.ones(3, device=d), -1.0),
    lambda d: torch.normal(torch.ones(3, device=d), torch.ones(2, device=d)),
    lambda d: torch.empty(3, dtype=torch.long, device=d).uniform_(),
])
def test_errors_match_cpu(fn):
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(Exception) as tpu:
        fn(DEV)
    assert isinstance(tpu.value, type(cpu.value)), (cpu.value, tpu.value)


# ------------------------------------------------- the stream, value by value

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)


def threefry2x32(k0, k1, x0, x1):
    """threefry2x32 with 20 rounds on uint32 arrays (Salmon et al., 2011)."""
    with np.errstate(over="ignore"):
        ks = [np.uint32(k0), np.uint32(k1), np.uint32(0x1BD11BDA ^ k0 ^ k1)]
        a = (x0 + ks[0]).astype(np.uint32)
        c = (x1 + ks[1]).astype(np.uint32)
        for r in range(20):
            a = (a + c).astype(np.uint32)
            rot = _ROT[r % 8]
            c = ((c << np.uint32(rot)) | (c >> np.uint32(32 - rot))).astype(np.uint32) ^ a
            if r % 4 == 3:
                i = (r + 1) // 4
                a = (a + ks[i % 3]).astype(np.uint32)
                c = (c + ks[(i + 1) % 3] + np.uint32(i)).astype(np.uint32)
    return a, c


def test_reference_matches_known_answers():
    # Random123's known-answer vectors for threefry2x32_20
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for (k0, k1), (x0, x1), want in cases:
        got = threefry2x32(k0, k1, np.array([x0], np.uint32), np.array([x1], np.uint32))
        assert (int(got[0][0]), int(got[1][0])) == want


def reference_bits(seed, counter, n):
    """Element i of a draw: threefry(key=seed, counter + i); (lane 0, lane 1)."""
    at = np.arange(n, dtype=np.uint64) + np.uint64(counter)
    x0 = (at & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    x1 = (at >> np.uint64(32)).astype(np.uint32)
    return threefry2x32(seed & 0xFFFFFFFF, seed >> 32, x0, x1)


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_stream_values_and_state(seed):
    torch.manual_seed(seed)
    a = torch.rand(2, 3, device=DEV)
    b = torch.rand(5, device=DEV, dtype=torch.float64)
    state = torch.tpu.get_rng_state().view(torch.int64)
    lo, _ = reference_bits(seed, 0, 6)
    want_a = (lo >> np.uint32(8)).astype(np.float64) / 2.0**24
    assert torch.equal(a.cpu(), torch.from_numpy(want_a.reshape(2, 3)).float())
    lo, hi = reference_bits(seed, 6, 5)
    bits = lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))
    want_b = (bits >> np.uint64(11)).astype(np.float64) / 2.0**53
    assert torch.equal(b.cpu(), torch.from_numpy(want_b))
    # (key, counter): the counter advanced by the 11 elements drawn
    assert state.tolist() == [seed if seed < 2**63 else seed - 2**64, 11]


def test_normal_from_one_draw_per_element():
    """float32 normal_: Box-Muller on the two halves of one 64-bit draw."""
    torch.manual_seed(11)
    got = torch.randn(1000, device=DEV).cpu().double().numpy()
    lo, hi = reference_bits(11, 0, 1000)
    u1 = (lo >> np.uint32(8)).astype(np.float64) / 2.0**24
    u2 = (hi >> np.uint32(8)).astype(np.float64) / 2.0**24
    want = np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_values_do_not_depend_on_the_draws_shape():
    torch.manual_seed(3)
    whole = torch.rand(24, device=DEV).cpu()
    torch.manual_seed(3)
    parts = [torch.rand(4, 2, device=DEV).cpu().flatten(), torch.rand(16, device=DEV).cpu()]
    assert torch.equal(torch.cat(parts), whole)
