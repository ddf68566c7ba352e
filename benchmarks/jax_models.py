"""The benchmark models written in JAX, for side-by-side comparisons with
torchtpu: the demo GPT (torchtpu.demo.GPT) and the LLaMA-style decoder of
benchmarks/llama.py, each with the same architecture, sizes and AdamW
update (the torch.optim.AdamW formula, weight decay on every parameter) as
the PyTorch model. Initial weights come from JAX's own PRNG, which does not
change the work.

    step, state, batch = build("llama", vocab=512, d=256, layers=4, heads=4,
                               block=128, batch=8, seed=0)
    state, loss = step(*state, *batch)      # one jitted training step

The import of jax is the caller's: set JAX_PLATFORMS=cpu before importing
this module to keep JAX on its CPU backend.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.999, 1e-8, 0.01


def tokens(vocab, batch, block, seed=0):
    """The benchmarks' data: (inputs, targets) int64 arrays of shape
    (batch, block) drawn from numpy's seeded generator, so the PyTorch and
    JAX runs see the same tokens."""
    rng = np.random.default_rng(seed)
    seq = rng.integers(0, vocab, size=(batch, block + 1), dtype=np.int64)
    return seq[:, :-1].copy(), seq[:, 1:].copy()


def _dense(key, i, o, bias=True):
    # nn.Linear's default: U(-1/sqrt(i), 1/sqrt(i))
    w = jax.random.uniform(key, (i, o), minval=-1, maxval=1) / math.sqrt(i)
    return {"w": w, "b": jnp.zeros(o)} if bias else {"w": w}


def _lin(p, v):
    return v @ p["w"] + p["b"] if "b" in p else v @ p["w"]


def _cross_entropy(logits, tgt):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, tgt[..., None], axis=-1).mean()


# ------------------------------------------------------------------ GPT


def gpt(vocab, d=64, layers=2, heads=4, block=64, seed=0):
    """torchtpu.demo.GPT: learned positions, LayerNorm, biased linears,
    masked softmax attention, exact GELU MLP, untied head."""
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4 + 4 * layers))
    params = {"tok": jax.random.normal(next(keys), (vocab, d)),
              "pos": jax.random.normal(next(keys), (block, d)),
              "ln": {"g": jnp.ones(d), "b": jnp.zeros(d)},
              "head": _dense(next(keys), d, vocab, bias=False), "blocks": []}
    for _ in range(layers):
        params["blocks"].append({
            "ln1": {"g": jnp.ones(d), "b": jnp.zeros(d)}, "ln2": {"g": jnp.ones(d), "b": jnp.zeros(d)},
            "qkv": _dense(next(keys), d, 3 * d), "proj": _dense(next(keys), d, d),
            "fc": _dense(next(keys), d, 4 * d), "out": _dense(next(keys), 4 * d, d)})

    def ln(p, v):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    mask = jnp.tril(jnp.ones((block, block), dtype=bool))

    def loss_fn(p, idx, tgt):
        B, t = idx.shape
        h = p["tok"][idx] + p["pos"][:t]
        for b in p["blocks"]:
            q, k, v = jnp.split(_lin(b["qkv"], ln(b["ln1"], h)), 3, axis=-1)
            q, k, v = (a.reshape(B, t, heads, d // heads).transpose(0, 2, 1, 3) for a in (q, k, v))
            att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d // heads)
            att = jnp.where(mask[:t, :t], att, -jnp.inf)
            att = jax.nn.softmax(att, axis=-1)
            yv = (att @ v).transpose(0, 2, 1, 3).reshape(B, t, d)
            h = h + _lin(b["proj"], yv)
            h = h + _lin(b["out"], jax.nn.gelu(_lin(b["fc"], ln(b["ln2"], h)), approximate=False))
        return _cross_entropy(_lin(p["head"], ln(p["ln"], h)), tgt)

    return params, loss_fn


# ---------------------------------------------------------------- LLaMA


def _rope_tables(head_dim, block, base=10000.0):
    inv = 1.0 / (base ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    freqs = jnp.outer(jnp.arange(block, dtype=jnp.float32), inv)
    return jnp.cos(freqs), jnp.sin(freqs)


def llama(vocab, d=256, layers=4, heads=4, block=128, hidden=None, seed=0):
    """benchmarks/llama.py's Llama: RMSNorm, rotary embeddings, causal
    attention, SwiGLU MLP, bias-free linears, untied head."""
    hidden = hidden or 256 * math.ceil(8 * d / 3 / 256)
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 2 + 5 * layers))
    params = {"tok": jax.random.normal(next(keys), (vocab, d)), "norm": jnp.ones(d),
              "head": _dense(next(keys), d, vocab, bias=False), "blocks": []}
    for _ in range(layers):
        params["blocks"].append({
            "norm1": jnp.ones(d), "norm2": jnp.ones(d),
            "qkv": _dense(next(keys), d, 3 * d, bias=False), "proj": _dense(next(keys), d, d, bias=False),
            "gate": _dense(next(keys), d, hidden, bias=False), "up": _dense(next(keys), d, hidden, bias=False),
            "down": _dense(next(keys), hidden, d, bias=False)})
    hd = d // heads
    cos_t, sin_t = _rope_tables(hd, block)
    causal = jnp.tril(jnp.ones((block, block), dtype=bool))

    def rms(w, v):
        return v * jax.lax.rsqrt((v * v).mean(-1, keepdims=True) + 1e-6) * w

    def rope(x, cos, sin):
        x1, x2 = jnp.split(x, 2, axis=-1)
        return jnp.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)

    def loss_fn(p, idx, tgt):
        B, t = idx.shape
        cos, sin = cos_t[:t], sin_t[:t]
        x = p["tok"][idx]
        for b in p["blocks"]:
            q, k, v = jnp.split(_lin(b["qkv"], rms(b["norm1"], x)), 3, axis=-1)
            q, k, v = (a.reshape(B, t, heads, hd).transpose(0, 2, 1, 3) for a in (q, k, v))
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd)
            att = jax.nn.softmax(jnp.where(causal[:t, :t], att, -jnp.inf), axis=-1)
            a = (att @ v).transpose(0, 2, 1, 3).reshape(B, t, d)
            x = x + _lin(b["proj"], a)
            h = rms(b["norm2"], x)
            x = x + _lin(b["down"], jax.nn.silu(_lin(b["gate"], h)) * _lin(b["up"], h))
        return _cross_entropy(_lin(p["head"], rms(p["norm"], x)), tgt)

    return params, loss_fn


MODELS = {"gpt": gpt, "llama": llama}


def train_step(loss_fn):
    """One AdamW training step over a params pytree, as torch.optim.AdamW
    computes it (decoupled weight decay, bias-corrected moments)."""
    def step(p, m, v, t, idx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(p, idx, tgt)
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, gg: BETA1 * a + (1 - BETA1) * gg, m, g)
        v = jax.tree_util.tree_map(lambda a, gg: BETA2 * a + (1 - BETA2) * gg * gg, v, g)

        def upd(pp, mm, vv):
            pp = pp * (1 - LR * WEIGHT_DECAY)
            mhat = mm / (1 - BETA1 ** t)
            vhat = vv / (1 - BETA2 ** t)
            return pp - LR * mhat / (jnp.sqrt(vhat) + EPS)
        p = jax.tree_util.tree_map(upd, p, m, v)
        return (p, m, v, t), loss
    return step


def build(model, vocab, d, layers, heads, block, batch, seed=0):
    """(jitted step, initial state tuple, (inputs, targets) on the device)."""
    params, loss_fn = MODELS[model](vocab, d=d, layers=layers, heads=heads, block=block, seed=seed)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = (params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.zeros((), jnp.float32))
    x, y = tokens(vocab, batch, block, seed)
    return jax.jit(train_step(loss_fn)), state, (jnp.asarray(x), jnp.asarray(y))
