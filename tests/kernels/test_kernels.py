"""torchtpu.jax_op: JAX functions and Pallas kernels as ops on tpu tensors,
against PyTorch's CPU results, in every mode, with autograd, and compiled
for TPU topologies through libtpu."""
import sys

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from _proc import ROOT, run_script

jax = pytest.importorskip("jax")
jnp = jax.numpy

try:
    import torchtpu.aot as aot
    _ok, _why = aot.available()
except Exception as e:  # pragma: no cover
    _ok, _why = False, str(e)
needs_libtpu = pytest.mark.skipif(not _ok, reason=f"libtpu not installed: {_why}")


@pytest.fixture
def mode(request):
    old = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(request.param)
    yield request.param
    torchtpu.set_eager_mode(old)


@torchtpu.jax_op
def mlp(x, w1, w2):
    return jnp.dot(jax.nn.gelu(x @ w1, approximate=False), w2)


def mlp_ref(x, w1, w2):
    return F.gelu(x @ w1) @ w2


@torchtpu.jax_op
def two_outputs(x, axis):
    return jnp.tanh(x), x.sum(axis=axis)


def tpu(*ts, grad=False):
    out = [t.detach().to("tpu").requires_grad_(grad) for t in ts]
    return out[0] if len(out) == 1 else out


# ------------------------------------------------------------- forward


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"], indirect=True)
def test_forward_matches_cpu(mode):
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(6, 8), torch.randn(8, 16), torch.randn(16, 4)
    y = mlp(*tpu(x, w1, w2)) * 2 + 1
    torch.testing.assert_close(y.cpu(), mlp_ref(x, w1, w2) * 2 + 1, rtol=1e-5, atol=1e-5)


def test_views_statics_and_tuples():
    torch.manual_seed(0)
    base = torch.randn(10, 12)
    view = tpu(base)[1:9:2, ::3]  # non-contiguous, offset
    assert not view.is_contiguous()
    t, s = two_outputs(view, 0)
    torch.testing.assert_close(t.cpu(), torch.tanh(base[1:9:2, ::3]))
    torch.testing.assert_close(s.cpu(), base[1:9:2, ::3].sum(0))
    _, s1 = two_outputs(view, 1)  # a new static value is a new lowering
    torch.testing.assert_close(s1.cpu(), base[1:9:2, ::3].sum(1))
    # a transposed view
    tt, _ = two_outputs(tpu(base).t(), 0)
    torch.testing.assert_close(tt.cpu(), torch.tanh(base.t()))

    # statics are typed: 2 and 2.0 are two lowerings
    scale = torchtpu.jax_op(lambda x, k: x * k)
    i = tpu(torch.arange(4, dtype=torch.int32))
    assert scale(i, 2).dtype == torch.int32 and scale(i, 2.0).dtype == torch.float32
    torch.testing.assert_close(scale(i, 2.0).cpu(), torch.arange(4) * 2.0)
    # 64-bit inputs lower with JAX's x64 mode on, where a Python float is float64
    assert scale(tpu(torch.arange(4)), 2.0).dtype == torch.float64


def test_the_lowering_cache_keeps_no_tensor_alive():
    import gc
    import weakref

    x = tpu(torch.randn(7, 3))
    ref = weakref.ref(x)
    two_outputs(x, 1)[0].sum().item()
    y = tpu(torch.randn(7, 3), grad=True)
    yref = weakref.ref(y)
    two_outputs(y, 1)[1].sum().backward()
    del x, y
    gc.collect()
    assert ref() is None and yref() is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64,
                                   torch.int64, torch.int32, torch.bool, torch.complex64])
def test_dtypes(dtype):
    @torchtpu.jax_op
    def f(a, b):
        return a * b + a

    if dtype.is_floating_point or dtype.is_complex:
        a, b = torch.randn(5, 3).to(dtype), torch.randn(5, 3).to(dtype)
    elif dtype == torch.bool:
        a, b = torch.rand(5, 3) > 0.5, torch.rand(5, 3) > 0.5
    else:
        a, b = torch.randint(-50, 50, (5, 3), dtype=dtype), torch.randint(-50, 50, (5, 3), dtype=dtype)
    got = f(*tpu(a, b))
    assert got.dtype == (a * b + a).dtype
    # XLA may keep a half-precision product in float32 before the add
    # (JAX's own result on its CPU backend is the same); PyTorch rounds it.
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(got.cpu(), a * b + a, **tol)


