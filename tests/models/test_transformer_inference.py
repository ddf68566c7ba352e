"""nn.TransformerEncoderLayer / nn.MultiheadAttention in eval mode under
no_grad take PyTorch's fused inference kernels (_transformer_encoder_layer_fwd,
_native_multi_head_attention); on tpu they match the CPU."""
import pytest
import torch

import torchtpu  # noqa: F401

KPM = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
CAUSAL = torch.nn.Transformer.generate_square_subsequent_mask(5)
MASKS = {"none": {}, "padding": {"src_key_padding_mask": KPM}, "causal": {"mask": CAUSAL},
         "both": {"mask": CAUSAL, "src_key_padding_mask": KPM}}


def on_tpu(kw):
    return {k: v.to("tpu") if torch.is_tensor(v) else v for k, v in kw.items()}


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
@pytest.mark.parametrize("masks", list(MASKS))
def test_encoder_inference_matches_cpu(norm_first, activation, masks):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first,
                                             activation=activation)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        ref = enc(x, **MASKS[masks])
        got = enc.to("tpu")(x.to("tpu"), **on_tpu(MASKS[masks]))
    torch.testing.assert_close(got.cpu(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"key_padding_mask": KPM}, {"need_weights": False},
                                {"average_attn_weights": False},
                                {"key_padding_mask": torch.tensor([[True] * 5, [False] * 5])}])
def test_self_attention_inference_matches_cpu(kw):
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        ref = mha(x, x, x, **kw)
        xt = x.to("tpu")
        got = mha.to("tpu")(xt, xt, xt, **on_tpu(kw))
    torch.testing.assert_close(got[0].cpu(), ref[0], atol=1e-5, rtol=1e-5, equal_nan=True)
    if ref[1] is None:
        assert got[1] is None
    else:
        torch.testing.assert_close(got[1].cpu(), ref[1], atol=1e-5, rtol=1e-5, equal_nan=True)


def test_fused_attention_checks_shapes_like_cpu():
    w, b = torch.randn(96, 32), torch.randn(96)
    pw, pb = torch.randn(32, 32), torch.randn(32)
    x = torch.randn(5, 32)  # not batched
    args = (32, 4, w, b, pw, pb)
    with pytest.raises(RuntimeError):
        torch._native_multi_head_attention(x, x, x, *args)
    with pytest.raises(RuntimeError):
        torch._native_multi_head_attention(*(t.to("tpu") for t in (x, x, x)), 32, 4,
                                           *(t.to("tpu") for t in (w, b, pw, pb)))
