"""A LLaMA-style decoder for the cold-start benchmarks (benchmarks/llama.py
re-exports it for them): RMSNorm, rotary position embeddings, causal
attention through scaled_dot_product_attention, a SwiGLU MLP, untied head.
The default size is the one the cold-start figures quote: d=256, 4 layers,
4 heads, batch 8 x 128 tokens. `attention` replaces the causal attention: a
function (q, k, v) -> out on (B, H, T, head_dim) tensors, such as a Pallas
kernel through torchtpu.jax_op (tests/kernels/test_kernels.py, support/kernels.py).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, block, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    t = torch.arange(block, dtype=torch.float32)
    freqs = torch.outer(t, inv)  # (T, hd/2)
    return torch.cos(freqs), torch.sin(freqs)


def apply_rope(x, cos, sin):
    # x: (B, H, T, hd); rotate halves
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads, hidden, attention=None):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.norm1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.norm2 = RMSNorm(d)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        H = self.heads
        q, k, v = self.qkv(self.norm1(x)).split(D, dim=-1)
        q = q.view(B, T, H, D // H).transpose(1, 2)
        k = k.view(B, T, H, D // H).transpose(1, 2)
        v = v.view(B, T, H, D // H).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.attention is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = self.attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab, d=256, layers=4, heads=4, block=128, hidden=None, attention=None):
        super().__init__()
        hidden = hidden or 256 * math.ceil(8 * d / 3 / 256)
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, hidden, attention) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        cos, sin = rope_tables(d // heads, block)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.tok(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            x = b(x, cos, sin)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