def test_out_writes_into_a_view():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    dst = torch.zeros(4, 12, device="tpu")
    keep = dst.clone()
    view = dst[:, ::2]
    t_out, s_out = torch.empty(4, 6, device="tpu"), torch.empty(6, device="tpu")
    two_outputs(tpu(x), 0, out=(view, s_out))
    torch.testing.assert_close(dst[:, ::2].cpu(), torch.tanh(x))
    torch.testing.assert_close(dst[:, 1::2].cpu(), keep[:, 1::2].cpu())
    torch.testing.assert_close(s_out.cpu(), x.sum(0))
    with pytest.raises(ValueError, match=r"out\[0\] is torch.float32\[4, 5\]"):
        two_outputs(tpu(x), 0, out=(torch.empty(4, 5, device="tpu"), s_out))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        two_outputs(tpu(x, grad=True), 0, out=(t_out, s_out))


def test_in_place_op_on_the_result_and_the_input_view():
    x = torch.randn(3, 4)
    a = tpu(x)
    y = mlp(a, *tpu(torch.eye(4), torch.eye(4)))
    y.add_(1)
    a[0].mul_(0)  # the input changes after the call: the result must not
    torch.testing.assert_close(y.cpu(), F.gelu(x) + 1, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------ autograd


@pytest.mark.parametrize("mode", ["strict", "fused"], indirect=True)
def test_backward_through_vjp(mode):
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(6, 8), torch.randn(8, 16), torch.randn(16, 4)
    xt, w1t, w2t = tpu(x, w1, w2, grad=True)
    (mlp(xt, w1t, w2t) ** 2).sum().backward()
    xc, w1c, w2c = (t.clone().requires_grad_() for t in (x, w1, w2))
    (mlp_ref(xc, w1c, w2c) ** 2).sum().backward()
    for a, b in ((xt, xc), (w1t, w1c), (w2t, w2c)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore:torchtpu.*recompiled")  # gradcheck's perturbed copies
def test_gradcheck_float64():
    @torchtpu.jax_op
    def f(x, y, scale):
        return jnp.sin(x) * y * scale, jnp.exp(x - y).sum()

    x = torch.randn(3, 4, dtype=torch.float64, device="tpu", requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, device="tpu", requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: f(a, b, 0.5), (x, y))


def test_integer_inputs_and_outputs_take_no_gradient():
    @torchtpu.jax_op
    def f(x, idx):
        return x[idx] * 2, idx + 1

    x = tpu(torch.randn(5), grad=True)
    idx = tpu(torch.tensor([4, 0, 2]))
    y, j = f(x, idx)
    assert not j.requires_grad
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.tensor([2.0, 0.0, 2.0, 0.0, 2.0]))


def test_user_backward():
    calls = []

    def bwd(x, k, g):
        calls.append(1)
        return (g * 3.0,)  # deliberately not the true gradient: it must be used

    f = torchtpu.jax_op(lambda x, k: x * k, backward=bwd)
    x = tpu(torch.randn(4), grad=True)
    f(x, 2.0).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((4,), 3.0))
    assert calls  # traced by JAX


def test_unused_output_gets_a_zero_gradient():
    x = tpu(torch.randn(3, 4), grad=True)
    t, _ = two_outputs(x, 0)
    t.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), 1 - torch.tanh(x.detach().cpu()) ** 2)


# ------------------------------------------------------------ compiled


