"""_native_multi_head_attention and _transformer_encoder_layer_fwd, the fused
inference kernels of nn.MultiheadAttention and nn.TransformerEncoderLayer,
lowered by the engine (ops/attention.c): called directly and through the
modules, against the CPU, with every mask type, with and without weights,
both activations, pre- and post-norm, float32 and bfloat16, and the same
results in every eager mode."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

B, T, E, H, FFN = 2, 5, 16, 4, 24

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=4e-2, rtol=4e-2)}


@pytest.fixture(autouse=True)
def strict_after():
    yield
    torchtpu.set_eager_mode("strict")
    torch.tpu.synchronize()


def tpu(x):
    return x.to("tpu") if torch.is_tensor(x) else x


def assert_close(got, ref, dtype):
    if ref is None:
        assert got is None
        return
    assert got.device.type == "tpu" and got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True, **TOL[dtype])


def weights(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.3).to(dtype)  # noqa: E731
    return dict(qkv_w=r(3 * E, E), qkv_b=r(3 * E), proj_w=r(E, E), proj_b=r(E),
                n1w=1 + r(E), n1b=r(E), n2w=1 + r(E), n2b=r(E),
                f1w=r(FFN, E), f1b=r(FFN), f2w=r(E, FFN), f2b=r(E))


def src(dtype, seed=1):
    return torch.randn(B, T, E, generator=torch.Generator().manual_seed(seed)).to(dtype)


def make_mask(kind, dtype):
    """(mask, mask_type) as the modules pass them: bool masks or float masks
    (nonzero masks), key padding (1), attention (0) or merged (2)."""
    if kind == "none":
        return None, None
    if kind.startswith("padding"):
        m = torch.zeros(B, T, dtype=torch.bool)
        m[1, 3:] = True
        mt = 1
    elif kind.startswith("attn"):
        m = torch.ones(T, T, dtype=torch.bool).triu(1)
        mt = 0
    else:  # merged
        m = torch.ones(T, T, dtype=torch.bool).triu(1).expand(B, H, T, T).clone()
        m[1, :, :, 4] = True
        m[0, 2, 1, 0] = True
        mt = 2
    if kind.endswith("float"):
        m = torch.zeros(m.shape, dtype=dtype).masked_fill(m, float("-inf"))
    return m, mt


MASKS = ["none", "padding", "padding_float", "attn", "attn_float", "merged", "merged_float"]
DTYPES = [torch.float32, torch.bfloat16]


def mha(x, w, mask, mt, need_weights, average, dev=lambda t: t):
    return torch._native_multi_head_attention(
        dev(x), dev(x), dev(x), E, H, dev(w["qkv_w"]), dev(w["qkv_b"]), dev(w["proj_w"]),
        dev(w["proj_b"]), dev(mask), need_weights, average, mt)


def encoder(x, w, use_gelu, norm_first, mask, mt, dev=lambda t: t):
    return torch._transformer_encoder_layer_fwd(
        dev(x), E, H, dev(w["qkv_w"]), dev(w["qkv_b"]), dev(w["proj_w"]), dev(w["proj_b"]),
        use_gelu, norm_first, 1e-5, dev(w["n1w"]), dev(w["n1b"]), dev(w["n2w"]), dev(w["n2b"]),
        dev(w["f1w"]), dev(w["f1b"]), dev(w["f2w"]), dev(w["f2b"]), dev(mask), mt)


def test_engine_lowers_both():
    for name in ("_native_multi_head_attention", "_transformer_encoder_layer_fwd"):
        assert name in torchtpu._C._engine_ops()
        assert name in torchtpu.registered_ops


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_multi_head_attention_matches_cpu(dtype, kind, need_weights, average):
    w, x = weights(dtype), src(dtype)
    mask, mt = make_mask(kind, dtype)
    ref = mha(x, w, mask, mt, need_weights, average)
    got = mha(x, w, mask, mt, need_weights, average, tpu)
    assert_close(got[0], ref[0], dtype)
    assert_close(got[1], ref[1], dtype)
    if need_weights:
        assert got[1].shape == ((B, T, T) if average else (B, H, T, T))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask_type", [0, 1])
def test_fully_masked_row_is_nan_as_on_cpu(dtype, mask_type):
    w, x = weights(dtype), src(dtype)
    if mask_type == 1:
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[1] = True  # every key of the second sequence
    else:
        mask = torch.zeros(T, T, dtype=torch.bool)
        mask[2] = True  # every key for query 2
    ref = mha(x, w, mask, mask_type, True, True)
    got = mha(x, w, mask, mask_type, True, True, tpu)
    assert ref[0].isnan().any()
    assert torch.equal(got[0].cpu().isnan(), ref[0].isnan())
    assert_close(got[0], ref[0], dtype)
    assert_close(got[1], ref[1], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("kind", ["none", "padding", "attn_float", "merged_float"])
def test_encoder_layer_matches_cpu(dtype, norm_first, use_gelu, kind):
    w, x = weights(dtype), src(dtype)
    mask, mt = make_mask(kind, dtype)
    ref = encoder(x, w, use_gelu, norm_first, mask, mt)
    got = encoder(x, w, use_gelu, norm_first, mask, mt, tpu)
    assert_close(got, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kw", [{}, {"average_attn_weights": False}, {"need_weights": False},
                                {"key_padding_mask": "padding"}, {"attn_mask": "causal"}])
def test_multihead_attention_module_matches_cpu(dtype, batch_first, kw):
    torch.manual_seed(2)
    mod = torch.nn.MultiheadAttention(E, H, batch_first=batch_first).eval().to(dtype)
    x = src(dtype)
    if not batch_first:
        x = x.transpose(0, 1)
    kw = dict(kw)
    if kw.get("key_padding_mask") == "padding":
        kw["key_padding_mask"] = make_mask("padding", dtype)[0]
    if kw.get("attn_mask") == "causal":
        kw["attn_mask"] = make_mask("attn", dtype)[0]
    with torch.no_grad():
        ref = mod(x, x, x, **kw)
        xt = x.to("tpu")
        got = mod.to("tpu")(xt, xt, xt, **{k: tpu(v) for k, v in kw.items()})
    assert_close(got[0], ref[0], dtype)
    assert_close(got[1], ref[1], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_encoder_layer_module_matches_cpu(dtype, batch_first, norm_first, activation):
    torch.manual_seed(3)
    layer = torch.nn.TransformerEncoderLayer(E, H, FFN, batch_first=batch_first,
                                             norm_first=norm_first, activation=activation)
    layer = layer.eval().to(dtype)
    x = src(dtype)
    if not batch_first:
        x = x.transpose(0, 1)
    pad = make_mask("padding", dtype)[0]
    with torch.no_grad():
        ref = layer(x, src_key_padding_mask=pad)
        got = layer.to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    assert_close(got, ref, dtype)


def test_weights_shape_follows_key_length():
    """Cross attention (source length S != L): the weights are (B, L, S)."""
    w = weights(torch.float32)
    q, kv = src(torch.float32), torch.randn(B, 7, E)
    out, p = torch._native_multi_head_attention(
        *(t.to("tpu") for t in (q, kv, kv)), E, H,
        *(w[k].to("tpu") for k in ("qkv_w", "qkv_b", "proj_w", "proj_b")))
    assert out.shape == (B, T, E) and p.shape == (B, T, 7)
    # Against the math spelled out on the CPU.
    wq, wk, wv = w["qkv_w"].chunk(3)
    bq, bk, bv = w["qkv_b"].chunk(3)
    split = lambda t: t.view(B, -1, H, E // H).transpose(1, 2)  # noqa: E731
    qh, kh, vh = split(F.linear(q, wq, bq)), split(F.linear(kv, wk, bk)), split(F.linear(kv, wv, bv))
    pr = torch.softmax(qh @ kh.transpose(-2, -1) / (E // H) ** 0.5, -1)
    ref = F.linear((pr @ vh).transpose(1, 2).reshape(B, T, E), w["proj_w"], w["proj_b"])
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(p.cpu(), pr.mean(1), atol=1e-5, rtol=1e-5)


def test_bad_arguments_raise_like_cpu():
    w = weights(torch.float32)
    x = src(torch.float32)
    args = [w[k].to("tpu") for k in ("qkv_w", "qkv_b", "proj_w", "proj_b")]
    xt = x.to("tpu")
    with pytest.raises(RuntimeError):  # 2-d query
        torch._native_multi_head_attention(xt[0], xt[0], xt[0], E, H, *args)
    with pytest.raises(RuntimeError):  # embed_dim not divisible by the heads
        torch._native_multi_head_attention(xt, xt, xt, E, 3, *args)
    with pytest.raises(RuntimeError):  # key padding mask of the wrong length
        torch._native_multi_head_attention(xt, xt, xt, E, H, *args,
                                           torch.zeros(B, T + 1, dtype=torch.bool, device="tpu"),
                                           True, True, 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_same_results_in_every_mode(dtype):
    w, x = weights(dtype), src(dtype)
    mask, mt = make_mask("merged_float", dtype)
    pad, pmt = make_mask("padding", dtype)
    results = {}
    for mode in ("strict", "fused", "debug"):
        with torchtpu.set_eager_mode(mode):
            a = mha(x, w, mask, mt, True, False, tpu)
            b = encoder(x, w, True, False, pad, pmt, tpu)
            c = encoder(x, w, False, True, mask, mt, tpu)
            results[mode] = [t.cpu() for t in (a[0], a[1], b, c)]
    ref = [mha(x, w, mask, mt, True, False)[0], mha(x, w, mask, mt, True, False)[1],
           encoder(x, w, True, False, pad, pmt), encoder(x, w, False, True, mask, mt)]
    for mode, got in results.items():
        for g, r, s in zip(got, ref, results["strict"]):
            assert torch.equal(g.isnan(), s.isnan()), mode
            torch.testing.assert_close(g, s, atol=0, rtol=0, equal_nan=True)
            torch.testing.assert_close(g, r, equal_nan=True, **TOL[dtype])
