"""Weight-only quantized matmuls on tpu vs CPU: int8 weights with per-row
scales (_weight_int8pack_mm), 4-bit weights with groupwise scales and zeros
in the CPU's packing (_convert_weight_to_int4pack_for_cpu,
_weight_int4pack_mm_for_cpu) and in tinygemm's (_convert_weight_to_int4pack,
_weight_int4pack_mm: no CPU kernel; compared with the CPU's _for_cpu pair on
the same integer weights), a Linear quantized the way torchao does, and the
programs compiled for a TPU v5e (skipped without libtpu)."""
import pytest
import torch

import torchtpu.aot as aot
from _proc import run_script
from optest import DEV, same_error

aten = torch.ops.aten
FLOATS = [torch.bfloat16, torch.float16, torch.float32]
_ULP = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10, torch.float32: 0.0}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _assert_matmul_close(dev, cpu, x, w_abs, dtype):
    """dev and cpu agree as two float32 sums of the same products in
    another order do, each rounded once to dtype: |d - c| within the float32
    error bound of |x| @ |w|.T, plus one unit of dtype's last place."""
    assert dev.dtype == cpu.dtype == dtype and dev.shape == cpu.shape
    d, c = dev.cpu().float(), cpu.float()
    k = x.shape[1]
    bound = (x.float().abs() @ w_abs.T) * (4 * k * 2.0**-24) + c.abs() * _ULP[dtype] + 1e-30
    bad = (d - c).abs() > bound
    assert not bad.any(), f"{bad.sum()} of {bad.numel()} differ; max {(d - c).abs().max()}"


# ------------------------------------------------------------ int4, torchao's way


def _int4_qparams(w, group):
    """torchao's get_groupwise_affine_qparams + quantize (n_bit=4) and
    pack_tinygemm_scales_and_zeros: nibbles [N, K] int32, [K/G, N, 2]."""
    n, k = w.shape
    g = w.float().reshape(-1, group)
    lo, hi = g.amin(dim=1, keepdim=True), g.amax(dim=1, keepdim=True)
    scales = (hi - lo).clamp(min=1e-6) / 15
    zeros = lo + scales * 8
    q = g.sub(zeros - scales * 8).div(scales).round().clamp(0, 15).to(torch.int32).reshape(n, k)
    return q, scales.reshape(n, -1), zeros.reshape(n, -1)


def _scales_and_zeros(scales, zeros, dtype):
    sz = torch.stack([scales.to(dtype), zeros.to(dtype)], dim=2)  # [N, K/G, 2]
    return sz.transpose(0, 1).contiguous()


def _int4_case(n, k, group, dtype, seed):
    g = _gen(seed)
    w = torch.randn(n, k, generator=g)
    q, scales, zeros = _int4_qparams(w, group)
    sz = _scales_and_zeros(scales, zeros, dtype)
    deq = (q.float() - 8) * sz.float().transpose(0, 1).repeat_interleave(group, dim=1)[..., 0] + \
        sz.float().transpose(0, 1).repeat_interleave(group, dim=1)[..., 1]
    return q, sz, deq


def _tinygemm_bytes(q):
    """torchao's uint8 input of _convert_weight_to_int4pack: even k high."""
    return (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)


@pytest.mark.parametrize("n,k", [(16, 32), (48, 64), (64, 128), (80, 64), (96, 256), (192, 32), (256, 64)])
def test_convert_for_cpu_is_exact(n, k):
    # full blocks, a partial last block, and values beyond a nibble (the
    # CPU truncates them to the byte)
    g = _gen(n + k)
    for w in (torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32),
              torch.randint(-300, 300, (n, k), generator=g, dtype=torch.int32)):
        for tiles in (2, 4, 8):
            cpu = aten._convert_weight_to_int4pack_for_cpu(w, tiles)
            dev = aten._convert_weight_to_int4pack_for_cpu(w.to(DEV), tiles)
            assert dev.dtype == torch.uint8 and dev.shape == cpu.shape
            assert torch.equal(dev.cpu(), cpu)
    # a non-contiguous weight packs as its contiguous copy
    wt = torch.randint(0, 16, (k, n), generator=g, dtype=torch.int32).t()
    assert torch.equal(aten._convert_weight_to_int4pack_for_cpu(wt.to(DEV), 2).cpu(),
                       aten._convert_weight_to_int4pack_for_cpu(wt, 2))