def test_compiled_one_graph_no_break_and_replay():
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    w1t, w2t = tpu(w1, w2, grad=True)

    def step(x):
        return (mlp(x + 1, w1t, w2t) ** 2).mean()

    explain = torch._dynamo.explain(step)(tpu(torch.randn(6, 8)))
    assert explain.graph_count == 1 and explain.graph_break_count == 0, explain
    torch._dynamo.reset()
    compiled = torch.compile(step, backend="tpu")
    for i in range(3):
        x = torch.randn(6, 8)
        w1t.grad = w2t.grad = None
        loss = compiled(tpu(x))
        loss.backward()
        w1c, w2c = w1.clone().requires_grad_(), w2.clone().requires_grad_()
        ref = (mlp_ref(x + 1, w1c, w2c) ** 2).mean()
        ref.backward()
        torch.testing.assert_close(loss.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(w1t.grad.cpu(), w1c.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(w2t.grad.cpu(), w2c.grad, rtol=1e-4, atol=1e-4)


def test_fused_window_holds_the_call():
    old = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("fused")
    try:
        x, w = torch.randn(5, 7), torch.randn(7, 3)
        xt, wt = tpu(x, w)
        torchtpu.flush()
        torchtpu.debug.compiles(clear=True)  # a full log (a ring) would show nothing new
        y = mlp(xt * 3, wt, tpu(torch.eye(3))) - 1
        got = y.cpu()
        new = torchtpu.debug.compiles()
        assert [c["what"] for c in new if "window" not in c["what"]] == []
    finally:
        torchtpu.set_eager_mode(old)
    torch.testing.assert_close(got, F.gelu((x * 3) @ w) - 1, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- Pallas


def _pallas_axpy():
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + y_ref[...]

    @torchtpu.jax_op
    def axpy(x, y):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // 8,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))(x, y)

    return axpy


def test_pallas_kernel_in_interpret_mode():
    assert torchtpu.kernels.pallas_interpret("cpu") and not torchtpu.kernels.pallas_interpret("tpu")
    assert torchtpu.kernels.pallas_interpret() == (torchtpu.kernels.lowering_platform() != "tpu")
    axpy = _pallas_axpy()
    x, y = torch.randn(24, 128), torch.randn(24, 128)
    torch.testing.assert_close(axpy(*tpu(x, y)).cpu(), 2 * x + y)


@needs_libtpu
def test_mosaic_kernel_compiles_for_v5e():
    """The program holds the interpret-mode loop on the CPU plugin; for the
    TPU compile it carries the Mosaic kernel (a tpu_custom_call)."""
    r = run_script("""
        import torch, torchtpu, torchtpu.aot as aot, jax
        from jax.experimental import pallas as pl
        def kernel(x_ref, y_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0 + y_ref[...]
        @torchtpu.jax_op
        def axpy(x, y):
            return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                cost_estimate=pl.CostEstimate(flops=2 * x.size, transcendentals=0,
                                              bytes_accessed=3 * 4 * x.size))(x, y)
        x, y = torch.randn(64, 256, device="tpu"), torch.randn(64, 256, device="tpu")
        progs = aot.capture_programs(lambda: axpy(x, y).cpu(), steps=1).programs
        ext = [p for p in progs if "extern_call" in p[0]]
        assert len(ext) == 1, progs
        text = ext[0][1]
        assert "tpu_custom_call" not in text
        assert "tpu_custom_call" in torchtpu.kernels.retarget(text, "tpu")
        r = aot.compile_programs(ext, "v5e:2x2", replicas=1)
        assert not r.failures, r.failures
        p = r.programs[0]
        print("OK", p.flops, p.argument_bytes, p.output_bytes)
    """, timeout=180, TORCHTPU_CACHE_DIR="")
    assert r.returncode == 0, r.stderr[-3000:]
    flops, args, outs = map(float, r.stdout.split("OK", 1)[1].split())
    assert flops == 2 * 64 * 256 and args == 2 * 4 * 64 * 256 and outs == 4 * 64 * 256


# ---------------------------------------------------- flash attention


def test_flash_attention_matches_sdpa_forward_and_backward():
    torch.manual_seed(0)
    from support.kernels import flash_attention

    attention = flash_attention()
    q, k, v, g = (torch.randn(2, 2, 128, 64) for _ in range(4))
    qt, kt, vt = tpu(q, k, v, grad=True)
    out = attention(qt, kt, vt)
    (out * g.to("tpu")).sum().backward()
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    (ref * g).sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    for a, b in ((qt, qc), (kt, kc), (vt, vc)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-4)


def test_llama_with_flash_attention_trains_like_sdpa():
    from support.kernels import flash_attention, llama_pair

    ref, model, losses = llama_pair(flash_attention(), steps=2)
    for loss_ref, loss in losses:
        torch.testing.assert_close(loss, loss_ref, rtol=1e-4, atol=1e-4)
    for (n, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-3, atol=1e-4, msg=n)


@needs_libtpu
def test_llama_step_with_flash_attention_compiles_for_v5e_and_v6e():
    r = run_script("""
        import torch, torchtpu, torchtpu.aot as aot
        from support.kernels import flash_attention
        from support.llama import Llama
        model = Llama(128, d=128, layers=2, heads=2, block=128, attention=flash_attention())
        idx, tgt = torch.randint(0, 128, (2, 128)), torch.randint(0, 128, (2, 128))
        for rep in aot.compile_for(model, (idx, tgt), ["v5e:2x2", "v6e:2x2"]):
            ext = [p for p in rep.programs if "extern_call" in p.name]
            assert not rep.failures and len(ext) == 2, (rep.failures, [p.name for p in rep.programs])
            # the Mosaic kernels' own cost estimates: forward and backward
            assert all(p.flops > 1e7 for p in ext), [(p.name, p.flops) for p in ext]
            print(rep.topology, len(rep.programs), [round(p.flops) for p in ext])
    """, timeout=300, TORCHTPU_CACHE_DIR="")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "v5e:2x2" in r.stdout and "v6e:2x2" in r.stdout


# -------------------------------------------------------------- errors


def test_shape_error_names_the_function():
    @torchtpu.jax_op
    def bad_matmul(a, b):
        return a @ b

    with pytest.raises(TypeError, match=r"jax_op\(.*bad_matmul\).*dot_general"):
        bad_matmul(*tpu(torch.randn(3, 4), torch.randn(5, 6)))


def test_non_array_output():
    @torchtpu.jax_op
    def gives_dict(a):
        return {"y": a}

    with pytest.raises(TypeError, match=r"jax_op\(.*gives_dict\): the function must return an array"):
        gives_dict(tpu(torch.randn(3)))

    @torchtpu.jax_op
    def gives_none(a):
        return None

    with pytest.raises(TypeError, match=r"returned no array"):
        gives_none(tpu(torch.randn(3)))

    @torchtpu.jax_op
    def gives_string(a):
        return "y"

    with pytest.raises(TypeError, match=r"jax_op\(.*gives_string\)"):
        gives_string(tpu(torch.randn(3)))


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"tensor argument 0 is on cpu"):
        mlp(torch.randn(2, 2), *tpu(torch.randn(2, 2), torch.randn(2, 2)))
    with pytest.raises(TypeError, match="must be hashable"):
        two_outputs(tpu(torch.randn(2, 2)), [0])
    with pytest.raises(TypeError, match="expected a function"):
        torchtpu.jax_op(3)
    with pytest.raises(TypeError, match="at least one tpu tensor"):
        torchtpu.jax_op(lambda: jnp.ones(3))()
    with pytest.raises(TypeError, match="w2= must be passed positionally"):
        mlp(torch.ones(2, 2, device="tpu"), torch.ones(2, 2, device="tpu"),
            w2=torch.ones(2, 2, device="tpu"))
    # the process stays usable
    torch.testing.assert_close(two_outputs(tpu(torch.ones(2, 2)), 0)[1].cpu(), torch.full((2,), 2.0))


def test_jax_missing_raises_import_error_naming_the_extra():
    r = run_script("""
        import sys
        sys.modules["jax"] = None  # as if JAX were not installed
        import torch, torchtpu
        try:
            torchtpu.jax_op(lambda x: x)
        except ImportError as e:
            print("IMPORT-ERROR", e)
        print("still usable", (torch.ones(2, device="tpu") + 1).cpu().tolist())
    """, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "IMPORT-ERROR" in r.stdout and "torchtpu[kernels]" in r.stdout
    assert "still usable [2.0, 2.0]" in r.stdout


def test_jax_stays_on_its_cpu_backend():
    r = run_script("""
        import torch, torchtpu, jax
        f = torchtpu.jax_op(lambda x: x + 1)
        y = f(torch.ones(3, device="tpu"))
        print("PLATFORMS", jax.config.jax_platforms, [d.platform for d in jax.devices()])
        print("OK", y.cpu().tolist(), (torch.ones(3, device="tpu") * 2).cpu().tolist())
    """, timeout=60, JAX_PLATFORMS="")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "PLATFORMS cpu ['cpu']" in r.stdout and "OK [2.0, 2.0, 2.0] [2.0, 2.0, 2.0]" in r.stdout


def test_complex_gradients_follow_pytorch():
    """PyTorch's complex gradients are the conjugates of JAX's cotangents."""
    cases = [
        (lambda z: jnp.abs(z) ** 2, lambda z: z.abs() ** 2, 1),
        (lambda z: z * z + 1j * z, lambda z: z * z + 1j * z, 1),
        (lambda z, x: jnp.real(z * x) + jnp.imag(z) * x, lambda z, x: (z * x).real + z.imag * x, 2),
        (lambda z, x: z * jnp.exp(1j * x), lambda z, x: z * torch.exp(1j * x), 2),
    ]
    torch.manual_seed(0)
    for jf, tf, n in cases:
        f = torchtpu.jax_op(jf)
        args = (torch.randn(4, dtype=torch.complex64), torch.randn(4))[:n]
        ours = tpu(*args, grad=True)
        ours = [ours] if n == 1 else ours
        ref = [a.clone().requires_grad_() for a in args]
        y, yc = f(*ours), tf(*ref)
        g = torch.randn(yc.shape, dtype=yc.dtype)
        y.backward(g.to("tpu"))
        yc.backward(g)
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a.grad.cpu(), b.grad)


@needs_libtpu
def test_fill_cache_with_a_pallas_kernel(tmp_path):
    """--fill-cache compiles the program with the Mosaic kernel, under the
    key the CPU runtime uses for the same call."""
    import os
    import subprocess

    from torchtpu import _C

    script = tmp_path / "kernel.py"
    script.write_text(
        "import torch, torchtpu, jax\n"
        "from jax.experimental import pallas as pl\n"
        "def kernel(x_ref, o_ref):\n"
        "    o_ref[...] = x_ref[...] + 1.0\n"
        "f = torchtpu.jax_op(lambda x: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))\n"
        "print('sum', float(f(torch.zeros(16, 128, device='tpu')).sum()))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    tpu_dir, cpu_dir = tmp_path / "tpu", tmp_path / "cpu"
    p = subprocess.run([sys.executable, "-m", "torchtpu.aot", "--topology", "v5e:2x2", "--fill-cache",
                        str(tpu_dir), str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sum 2048.0" in p.stdout and "compiled        torchtpu::extern_call" in p.stdout, p.stdout
    assert ", 0 failed" in p.stdout.strip().splitlines()[-1], p.stdout
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=dict(env, TORCHTPU_CACHE_DIR=str(cpu_dir)), timeout=300)
    assert p.returncode == 0, p.stderr

    def keys(root):
        out = set()
        for ns in os.listdir(root):
            for f in os.listdir(os.path.join(root, ns)):
                if not f.startswith("."):
                    out.add(tuple(_C._disk_read_entry(os.path.join(root, ns, f))["key"]))
        return out

    assert keys(tpu_dir) == keys(cpu_dir)
    # the report CLI compiles the same script's programs, the kernel's included
    p = subprocess.run([sys.executable, "-m", "torchtpu.aot", "--topology", "v6e:2x2", str(script)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "torchtpu::extern_call-" in p.stdout and " 0 failed" in p.stdout, p.stdout


def test_same_forward_text_different_gradients():
    """Two functions that lower to one text (one engine callee) keep their
    own backward: a given one, and JAX's custom_vjp rule."""
    plain = torchtpu.jax_op(lambda x: x * 2.0)
    given = torchtpu.jax_op(lambda x: x * 2.0, backward=lambda x, g: (g * 5.0,))

    @jax.custom_vjp
    def doubled(x):
        return x * 2.0

    doubled.defvjp(lambda x: (x * 2.0, None), lambda _, g: (g * 7.0,))
    custom = torchtpu.jax_op(doubled)
    for f, grad in ((plain, 2.0), (given, 5.0), (custom, 7.0), (plain, 2.0)):
        x = tpu(torch.randn(3), grad=True)
        y = f(x)
        torch.testing.assert_close(y.detach().cpu(), x.detach().cpu() * 2)
        y.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), torch.full((3,), grad))
