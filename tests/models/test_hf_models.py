"""Hugging Face transformers models that stopped on missing ops, against
the CPU from small configs: MoE decoders (Mixtral, Qwen2-MoE: their expert
routing counts tokens with histc on integers) and wav2vec2 (its positional
convolution is weight-normalized): forward, backward, an optimizer step and,
for the decoders, greedy generate()."""
import copy

import pytest
import torch

import torchtpu  # noqa: F401

transformers = pytest.importorskip("transformers")


def _mixtral():
    cfg = transformers.MixtralConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2)
    return transformers.MixtralForCausalLM(cfg)


def _qwen2_moe():
    cfg = transformers.Qwen2MoeConfig(vocab_size=100, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                                      num_experts_per_tok=2)
    return transformers.Qwen2MoeForCausalLM(cfg)


def _wav2vec2():
    cfg = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                      conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                      num_conv_pos_embedding_groups=2)
    return transformers.Wav2Vec2Model(cfg)


# AdamW turns a gradient that is rounding noise around zero (wav2vec2 has
# such: its group norm makes some weights' gradients cancel) into a full
# step of either sign; SGD there.
MODELS = {
    "mixtral": (_mixtral, lambda: {"input_ids": torch.randint(0, 100, (2, 12))}, "logits", torch.optim.AdamW),
    "qwen2_moe": (_qwen2_moe, lambda: {"input_ids": torch.randint(0, 100, (2, 12))}, "logits", torch.optim.AdamW),
    "wav2vec2": (_wav2vec2, lambda: {"input_values": torch.randn(2, 400)}, "last_hidden_state", torch.optim.SGD),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_cpu(name):
    make, inputs, key, optimizer = MODELS[name]
    torch.manual_seed(0)
    ref = make().train(False)
    ours = copy.deepcopy(ref).to("tpu")
    opt_ref = optimizer(ref.parameters(), lr=1e-3)
    opt = optimizer(ours.parameters(), lr=1e-3)
    for _ in range(2):
        x = inputs()
        out_ref = getattr(ref(**x), key)
        out = getattr(ours(**{k: v.to("tpu") for k, v in x.items()}), key)
        torch.testing.assert_close(out.detach().cpu(), out_ref.detach(), rtol=1e-4, atol=1e-5)
        for o, m, p in ((out_ref, ref, opt_ref), (out, ours, opt)):
            p.zero_grad()
            o.float().pow(2).mean().backward()
            p.step()
    for (n, a), b in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5, msg=n)
    if key == "logits":
        prompt = torch.randint(0, 100, (1, 5))
        want = ref.generate(prompt, max_new_tokens=6, do_sample=False)
        got = ours.generate(prompt.to("tpu"), max_new_tokens=6, do_sample=False)
        assert got.cpu().tolist() == want.tolist()