@pytest.mark.parametrize("capability", ["avx2", "default"])
def test_cpu_packing_of_other_cpu_kinds(capability):
    """The CPU's packing follows its vector unit (blocks of 64 rows paired
    by halves under AVX512, of 32 under AVX2, adjacent rows otherwise):
    under each, tpu packs and reads as the CPU does (the machine's own kind
    is the rest of this file)."""
    r = run_script("""
        import torch, torchtpu
        aten = torch.ops.aten
        g = torch.Generator().manual_seed(0)
        for n in (16, 48, 64, 80, 96):
            w = torch.randint(0, 16, (n, 64), generator=g, dtype=torch.int32)
            cpu = aten._convert_weight_to_int4pack_for_cpu(w, 2)
            assert torch.equal(aten._convert_weight_to_int4pack_for_cpu(w.to("tpu"), 2).cpu(), cpu), n
            x = torch.randn(2, 64, generator=g)
            sz = torch.rand(2, n, 2, generator=g)
            ref = aten._weight_int4pack_mm_for_cpu(x, cpu, 32, sz)
            dev = aten._weight_int4pack_mm_for_cpu(x.to("tpu"), cpu.to("tpu"), 32, sz.to("tpu"))
            torch.testing.assert_close(dev.cpu(), ref, atol=1e-4, rtol=1e-5)
        print(torch.backends.cpu.get_cpu_capability())
    """, timeout=300, ATEN_CPU_CAPABILITY=capability)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert r.stdout.split()[-1] == capability.upper()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k,group", [
    (1, 64, 128, 32),      # decode
    (1, 256, 512, 128),
    (3, 48, 64, 32),       # a partial block only
    (4, 80, 256, 64),      # a full block and a partial one
    (17, 128, 256, 128),
    (33, 64, 256, 256),
])
def test_int4pack_mm_for_cpu(m, n, k, group, dtype):
    q, sz, deq = _int4_case(n, k, group, dtype, seed=m * 7 + n)
    x = torch.randn(m, k, generator=_gen(m), dtype=torch.float32).to(dtype)
    packed = aten._convert_weight_to_int4pack_for_cpu(q, 2)
    cpu = aten._weight_int4pack_mm_for_cpu(x, packed, group, sz)
    # packed on tpu, and packed on the CPU then moved
    for w in (aten._convert_weight_to_int4pack_for_cpu(q.to(DEV), 2), packed.to(DEV)):
        dev = aten._weight_int4pack_mm_for_cpu(x.to(DEV), w, group, sz.to(DEV))
        _assert_matmul_close(dev, cpu, x, deq.abs(), dtype)


