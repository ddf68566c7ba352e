"""Fine-tune a Hugging Face causal language model on device ``tpu``.

The model is built from a config (``LlamaConfig`` or ``GPT2Config``), so
nothing is downloaded; it learns a short text with a character-level
vocabulary, trained with AdamW for a few steps, then writes a continuation
with ``generate()``.

    pip install transformers
    python examples/hf_causal_lm.py                      # Llama, 4 layers x 128, 200 steps
    python examples/hf_causal_lm.py --model gpt2 --bf16  # GPT-2 under bf16 autocast
    python examples/hf_causal_lm.py --layers 1 --hidden 32 --steps 20   # tiny

Nothing in it is specific to ``tpu`` but the device name: ``--device cpu``
runs the same script on the CPU (Llama has no dropout, so its losses match
the CPU's; GPT-2's dropout draws from another random stream per device).
"""
import argparse
import time
import warnings

import torch

import torchtpu  # noqa: F401  (registers device "tpu"; `import torch` alone also does)
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

TEXT = (
    "The lighthouse keeper climbed the stairs at dusk and lit the lamp. "
    "Ships passed the rocks in the night and the keeper wrote their names in the log. "
    "In the morning the keeper put out the lamp and slept until the gulls woke him. "
)


def build_model(kind, vocab, hidden, layers, heads, block):
    # no end-of-text token: generate() writes exactly max_new_tokens
    special = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if kind == "llama":
        config = LlamaConfig(vocab_size=vocab, hidden_size=hidden,
                             intermediate_size=4 * hidden, num_hidden_layers=layers,
                             num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                             max_position_embeddings=block, **special)
    else:
        config = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
                            n_positions=block, **special)
    return AutoModelForCausalLM.from_config(config)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["llama", "gpt2"], default="llama")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64, help="tokens per training sequence")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--bf16", action="store_true", help="train under torch.autocast('tpu', bfloat16)")
    p.add_argument("--gen-tokens", type=int, default=60)
    p.add_argument("--device", default="tpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    # character-level "tokenizer"
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    block = args.seq + args.gen_tokens + 8

    model = build_model(args.model, len(chars), args.hidden, args.layers, args.heads, block)
    model.to(device).train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {args.model}, {n_params / 1e6:.2f}M parameters, vocab {len(chars)}, "
          f"device {device}, bf16 autocast {args.bf16}")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    log_every = max(1, args.steps // 10)
    losses = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        # random windows of the text; the model shifts the labels itself
        starts = torch.randint(0, len(data) - args.seq, (args.batch,), generator=gen)
        ids = torch.stack([data[s:s + args.seq] for s in starts]).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % log_every == 0 or step == args.steps - 1:
            losses.append(loss.item())  # a host read: the only sync in the loop
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - t0
    print(f"trained {args.steps} steps in {elapsed:.1f} s; loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    # Greedy decoding. Every new length is a new shape, and each new shape
    # is a new program in eager mode: the static KV cache keeps the
    # attention's shapes fixed, leaving only the few small ops on the
    # growing token list (their recompile warnings are expected here).
    model.eval()
    prompt = "The lighthouse keeper"
    ids = torch.tensor([[stoi[c] for c in prompt]], device=device)
    t0 = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torchtpu: .* recompiled")
        out = model.generate(ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=args.gen_tokens, do_sample=False,
                             cache_implementation="static", pad_token_id=0)
    text = "".join(chars[i] for i in out[0].tolist())
    print(f"generated in {time.perf_counter() - t0:.1f} s: {text!r}")
    return losses


if __name__ == "__main__":
    main()
