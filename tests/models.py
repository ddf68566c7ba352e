"""Small real-model architectures built from configuration, for checking
that whole models train on tpu exactly as on CPU (tests/models/test_models.py).

Each class follows the published architecture of its family with the
pieces users actually hit: LLaMA (RMSNorm, rotary embeddings, SwiGLU,
grouped-query causal attention through F.scaled_dot_product_attention),
GPT-2 (learned positions, pre-LayerNorm, explicit masked softmax attention,
tanh GELU, tied embeddings), BERT (word + position + token type
embeddings, padding attention mask, post-LayerNorm, GELU, pooler), a
ResNet (basic blocks, batch norm, projection shortcuts, adaptive average
pooling) and a ViT (patch-embedding convolution, class token, position
embeddings, nn.TransformerEncoderLayer blocks). Configs are tiny so a
test runs in seconds; nothing is downloaded.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


# ------------------------------------------------------------------ LLaMA


@dataclass
class LlamaConfig:
    vocab: int = 96
    dim: int = 48
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2  # grouped-query attention when < heads
    hidden: int = 128  # SwiGLU inner size
    max_seq: int = 32
    rope_theta: float = 10000.0
    eps: float = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Normalised in fp32 whatever the activation dtype, as LLaMA does.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.heads, self.kv_heads = c.heads, c.kv_heads
        self.head_dim = c.dim // c.heads
        self.q = nn.Linear(c.dim, c.heads * self.head_dim, bias=False)
        self.k = nn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(c.heads * self.head_dim, c.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class LlamaMLP(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.gate = nn.Linear(c.dim, c.hidden, bias=False)
        self.up = nn.Linear(c.dim, c.hidden, bias=False)
        self.down = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaBlock(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(c.dim, c.eps)
        self.attn = LlamaAttention(c)
        self.mlp_norm = RMSNorm(c.dim, c.eps)
        self.mlp = LlamaMLP(c)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(LlamaBlock(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps)
        self.lm_head = nn.Linear(c.dim, c.vocab, bias=False)
        head_dim = c.dim // c.heads
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rope(self, t, dtype):
        pos = torch.arange(t, device=self.inv_freq.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        cos, sin = self.rope(idx.shape[1], x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


# ------------------------------------------------------------------ GPT-2


@dataclass
class GPT2Config:
    vocab: int = 96
    dim: int = 48
    layers: int = 2
    heads: int = 4
    max_seq: int = 32
    eps: float = 1e-5


class GPT2Attention(nn.Module):
    def __init__(self, c: GPT2Config):
        super().__init__()
        self.heads = c.heads
        self.qkv = nn.Linear(c.dim, 3 * c.dim)
        self.proj = nn.Linear(c.dim, c.dim)
        mask = torch.tril(torch.ones(c.max_seq, c.max_seq, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, c.max_seq, c.max_seq), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:, :, :t, :t], torch.finfo(att.dtype).min)
        att = F.softmax(att, dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))


class GPT2Block(nn.Module):
    def __init__(self, c: GPT2Config):
        super().__init__()
        self.ln1 = nn.LayerNorm(c.dim, eps=c.eps)
        self.attn = GPT2Attention(c)
        self.ln2 = nn.LayerNorm(c.dim, eps=c.eps)
        self.fc = nn.Linear(c.dim, 4 * c.dim)
        self.out = nn.Linear(4 * c.dim, c.dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, c: GPT2Config):
        super().__init__()
        self.wte = nn.Embedding(c.vocab, c.dim)
        self.wpe = nn.Embedding(c.max_seq, c.dim)
        self.blocks = nn.ModuleList(GPT2Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.dim, eps=c.eps)
        self.lm_head = nn.Linear(c.dim, c.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


# ------------------------------------------------------------------ BERT


@dataclass
class BertConfig:
    vocab: int = 96
    dim: int = 48
    layers: int = 2
    heads: int = 4
    hidden: int = 96
    max_seq: int = 32
    type_vocab: int = 2
    classes: int = 3
    eps: float = 1e-12


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.heads = c.heads
        self.q, self.k, self.v = (nn.Linear(c.dim, c.dim) for _ in range(3))
        self.attn_out = nn.Linear(c.dim, c.dim)
        self.attn_norm = nn.LayerNorm(c.dim, eps=c.eps)
        self.inter = nn.Linear(c.dim, c.hidden)
        self.out = nn.Linear(c.hidden, c.dim)
        self.out_norm = nn.LayerNorm(c.dim, eps=c.eps)

    def forward(self, x, bias):
        b, t, d = x.shape
        h = self.heads

        def split(z):
            return z.view(b, t, h, d // h).permute(0, 2, 1, 3)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // h) + bias
        probs = scores.softmax(dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, t, d)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.out(F.gelu(self.inter(x))))


class Bert(nn.Module):
    """Encoder with a masked-LM head and a sequence classifier on the
    pooled [CLS] state; the loss is their sum."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.word = nn.Embedding(c.vocab, c.dim, padding_idx=0)
        self.pos = nn.Embedding(c.max_seq, c.dim)
        self.token_type = nn.Embedding(c.type_vocab, c.dim)
        self.emb_norm = nn.LayerNorm(c.dim, eps=c.eps)
        self.layers = nn.ModuleList(BertLayer(c) for _ in range(c.layers))
        self.pool = nn.Linear(c.dim, c.dim)
        self.cls = nn.Linear(c.dim, c.classes)
        self.mlm = nn.Linear(c.dim, c.vocab)

    def forward(self, ids, types, attention_mask, mlm_labels=None, labels=None):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.emb_norm(self.word(ids) + self.pos(pos) + self.token_type(types))
        # Padding positions get the dtype's most negative value, as in BERT.
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        pooled = torch.tanh(self.pool(x[:, 0]))
        cls_logits = self.cls(pooled)
        mlm_logits = self.mlm(x)
        if labels is None:
            return cls_logits, mlm_logits
        mlm = F.cross_entropy(mlm_logits.flatten(0, 1), mlm_labels.flatten(), ignore_index=-100)
        return mlm + F.cross_entropy(cls_logits, labels)


# ------------------------------------------------------------------ ResNet


@dataclass
class ResNetConfig:
    widths: tuple = (8, 16, 32)
    blocks: tuple = (1, 1, 1)
    in_channels: int = 3
    classes: int = 5


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    def __init__(self, c: ResNetConfig):
        super().__init__()
        w0 = c.widths[0]
        self.stem = nn.Sequential(
            nn.Conv2d(c.in_channels, w0, 3, 1, 1, bias=False), nn.BatchNorm2d(w0), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], w0
        for i, (w, n) in enumerate(zip(c.widths, c.blocks)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if j == 0 and i > 0 else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, c.classes)

    def forward(self, x, labels=None):
        logits = self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))
        if labels is None:
            return logits
        return F.cross_entropy(logits, labels)


# ------------------------------------------------------------------ ViT


@dataclass
class ViTConfig:
    image: int = 16
    patch: int = 4
    in_channels: int = 3
    dim: int = 48
    layers: int = 2
    heads: int = 4
    hidden: int = 96
    classes: int = 5


class ViT(nn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        n = (c.image // c.patch) ** 2
        self.patch = nn.Conv2d(c.in_channels, c.dim, c.patch, c.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, c.dim) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(c.dim, c.heads, c.hidden, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(c.layers)
        )
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.head = nn.Linear(c.dim, c.classes)

    def forward(self, x, labels=None):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x)[:, 0])
        if labels is None:
            return logits
        return F.cross_entropy(logits, labels)