@pytest.mark.parametrize("tiles", [2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("m,n,k,group", [(1, 64, 256, 32), (5, 128, 512, 64), (16, 256, 256, 128)])
def test_int4pack_mm_tinygemm_layout(m, n, k, group, dtype, tiles):
    q, sz, deq = _int4_case(n, k, group, dtype, seed=n + tiles)
    x = torch.randn(m, k, generator=_gen(m + 1)).to(dtype)
    cpu = aten._weight_int4pack_mm_for_cpu(x, aten._convert_weight_to_int4pack_for_cpu(q, tiles), group, sz)
    packed = aten._convert_weight_to_int4pack(_tinygemm_bytes(q).to(DEV), tiles)
    assert packed.dtype == torch.int32
    assert packed.shape == (n // 8, k // (tiles * 16), 32, tiles // 2)
    dev = aten._weight_int4pack_mm(x.to(DEV), packed, group, sz.to(DEV))
    _assert_matmul_close(dev, cpu, x, deq.abs(), dtype)


# ------------------------------------------------------------ int8


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", [(1, 64, 128), (1, 256, 1024), (7, 48, 96), (32, 128, 256)])
def test_int8pack_mm(m, n, k, dtype):
    g = _gen(m + n + k)
    w = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8)
    scales = (torch.rand(n, generator=g) / 64 + 1e-3).to(dtype)
    x = torch.randn(m, k, generator=g).to(dtype)
    cpu = aten._weight_int8pack_mm(x, w, scales)
    dev = aten._weight_int8pack_mm(x.to(DEV), w.to(DEV), scales.to(DEV))
    _assert_matmul_close(dev, cpu, x, w.float().abs() * scales.float()[:, None].abs(), dtype)


def test_int8pack_mm_rows_of_a_wider_activation():
    # A contiguous in its last dim only (every other row), as the CPU takes
    g = _gen(3)
    x = torch.randn(8, 64, generator=g, dtype=torch.bfloat16)[::2]
    w = torch.randint(-128, 128, (32, 64), generator=g, dtype=torch.int8)
    s = torch.rand(32, generator=g).to(torch.bfloat16)
    cpu = aten._weight_int8pack_mm(x, w, s)
    dev = aten._weight_int8pack_mm(x.to(DEV), w.to(DEV), s.to(DEV))
    _assert_matmul_close(dev, cpu, x, w.float().abs() * s.float()[:, None], torch.bfloat16)


# ------------------------------------------------------------ a quantized Linear


class _Int4Linear(torch.nn.Module):
    """nn.Linear quantized as torchao's int4 weight-only (Int4CPULayout)."""

    def __init__(self, linear, group, dtype):
        super().__init__()
        q, scales, zeros = _int4_qparams(linear.weight.detach(), group)
        self.group, self.out_features = group, linear.out_features
        self.register_buffer("packed", aten._convert_weight_to_int4pack_for_cpu(q, 8))
        self.register_buffer("sz", _scales_and_zeros(scales, zeros, dtype))
        self.register_buffer("bias", linear.bias.detach().to(dtype))

    def forward(self, x):
        y = aten._weight_int4pack_mm_for_cpu(x.reshape(-1, x.shape[-1]), self.packed, self.group, self.sz)
        return y.reshape(*x.shape[:-1], self.out_features) + self.bias


class _Int8Linear(torch.nn.Module):
    """nn.Linear quantized as torchao's int8 weight-only (per-row scales)."""

    def __init__(self, linear, dtype):
        super().__init__()
        w = linear.weight.detach()
        scales = w.abs().amax(dim=1).clamp(min=1e-6) / 127
        self.register_buffer("w", (w / scales[:, None]).round().clamp(-128, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(dtype))
        self.register_buffer("bias", linear.bias.detach().to(dtype))
        self.out_features = linear.out_features

    def forward(self, x):
        y = aten._weight_int8pack_mm(x.reshape(-1, x.shape[-1]), self.w, self.scales)
        return y.reshape(*x.shape[:-1], self.out_features) + self.bias


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", ["int4", "int8"])
def test_quantized_linear(kind, dtype):
    torch.manual_seed(0)
    linear = torch.nn.Linear(256, 96)
    x = torch.randn(2, 3, 256).to(dtype)
    ref = linear.to(dtype)(x).float()
    q = _Int4Linear(linear.float(), 64, dtype) if kind == "int4" else _Int8Linear(linear.float(), dtype)
    cpu = q(x)
    dev = q.to(DEV)(x.to(DEV))
    assert dev.device.type == DEV and dev.dtype == dtype and dev.shape == cpu.shape
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(dev.cpu(), cpu, atol=tol, rtol=tol)
    # and it is a quantization of the layer
    assert (cpu.float() - ref).abs().max() < (0.35 if kind == "int4" else 0.05)


@pytest.mark.parametrize("how", ["fused", "debug", "compile"])
def test_quantized_linear_modes(how):
    """The same programs in the other eager modes and in a compiled graph
    (the glue packs the CPU layout into every path's calls)."""
    import torchtpu
    torch.manual_seed(1)
    linear = torch.nn.Linear(128, 64)
    x = torch.randn(3, 128).to(torch.bfloat16)
    q4, q8 = _Int4Linear(linear, 32, torch.bfloat16), _Int8Linear(linear, torch.bfloat16)

    def f(x):
        return q4(x) + q8(x)

    cpu = f(x)
    q4.to(DEV), q8.to(DEV)
    if how == "compile":
        dev = torch.compile(f, backend="tpu")(x.to(DEV))
    else:
        with torchtpu.set_eager_mode(how):
            dev = f(x.to(DEV))
            torch.tpu.synchronize()
    torch.testing.assert_close(dev.cpu(), cpu, atol=2e-2, rtol=2e-2)


# ------------------------------------------------------------ errors


def _bf(*shape):
    return torch.randn(*shape).to(torch.bfloat16)


_W = torch.randint(0, 16, (64, 128), dtype=torch.int32)
_P = aten._convert_weight_to_int4pack_for_cpu(_W, 2)
_SZ = torch.randn(4, 64, 2).to(torch.bfloat16)
_I8 = torch.randint(-128, 127, (64, 128), dtype=torch.int8)
_S8 = torch.randn(64).to(torch.bfloat16)

_BAD = {
    "convert 1d": lambda d: aten._convert_weight_to_int4pack_for_cpu(torch.zeros(8, dtype=torch.int32, device=d), 2),
    "convert float": lambda d: aten._convert_weight_to_int4pack_for_cpu(_W.float().to(d), 2),
    "convert N": lambda d: aten._convert_weight_to_int4pack_for_cpu(_W[:40].to(d), 2),
    "convert K": lambda d: aten._convert_weight_to_int4pack_for_cpu(_W[:, :7].to(d), 2),
    "mm A int": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).int().to(d), _P.to(d), 32, _SZ.to(d)),
    "mm A 1d": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(128).to(d), _P.to(d), 32, _SZ.to(d)),
    "mm A 3d": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(1, 3, 128).to(d), _P.to(d), 32, _SZ.to(d)),
    "mm A noncontig": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(128, 3).to(d).t(), _P.to(d), 32, _SZ.to(d)),
    "mm K": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 256).to(d), _P.to(d), 32, _SZ.to(d)),
    "mm B int8": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.to(torch.int8).to(d), 32, _SZ.to(d)),
    "mm B noncontig": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.t().contiguous().to(d).t(), 32, _SZ.to(d)),
    "mm group": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.to(d), 16, _SZ.to(d)),
    "mm sz shape": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.to(d), 32, _SZ[:, :32].to(d)),
    "mm K % group": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.to(d), 256, _SZ.to(d)),
    "mm sz dtype": lambda d: aten._weight_int4pack_mm_for_cpu(_bf(3, 128).to(d), _P.to(d), 32, _SZ.float().to(d)),
    "int8 A 3d": lambda d: aten._weight_int8pack_mm(_bf(1, 3, 128).to(d), _I8.to(d), _S8.to(d)),
    "int8 A int": lambda d: aten._weight_int8pack_mm(_bf(3, 128).int().to(d), _I8.to(d), _S8.to(d)),
    "int8 A last dim": lambda d: aten._weight_int8pack_mm(_bf(128, 3).to(d).t(), _I8.to(d), _S8.to(d)),
    "int8 B uint8": lambda d: aten._weight_int8pack_mm(_bf(3, 128).to(d), _I8.to(torch.uint8).to(d), _S8.to(d)),
    "int8 B noncontig": lambda d: aten._weight_int8pack_mm(_bf(3, 128).to(d), _I8.t().contiguous().to(d).t(), _S8.to(d)),
    "int8 K": lambda d: aten._weight_int8pack_mm(_bf(3, 64).to(d), _I8.to(d), _S8.to(d)),
    "int8 scales": lambda d: aten._weight_int8pack_mm(_bf(3, 128).to(d), _I8.to(d), _S8[:32].to(d)),
    "int8 scales dtype": lambda d: aten._weight_int8pack_mm(_bf(3, 128).to(d), _I8.to(d), _S8.float().to(d)),
}


@pytest.mark.parametrize("case", list(_BAD))
def test_errors_as_cpu(case):
    same_error(_BAD[case])


def test_tinygemm_layout_errors():
    u8 = _tinygemm_bytes(_W).to(DEV)
    with pytest.raises(RuntimeError, match="innerKTiles need to be 2, 4, or 8, got 3"):
        aten._convert_weight_to_int4pack(u8, 3)
    with pytest.raises(RuntimeError, match="expect weight to be kByte"):
        aten._convert_weight_to_int4pack(_W.to(DEV), 2)
    packed = aten._convert_weight_to_int4pack(u8, 2)
    with pytest.raises(RuntimeError, match="expect B to be packed for K = 256"):
        aten._weight_int4pack_mm(_bf(3, 256).to(DEV), packed, 32, _SZ.to(DEV))
    with pytest.raises(RuntimeError, match="expect qGroupSize to be 32, 64, 128 or 256, got 16"):
        aten._weight_int4pack_mm(_bf(3, 128).to(DEV), packed, 16, _SZ.to(DEV))


# ------------------------------------------------------------ TPU v5e programs

_ok, _why = aot.available()


@pytest.mark.skipif(not _ok, reason=f"libtpu not installed: {_why}")
def test_programs_compile_for_v5e():
    q, sz, _ = _int4_case(256, 512, 128, torch.bfloat16, seed=1)
    x = torch.randn(8, 512).to(torch.bfloat16).to(DEV)
    w4 = aten._convert_weight_to_int4pack(_tinygemm_bytes(q).to(DEV), 8)
    w4cpu = aten._convert_weight_to_int4pack_for_cpu(q, 8).to(DEV)
    w8 = torch.randint(-128, 128, (256, 512), dtype=torch.int8).to(DEV)
    s8 = torch.rand(256).to(torch.bfloat16).to(DEV)
    szd = sz.to(DEV)

    def step(x, w4, w4cpu, szd, w8, s8):
        y = aten._weight_int4pack_mm(x, w4, 128, szd)
        y = y + aten._weight_int4pack_mm_for_cpu(x, w4cpu, 128, szd)
        y = y + aten._weight_int8pack_mm(x, w8, s8)
        y.sum().item()

    r = aot.compile_for(step, (x, w4, w4cpu, szd, w8, s8), topology="v5e:2x2", replicas=1)
    names = [p.name for p in r.programs]
    for op in ("_weight_int4pack_mm-", "_weight_int4pack_mm_for_cpu-", "_weight_int8pack_mm-"):
        assert any(n.startswith(op) for n in names), names
    assert not r.failures
