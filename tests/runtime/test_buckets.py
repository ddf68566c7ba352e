"""Buckets (docs/design/shapes.md): a tensor that grows (a cat in a loop) is
stored padded to a bucket of sizes, and the ops that read it compile one
program per bucket instead of one per size. Users see exact shapes and
values: each result here is compared with the CPU's at sizes inside a
bucket, at its edges (65 and 128 for the default bucket of 128) and just
past it (129). The suite runs with TORCHTPU_BUCKET_POISON=1 (conftest), so
padding holds NaN and a consumer that fails to mask it shows.

Compile counts are deterministic and asserted; times are not."""
import os

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import debug

from _proc import check, run_script

DEV = "tpu"
SIZES = [65, 100, 128, 129]


def compiles():
    torch.tpu.synchronize()
    return debug.metrics()["compiles"]


def grown(base, dim, n):
    """base.narrow(dim, 0, n) on tpu, built by three cats along dim, as a
    decode loop grows its tensors: the growth detector stores it padded."""
    t = base.narrow(dim, 0, n - 3).to(DEV)
    for k in range(n - 3, n):
        t = torch.cat([t, base.narrow(dim, k, 1).to(DEV)], dim=dim)
    return t


def close(got, want, tol=1e-5):
    got = got.cpu()
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    else:
        assert torch.equal(got, want)


W = torch.randn(8, 5)
IDX = torch.tensor([0, 3, 1])

# f(x) for x of shape [2, n, 8], grown along dim 1.
OPS = {
    "elementwise": lambda x: (x * 2 + 1).exp(),
    "sum over n": lambda x: x.sum(1),
    "sum over other": lambda x: x.sum(2),
    "sum all": lambda x: x.sum(),
    "mean over other": lambda x: x.mean(2),
    "mean over n": lambda x: x.mean(1),
    "var over n": lambda x: x.var(1),
    "amax over n": lambda x: x.amax(1),
    "amin over n": lambda x: x.amin(1),
    "max over n": lambda x: x.max(1).values,
    "argmax over n": lambda x: x.argmax(1),
    "argmin over n": lambda x: x.argmin(1),
    "softmax over n": lambda x: x.softmax(1),
    "log_softmax over n": lambda x: x.log_softmax(1),
    "softmax over other": lambda x: x.softmax(2),
    "logsumexp over n": lambda x: x.logsumexp(1),
    "cumsum along n": lambda x: x.cumsum(1),
    "prod over n": lambda x: (x * 0.1 + 1).prod(1),
    "matmul contracting n": lambda x: x.transpose(1, 2) @ x,
    "matmul with n free": lambda x: x @ W.to(x.device),
    "layer_norm": lambda x: F.layer_norm(x, (8,)),
    "last row": lambda x: x[:, -1:] * 3,
    "middle rows": lambda x: x[:, 3:5] + 1,
    "transpose copy": lambda x: x.transpose(1, 2).contiguous(),
    "flip (no rule)": lambda x: x.flip(1),
    "sort (no rule)": lambda x: x.sort(1).values,
    "flatten (unpadded)": lambda x: x.reshape(-1) * 2,
    "rows flattened, linear": lambda x: (x.reshape(-1, 8) @ W.to(x.device)).relu(),
    "rows flattened, softmax": lambda x: x.reshape(-1, 8).softmax(-1).reshape(2, -1, 8),
    "rows flattened, contracted": lambda x: x.reshape(-1, 8).t() @ x.reshape(-1, 8),
    "rows flattened, sum": lambda x: x.reshape(-1, 8).sum(0),
    "index_select along n": lambda x: x.index_select(1, IDX.to(x.device)),
    "all over n": lambda x: (x > -10).all(1),
    "any over n": lambda x: (x > 2).any(1),
    "where": lambda x: torch.where(x > 0, x, -x),
    "isin a set": lambda x: torch.isin((x * 2).round(), torch.tensor([0.0, 1.0, -2.0], device=x.device)),
    "isin, out=": lambda x: torch.isin((x * 2).round(), torch.tensor([0.0, 1.0], device=x.device),
                                       out=torch.empty(x.shape, dtype=torch.bool, device=x.device)),
    "isin a padded set (no rule)": lambda x: torch.isin(x[:, :, 0].round(), x[0, :, 1].round()),
    "cat again": lambda x: torch.cat([x, x[:, :1]], 1),
    "cat along a fixed dim": lambda x: torch.cat([x, -x], 2),
    "cat with an empty tensor": lambda x: torch.cat([torch.empty(0, device=x.device), x], 1),
    "shifted rows": lambda x: x[:, 1:].contiguous() * 2,
    "shifted rows, sum": lambda x: x[:, 2:].sum(1),
    "pad at the end": lambda x: F.pad(x.transpose(1, 2), (0, 2), value=-7.0),
    "pad to a fixed length": lambda x: F.pad(x.transpose(1, 2), (0, 140 - x.shape[1]), value=-7.0),
    "pad to a fixed length, last rows": lambda x: F.pad(x > 0, (0, 0, 0, 133 - x.shape[1]))[:, -4:],
    "index along n, negative": lambda x: x[:, torch.tensor([0, 3, -1, -7], device=x.device)] * 2,
    "index along n and the batch": lambda x: x[torch.tensor([[1], [0]], device=x.device),
                                               torch.tensor([[-1, 2], [5, -2]], device=x.device)],
    "index by a grown arange": lambda x: x[torch.arange(2, device=x.device)[:, None],
                                           torch.arange(x.shape[1], device=x.device)[None, :]] + 1,
    "index along a fixed dim": lambda x: x[:, :, torch.tensor([7, 0, -8], device=x.device)],
    "index_select along the batch": lambda x: x.index_select(0, torch.tensor([1, 0, 1], device=x.device)),
    "bitwise and logical": lambda x: torch.logical_or((x > 0) & (x < 1), ~(x > -0.5)) ^ (x > 2),
    "bitwise, out=": lambda x: torch.bitwise_and(x > 0, x < 1, out=torch.empty(0, dtype=torch.bool, device=x.device)),
    "index along n, out=": lambda x: torch.ops.aten.index.Tensor_out(
        x, [None, torch.tensor([1, -1], device=x.device)], out=torch.empty(0, device=x.device)),
    "index_select along n, out=": lambda x: torch.index_select(x, 1, IDX.to(x.device),
                                                               out=torch.empty(0, device=x.device)),
    "index by an empty index": lambda x: x[:, torch.tensor([], dtype=torch.long, device=x.device)],
    "index of NaN rows": lambda x: torch.where(x > 1, float("nan"), x)[:, torch.tensor([0, -1], device=x.device)].isnan(),
    "causal attention": lambda x: F.scaled_dot_product_attention(
        x.view(2, 1, -1, 8), x.view(2, 1, -1, 8), x.view(2, 1, -1, 8), is_causal=True),
    "attention, heads merged": lambda x: (x.unsqueeze(1).expand(2, 3, -1, 8).reshape(6, -1, 8)
                                          @ x.unsqueeze(1).expand(2, 3, -1, 8).reshape(6, -1, 8).transpose(1, 2)),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", list(OPS))
def test_ops_on_grown_tensor_match_cpu(name, n):
    torch.manual_seed(n)
    base = torch.randn(2, n + 5, 8)
    x = grown(base, 1, n)
    want = OPS[name](base.narrow(1, 0, n))
    close(OPS[name](x), want)
    close(x, base.narrow(1, 0, n))


def test_pad_to_a_fixed_length_compiles_once_per_bucket():
    """A growing mask padded to a fixed length each step (transformers pads
    the attention mask to a static cache's length: by one less each step):
    one program per bucket, not per amount, and the CPU's values."""
    base = torch.randn(2, 140, 8)
    x = grown(base, 1, 66)
    counts = []
    for n in range(66, 128):
        before = compiles()
        got = F.pad(x > 0, (0, 0, 0, 130 - n))
        counts.append(compiles() - before)
        close(got, F.pad(base[:, :n] > 0, (0, 0, 0, 130 - n)))
        x = torch.cat([x, base[:, n:n + 1].to(DEV)], 1)
    assert sum(counts[1:]) == 0, counts


@pytest.mark.parametrize("dim", [1, -2])
def test_index_copy_of_a_grown_prompt_compiles_once_per_bucket(dim):
    """A prompt's keys written into a preallocated cache (a static cache's
    index_copy_ at the prompt's positions): the index and the source are
    padded alike; one program per bucket, and the cache equals the CPU's
    (the index's padding, NaN-poisoned in the suite, writes nothing)."""
    torch.manual_seed(0)
    src, pos = torch.randn(2, 140, 8), torch.randperm(140)
    counts = []
    for n in range(66, 128, 7):
        x, idx = grown(src, 1, n), grown(pos, 0, n)
        cache = torch.zeros(2, 140, 8, device=DEV)
        before = compiles()
        cache.index_copy_(dim, idx, x)
        fresh = torch.index_copy(cache, dim, idx, x * 2)
        counts.append(compiles() - before)
        want = torch.zeros(2, 140, 8).index_copy_(dim, pos[:n], src[:, :n])
        close(cache, want)
        close(fresh, want.index_copy(dim, pos[:n], src[:, :n] * 2))
    assert sum(counts[1:]) == 0, counts
    # an index past the cache within the true size raises as on the CPU
    # (where the device finds it: the written cache carries the error)
    bad = grown(torch.cat([pos[:69], torch.tensor([140])]), 0, 70)
    with pytest.raises(IndexError, match="index 140 is out of bounds for dimension 1 with size 140"):
        torch.zeros(2, 140, 8, device=DEV).index_copy_(dim, bad, grown(src, 1, 70)).cpu()
    close(cache * 1, want)   # the process and other tensors stay usable


@pytest.mark.parametrize("n", [100, 128])
def test_index_errors_on_a_grown_tensor_name_the_true_size(n):
    """An index past the true length of a padded dim raises as on the CPU
    (IndexError naming the true size), though the bucket's storage holds
    more rows; the last valid and the most negative index read the right
    rows."""
    base = torch.randn(2, n + 5, 8)
    x = grown(base, 1, n)
    want = base.narrow(1, 0, n)
    close(x[:, torch.tensor([n - 1, -n], device=DEV)], want[:, [n - 1, -n]])
    close(x.index_select(1, torch.tensor([n - 1], device=DEV)), want.index_select(1, torch.tensor([n - 1])))
    for bad in (n, n + 3, -n - 1):
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0 with size {n}"):
            x[:, torch.tensor([0, bad], device=DEV)].cpu()
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(1, torch.tensor([n], device=DEV)).cpu()
    close(x * 1, want)   # the process and the tensor stay usable


# a one-layer LLaMA from a config, on the CPU
_TINY_LLAMA = """
    import torch, transformers, torchtpu
    from torchtpu import debug
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, intermediate_size=64, vocab_size=100,
                                   max_position_embeddings=128, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg).eval()
"""

_GENERATE = _TINY_LLAMA + """
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :3] = 0
    mask[1, :3] = 0   # the second prompt is left-padded
    kw = dict(max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=0, KW)

    class Count(transformers.LogitsProcessor):
        def __init__(self):
            self.at = []
        def __call__(self, input_ids, scores):
            torch.tpu.synchronize()
            self.at.append(debug.metrics()["compiles"])
            return scores

    with torch.no_grad():
        want = model.generate(ids, attention_mask=mask, **kw)
        count = Count()
        got = model.to("tpu").generate(ids.to("tpu"), attention_mask=mask.to("tpu"),
                                       logits_processor=transformers.LogitsProcessorList([count]), **kw)
    assert torch.equal(got.cpu(), want), (got, want)
    print("compiles per step", [b - a for a, b in zip(count.at, count.at[1:])])
    # a static cache's last step cuts its fused window apart differently
    # (the same for any number of tokens)
    assert count.at[LAST] == count.at[4], count.at
    print("ok")
"""


@pytest.mark.parametrize("mode,kw", [("strict", "num_beams=1"), ("fused", "num_beams=1"),
                                     ("strict", "num_beams=2"),
                                     ("strict", "cache_implementation='static'"),
                                     ("fused", "cache_implementation='static'")])
def test_generate_with_a_padding_mask_compiles_nothing_per_token(mode, kw):
    """Batched prompts of different lengths (a left-padded batch, its
    attention mask holding zeros) build a 4-d mask each step from
    arange(kv_length), a gather of the padding mask and bitwise ands; beam
    search reorders the key/value cache with index_select; with a static
    cache the mask is padded to the cache's length, by one less each step.
    From the fifth token on, no step compiles; the tokens equal the
    CPU's."""
    pytest.importorskip("transformers")
    last = "-2" if mode == "fused" and "static" in kw else "-1"
    check(run_script(_GENERATE.replace("KW", kw).replace("LAST", last), timeout=600, TORCHTPU_EAGER_MODE=mode,
                     TORCHTPU_DISK_CACHE="0"))


_STATIC_PROMPTS = _TINY_LLAMA + """
    tmodel = transformers.LlamaForCausalLM(cfg).eval()
    tmodel.load_state_dict(model.state_dict())
    tmodel.to("tpu")
    # prompt and new tokens stay inside the first size (16)
    kw = dict(max_new_tokens=2, min_new_tokens=2, do_sample=False, pad_token_id=0)
    counts = []
    for n in (8, 5, 11, 13):
        ids = torch.randint(3, 100, (1, n), generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            want = model.generate(ids, cache=transformers.StaticCache(config=cfg, max_cache_len=64), **kw)
            before = debug.metrics()["compiles"]
            got = tmodel.generate(ids.to("tpu"), cache=transformers.StaticCache(config=cfg, max_cache_len=64),
                                  **kw).cpu()
            counts.append(debug.metrics()["compiles"] - before)
        assert torch.equal(got, want), (n, got, want)
    print("compiles per prompt", counts)
    assert counts[1:] == [0, 0, 0], counts
    print("ok")
"""


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_static_cache_prompts_of_one_bucket_compile_once(mode):
    """generate() with a StaticCache of fixed length and explicit sizes:
    the first prompt runs its bucket's programs (its keys are read back
    from the cache at the padded prompt's length), so later prompts in
    that bucket compile nothing; the tokens equal the CPU's."""
    pytest.importorskip("transformers")
    check(run_script(_STATIC_PROMPTS, timeout=600, TORCHTPU_EAGER_MODE=mode, TORCHTPU_DISK_CACHE="0",
                     TORCHTPU_BUCKETS="16,32,64"))


# f(v), as source, for v a growing view of a preallocated [2, 140, 8]
# storage (`buf[:, :n]`), or of its transpose.
VIEW_OPS = {
    "elementwise": "lambda v: (v * 2 + 1).exp()",
    "sum over n": "lambda v: v.sum(1)",
    "softmax over n": "lambda v: v.softmax(1)",
    "matmul contracting n": "lambda v: v.transpose(1, 2) @ v",
    "clone": "lambda v: v.clone() - 1",
    "last row": "lambda v: v[:, -1] * 3",
    "index along n": "lambda v: v[:, torch.tensor([0, -1], device=v.device)]",
    "in place on a copy": "lambda v: v.clone().mul_(2).add_(v)",
}


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_ops_on_a_growing_view_match_cpu(name):
    """A preallocated buffer read as buf[:, :n] for n = 60, 61, ..., 134
    (past the first bucket; the storage has room for 140, less than the
    next bucket): strict mode compiles per bucket, not per n, and every
    result equals the CPU's."""
    code = """
        import torch, torchtpu
        from torchtpu import debug
        torch.manual_seed(0)
        base = torch.randn(2, 140, 8)
        buf = base.to("tpu")
        f = FN
        counts = {}
        for n in range(60, 135):
            for b, want in ((buf[:, :n], base[:, :n]), (buf.transpose(1, 2)[:, :, :n].transpose(1, 2),
                                                        base[:, :n])):
                got = f(b).cpu()
                torch.testing.assert_close(got, f(want), rtol=1e-5, atol=1e-5)
            counts[n] = debug.metrics()["compiles"]
        assert counts[128] == counts[70], counts
        assert counts[134] - counts[129] == 0, counts
        print("ok")
    """
    check(run_script(code.replace("FN", VIEW_OPS[name]), TORCHTPU_EAGER_MODE="strict",
                     TORCHTPU_DISK_CACHE="0"))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_decode_with_a_preallocated_cache(mode):
    """A hand-written decode loop over a preallocated key/value cache (the
    reference LLaMA implementation's): each step writes one position and
    attends over cache[:, :pos + 1]. The views grow and move; from the
    tenth step on nothing compiles within a bucket (strict: 903 programs
    over 150 steps before growing views were bucketed; fused: a window per
    step)."""
    import re
    import subprocess
    import sys

    from _proc import ROOT

    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "shapes", "preallocated_cache.py"),
                        "--steps", "140"], env=dict(os.environ, TORCHTPU_EAGER_MODE=mode,
                                                    TORCHTPU_DISK_CACHE="0"),
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    m = re.search(r"(\d+) in steps 11-128, (\d+) after; outputs equal the CPU's", p.stdout)
    assert m, p.stdout
    assert int(m.group(1)) == 0 and int(m.group(2)) <= 8, p.stdout


def test_a_loop_over_time_steps_in_a_fused_window_keeps_its_slices():
    """An RNN unrolled in fused mode reads x[:, t] for t = 0, 1, ...: the
    offset steps forward inside one window, which is not a moving view
    (that counts steps from one window to the next), so the window keeps
    constant slices and its second run compiles nothing."""
    check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        torch.manual_seed(0)
        x, w, u = torch.randn(4, 40, 16), torch.randn(16, 16) * 0.1, torch.randn(16, 16) * 0.1

        def run(dev):
            xx, ww, uu = x.to(dev), w.to(dev), u.to(dev)
            h = torch.zeros(4, 16, device=dev)
            for t in range(40):
                h = torch.tanh(xx[:, t] @ ww + h @ uu)
            return h.cpu()

        want = run("cpu")
        counts = []
        for _ in range(3):
            torch.testing.assert_close(run("tpu"), want, rtol=1e-4, atol=1e-4)
            counts.append(debug.metrics()["compiles"])
        assert counts[2] == counts[0], counts
        print("ok")
    """, TORCHTPU_EAGER_MODE="fused", TORCHTPU_DISK_CACHE="0"))


def attention_step(k, v, q):
    s = (q @ k.transpose(-1, -2)) * 0.25
    return s.softmax(-1) @ v


def test_decode_loop_compiles_one_program_per_bucket():
    """A KV cache grown by cat along the sequence with attention over it:
    after the first sizes, every size in the bucket runs with no compile;
    the next bucket compiles once more. Values equal the CPU's at every
    step."""
    torch.manual_seed(0)
    q = torch.randn(1, 4, 1, 16)
    k = torch.randn(1, 4, 60, 16)
    v = torch.randn(1, 4, 60, 16)
    kt, vt, qt = k.to(DEV), v.to(DEV), q.to(DEV)
    counts = {}
    for n in range(61, 140):
        new_k, new_v = torch.randn(1, 4, 1, 16), torch.randn(1, 4, 1, 16)
        k, v = torch.cat([k, new_k], 2), torch.cat([v, new_v], 2)
        kt, vt = torch.cat([kt, new_k.to(DEV)], 2), torch.cat([vt, new_v.to(DEV)], 2)
        got = attention_step(kt, vt, qt)
        close(got, attention_step(k, v, q))
        counts[n] = compiles()
    # 61..64: exact programs and the growth detector; 65..128: one bucket
    assert counts[128] - counts[70] == 0
    # 129 opens the bucket of 256: a few programs, then none
    assert counts[139] - counts[131] == 0
    assert 0 < counts[131] - counts[128] <= 12


def test_inplace_writes_through_views_of_a_padded_storage():
    torch.manual_seed(1)
    base = torch.randn(2, 110, 8)
    x = grown(base, 1, 100)
    want = base.narrow(1, 0, 100).clone()
    x[:, :5].add_(1)
    want[:, :5].add_(1)
    x[:, -1].mul_(3)
    want[:, -1].mul_(3)
    x.add_(2)
    want.add_(2)
    x.transpose(0, 1)[7].zero_()
    want.transpose(0, 1)[7].zero_()
    close(x, want)
    close(x.sum(1), want.sum(1))


def test_integer_and_bool_growth():
    """generate()'s input_ids and attention mask: int64 rows grown by one
    token, read by embedding, comparisons and reductions."""
    torch.manual_seed(2)
    weight = torch.randn(50, 8)
    ids = torch.randint(0, 50, (1, 110))
    mask = torch.ones(1, 110, dtype=torch.int64)
    t_ids, t_mask = grown(ids, 1, 100), grown(mask, 1, 100)
    close(t_ids, ids[:, :100])
    close(F.embedding(t_ids, weight.to(DEV)), F.embedding(ids[:, :100], weight))
    close((t_ids == 7).any(1), (ids[:, :100] == 7).any(1))
    close(t_mask.cumsum(-1) - 1, mask[:, :100].cumsum(-1) - 1)
    close(t_mask.sum(-1), mask[:, :100].sum(-1))
    close(t_ids[:, -1], ids[:, 99])
    close(torch.isin(t_ids, torch.tensor([3, 9]).to(DEV)), torch.isin(ids[:, :100], torch.tensor([3, 9])))


def test_backward_through_a_padded_tensor():
    torch.manual_seed(3)
    base = torch.randn(2, 110, 8)
    w = torch.randn(8, requires_grad=True)
    wt = w.detach().to(DEV).requires_grad_()
    x = grown(base, 1, 100)
    loss_t = ((x * wt).softmax(1) * x).sum()
    xc = base[:, :100]
    loss = ((xc * w).softmax(1) * xc).sum()
    loss_t.backward()
    loss.backward()
    close(loss_t.detach(), loss.detach(), 1e-4)
    close(wt.grad, w.grad, 1e-4)


def test_compile_log_says_what_a_program_serves():
    torch.manual_seed(4)
    base = torch.randn(3, 120, 5)
    x = grown(base, 1, 90)
    (x * 1.5).exp()
    reasons = [r["reason"] for r in debug.compiles()]
    assert any("grows: stored padded to 128" in r for r in reasons), reasons[-10:]
    assert any("holds sizes up to 128" in r for r in reasons), reasons[-10:]


def test_download_and_copies_of_a_padded_tensor():
    torch.manual_seed(5)
    base = torch.randn(4, 100, 3, dtype=torch.float64)
    x = grown(base, 1, 77)
    close(x, base[:, :77])
    close(x.to(torch.float32), base[:, :77].float())
    close(x.clone(), base[:, :77])
    close(x.t() if x.dim() == 2 else x.permute(2, 0, 1), base[:, :77].permute(2, 0, 1))
    assert x.tolist() == base[:, :77].tolist()


def test_setting_off_and_bad_values():
    code = """
        import torch, torchtpu
        from torchtpu import debug
        x = torch.zeros(1, 70).to("tpu")
        c0 = debug.metrics()["compiles"]
        for i in range(20):
            x = torch.cat([x, torch.ones(1, 1).to("tpu")], 1)
            (x * 2).sum().item()
        print("COMPILES", debug.metrics()["compiles"] - c0)
    """
    strict = {"TORCHTPU_EAGER_MODE": "strict", "TORCHTPU_DISK_CACHE": "0"}
    off = run_script(code, TORCHTPU_BUCKETS="off", **strict)
    check(off, "COMPILES")
    on = run_script(code, **strict)
    check(on, "COMPILES")
    n_off = int(off.stdout.split("COMPILES")[1])
    n_on = int(on.stdout.split("COMPILES")[1])
    assert n_off >= 60  # cat, mul and sum at each of 20 sizes
    assert n_on <= 15
    # quarter steps from 64: 70..90 cross the buckets 80 and 96
    quarter = run_script(code + """
        assert x.shape[1] == 90 and (x.cpu()[:, 70:] == 1).all()
        print("ok")
    """, TORCHTPU_BUCKETS="quarter:64", **strict)
    n_quarter = int(check(quarter).split("COMPILES")[1].split()[0])
    assert n_on < n_quarter <= n_on + 10
    bad = run_script("import torch, torchtpu\ntorch.ones(1).to('tpu')\n",
                     TORCHTPU_BUCKETS="pow3")
    assert bad.returncode != 0
    assert "TORCHTPU_BUCKETS=pow3: expected off, pow2 or quarter" in bad.stderr
    for value in ("128,64", "64,,128", "64,x", "1,64"):
        bad = run_script("import torch, torchtpu\ntorch.ones(1).to('tpu')\n",
                         TORCHTPU_BUCKETS=value)
        assert bad.returncode != 0, value
        assert f"TORCHTPU_BUCKETS={value}: expected" in bad.stderr
        assert "ascending" in bad.stderr


_TRAIN = """
    import torch, torchtpu
    import torch.nn.functional as F
    from torchtpu import debug

    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.proj = torch.nn.Linear(d, d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.SiLU(),
                                           torch.nn.Linear(2 * d, d))
            self.norm = torch.nn.LayerNorm(d)

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.norm(x)).view(b, n, 3, 2, d // 2).permute(2, 0, 3, 1, 4)
            mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
            a = (q @ k.transpose(-1, -2)) / 4.0
            a = a.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
            return x + self.mlp(x)

    class LM(torch.nn.Module):
        def __init__(self, vocab=64, d=32):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            self.pos = torch.nn.Embedding(256, d)
            self.block = Block(d)
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            h = self.block(self.emb(ids) + self.pos(pos))
            logits = self.head(h)
            labels = F.pad(ids, (0, 1), value=-100)[..., 1:]
            return F.cross_entropy(logits.reshape(-1, 64), labels.reshape(-1), ignore_index=-100)

    def train(model, lengths, dev):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(3)
        losses, counts = [], []
        for n in lengths:
            loss = model(torch.randint(0, 64, (2, n), generator=g).to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            counts.append(debug.metrics()["compiles"])
        return losses, counts

    torch.manual_seed(0)
    cpu = LM()
    tpu = LM().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    lengths = LENGTHS
    ref, _ = train(cpu, lengths, "cpu")
    got, counts = train(tpu, lengths, "tpu")
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-4, atol=1e-4)
    print("COUNTS", counts)
"""

_VARIED = [66, 70, 76, 100, 120]  # none equal to a fixed dim (32, 64)


def _train_counts(lengths, **env):
    out = check(run_script(_TRAIN.replace("LENGTHS", repr(lengths)), timeout=600,
                           TORCHTPU_EAGER_MODE=env.pop("mode", "strict"),
                           TORCHTPU_DISK_CACHE="0", **env), "COUNTS")
    return eval(out.split("COUNTS")[1].strip().splitlines()[0])


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_training_over_varying_lengths(mode):
    """Training on batches of varying length: once the length has changed,
    token batches are stored padded and the step compiles nothing more
    for lengths in the bucket; with explicit sizes (lengths declared
    varying) batches are padded from the first step, so varying lengths
    compile no more programs than one length does. Losses equal the CPU's."""
    one = _train_counts([70] * len(_VARIED), mode=mode)
    auto = _train_counts(_VARIED, mode=mode)
    declared = _train_counts(_VARIED, mode=mode, TORCHTPU_BUCKETS="128,256")
    assert one[-1] == one[2], one
    assert auto[-1] == auto[2], auto  # nothing after the second length
    assert auto[-1] <= 2 * one[-1], (auto, one)
    assert declared[-1] == declared[1], declared
    assert declared[-1] <= one[-1], (declared, one)


def test_fused_mode_decode_loop():
    """Fused eager mode: the window of a decode step repeats across the
    bucket, so it compiles once per bucket, not once per token."""
    code = """
        import torch, torchtpu
        from torchtpu import debug
        torch.manual_seed(0)
        q = torch.randn(1, 4, 1, 16)
        k = torch.randn(1, 4, 60, 16)
        kt, qt = k.to("tpu"), q.to("tpu")
        counts = {}
        for n in range(61, 135):
            new = torch.randn(1, 4, 1, 16)
            k = torch.cat([k, new], 2)
            kt = torch.cat([kt, new.to("tpu")], 2)
            s = ((q @ k.transpose(-1, -2)) * 0.25).softmax(-1) @ k
            st = ((qt @ kt.transpose(-1, -2)) * 0.25).softmax(-1) @ kt
            torch.testing.assert_close(st.cpu(), s, rtol=1e-5, atol=1e-5)
            counts[n] = debug.metrics()["compiles"]
        assert counts[128] - counts[70] == 0, counts
        assert counts[134] - counts[128] <= 3, counts
        print("ok")
    """
    check(run_script(code, TORCHTPU_EAGER_MODE="fused", TORCHTPU_DISK_CACHE="0"))


def test_factories_of_a_growing_size():
    """arange and ones/zeros (fills of a fresh storage) of the length of
    token batches that vary come out padded to the bucket: positions,
    causal masks. (A process of its own: batches that vary leave the
    growth detector primed.)"""
    check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        counts = {}
        for n in (70, 76, 82, 88, 100, 110, 120):
            ids = torch.randint(0, 9, (2, n))
            assert torch.equal(ids.to("tpu").cpu(), ids)
            pos = torch.arange(0, n, device="tpu")
            assert torch.equal(pos.cpu(), torch.arange(0, n))
            mask = torch.ones(n, n, dtype=torch.bool, device="tpu").tril()
            assert torch.equal(mask.cpu(), torch.ones(n, n, dtype=torch.bool).tril())
            z = torch.zeros(2, n, device="tpu") + pos
            assert torch.equal(z.cpu(), torch.zeros(2, n) + torch.arange(0, n))
            counts[n] = debug.metrics()["compiles"]
        assert counts[120] - counts[82] == 0, counts
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))


def test_fills_of_differing_shapes_stay_exact():
    """Fills of fresh storages whose shapes differ (an optimizer's
    zeros_like of each parameter) are not taken for growth: without token
    batches that vary, or sizes that step evenly (a sweep, below), they stay
    exact, and so do the ops over them. (A process of its own: token
    batches uploaded by other tests would make these lengths the ones that
    vary.)"""
    check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        for n in (70, 100, 76, 88, 82, 64, 128, 96):
            z = torch.zeros(3, n, device="tpu")
            assert torch.equal((z + 1).cpu(), torch.ones(3, n))
        bucketed = [c for c in debug.compiles() if "bucketed" in c["reason"]]
        assert not bucketed, bucketed
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))


def test_stacks_of_other_widths_are_not_growth():
    """Stacks of a model's parameters (scan_layers stacks each layer's
    weights: widths 16, 32, 16, ... one after another) change size call
    after call but never take their previous output: they stay exact,
    where a cat that takes its own output back grows."""
    check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        rows = {n: [torch.randn(n, device="tpu") for _ in range(3)] for n in (70, 100)}
        for step in range(4):
            for n in (70, 100):
                s = torch.stack(rows[n])
                assert torch.equal(s.cpu(), torch.stack([r.cpu() for r in rows[n]]))
        grew = [c["reason"] for c in debug.compiles() if "grows" in c["reason"]]
        assert not grew, grew
        t = torch.zeros(2, 70, device="tpu")
        for _ in range(3):
            t = torch.cat([t, torch.ones(2, 1, device="tpu")], dim=1)
        assert torch.equal(t.cpu(), torch.cat([torch.zeros(2, 70), torch.ones(2, 3)], 1))
        grew = [c["reason"] for c in debug.compiles() if "grows" in c["reason"]]
        assert len(grew) == 1, grew
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))


def test_varying_length_batches_from_the_host():
    """Integer batches uploaded at varying lengths (token ids) are stored
    padded once their length changes; the model's forward and a
    cross-entropy loss over them are bucketed. (A process of its own.)"""
    check(run_script("""
        import torch, torchtpu
        import torch.nn.functional as F
        from torchtpu import debug
        torch.manual_seed(6)
        emb = torch.nn.Embedding(50, 8)
        lin = torch.nn.Linear(8, 50)
        emb_t, lin_t = torch.nn.Embedding(50, 8).to("tpu"), torch.nn.Linear(8, 50).to("tpu")
        emb_t.load_state_dict(emb.state_dict())
        lin_t.load_state_dict(lin.state_dict())

        def loss_of(ids, e, l):
            logits = l(e(ids))
            labels = F.pad(ids, (0, 1), value=-100)[..., 1:].contiguous()
            return F.cross_entropy(logits.view(-1, 50), labels.view(-1), ignore_index=-100)

        counts = []
        for n in (64, 70, 76, 82, 88, 94, 100):
            ids = torch.randint(0, 50, (2, n))
            with torch.no_grad():
                torch.testing.assert_close(loss_of(ids.to("tpu"), emb_t, lin_t).cpu(),
                                           loss_of(ids, emb, lin), rtol=1e-5, atol=1e-5)
            counts.append(debug.metrics()["compiles"])
        assert counts[-1] - counts[2] == 0, counts
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))


@pytest.mark.parametrize("mode", ["strict", pytest.param("fused", marks=pytest.mark.long)])
def test_a_filled_cache_serves_other_prompt_lengths(mode, tmp_path):
    """With explicit sizes, prompts are padded from their first upload and
    the default cache grows inside buckets: one generate() that reaches the
    largest length fills a disk cache (as `torchtpu.aot --fill-cache` fills a
    TPU's) from which generate() of other prompt lengths and fewer tokens
    compiles nothing. Tokens equal the CPU's."""
    import subprocess
    import sys

    from _proc import ROOT

    env = dict(os.environ, TORCHTPU_BUCKETS="16,32,64,128", TORCHTPU_CACHE_DIR=str(tmp_path),
               TORCHTPU_EAGER_MODE=mode, PYTHONUNBUFFERED="1")
    script = os.path.join(ROOT, "benchmarks", "shapes", "generate_lengths.py")

    def run(*args):
        p = subprocess.run([sys.executable, script, *args], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr[-3000:]
        return p.stdout

    first = run("--prompts", "8", "--tokens", "56")
    assert "tokens equal the CPU's" in first and "compiled 0" not in first, first
    later = run("--prompts", "5,13", "--tokens", "40")
    later += run("--prompts", "11", "--tokens", "3")
    lines = [ln for ln in later.splitlines() if ln.startswith("prompt")]
    assert len(lines) == 3, later
    for ln in lines:
        assert "compiled 0," in ln and "tokens equal the CPU's" in ln, later


def test_reductions_of_padded_bool_and_int_batches():
    """Bool and integer batches of a changing length are stored padded; a
    reduction that converts them to floating point (logsumexp) cannot take
    the padding as its identity (false would add exp(0) each) and runs
    exact, while max/argmax take the lowest value as before."""
    g = torch.Generator().manual_seed(5)
    for n in (5, 6, 7, 9, 12):
        x = torch.rand(4, n, generator=g) > 0.5
        i = torch.randint(-50, 50, (4, n), generator=g)
        xt, it = x.to(DEV), i.to(DEV)
        close(torch.logsumexp(xt, 1), torch.logsumexp(x, 1))
        close(torch.logsumexp(xt, (0, 1)), torch.logsumexp(x, (0, 1)))
        close(torch.logsumexp(it, 1), torch.logsumexp(i, 1))
        close(xt.amax(1), x.amax(1))
        close(it.argmax(1), i.argmax(1))
        close(it.amin(1), i.amin(1))


STEP_SCRIPT = """
    import torch, torchtpu
    import torch.nn.functional as F
    from torchtpu import debug
    torch.manual_seed(0)
    vocab, d = 1000, 32
    emb = torch.nn.Embedding(vocab, d)
    head = torch.nn.Linear(d, vocab)
    ref = [emb.weight.detach().clone(), head.weight.detach().clone()]
    emb, head = emb.to("tpu"), head.to("tpu")
    opt = torch.optim.AdamW([*emb.parameters(), *head.parameters()], lr=1e-3)
    counts, bucketed = [], []
    for n in LENGTHS:
        ids = torch.randint(0, vocab, (8, n))
        ids_t = ids.to("tpu")   # one upload a step
        logits = head(emb(ids_t))
        labels = F.pad(ids_t[:, 1:], (0, 1), value=-100)
        loss = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), ignore_index=-100)
        want = F.cross_entropy((F.embedding(ids, ref[0]) @ ref[1].t() + head.bias.detach().cpu())
                               .reshape(-1, vocab), F.pad(ids[:, 1:], (0, 1), value=-100).reshape(-1),
                               ignore_index=-100) if len(counts) == 0 else None
        if want is not None:
            torch.testing.assert_close(loss.detach().cpu(), want, rtol=1e-5, atol=1e-5)
        loss.backward()
        opt.step()
        opt.zero_grad()
        log = debug.compiles(clear=True)
        counts.append(debug.metrics()["compiles"])
        bucketed.append(sum("bucketed" in c["reason"] for c in log))
    print("RESULT", counts, bucketed)
"""


def step_counts(lengths, mode):
    r = run_script(STEP_SCRIPT.replace("LENGTHS", repr(list(lengths))),
                   TORCHTPU_EAGER_MODE=mode, TORCHTPU_DISK_CACHE="0")
    check(r, "RESULT")
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT")][-1]
    counts, bucketed = line[len("RESULT "):].split("] [")
    return ([int(x) for x in counts.strip("[]").split(",")],
            [int(x) for x in bucketed.strip("[]").split(",")])


def test_strict_pads_a_token_batch_from_its_first_length():
    """Strict mode: a token batch whose bucket is cheap (65..128 tokens in
    the smallest bucket) is padded from its first upload, so the first
    length compiles the programs every later length reuses."""
    counts, bucketed = step_counts((70, 76, 90, 100, 120), "strict")
    assert counts == [counts[0]] * 5, counts
    assert bucketed[0] > 0, bucketed


def test_strict_fixed_length_loop_goes_exact():
    """A length that does not change for 8 uploads is a fixed-shape loop's:
    from the 9th on it is stored exact (its programs compile once more,
    then nothing), and the steady state pays no padding."""
    counts, bucketed = step_counts([100] * 12, "strict")
    assert bucketed[0] > 0 and counts[:8] == [counts[0]] * 8, (counts, bucketed)
    assert counts[8] > counts[7] and bucketed[8] == 0, (counts, bucketed)
    assert counts[8:] == [counts[8]] * 4, counts


def test_fused_first_length_stays_exact():
    """Fused mode: a window is one program, so the first length's exact
    windows cost little; padding starts when the length first changes."""
    counts, _ = step_counts((70, 76, 90, 100, 120), "fused")
    assert counts[1] > counts[0] and counts[2:] == [counts[1]] * 3, counts


_DEFERRED = """
    import torch, torchtpu
    import torch.nn.functional as F
    from torchtpu import debug

    class LM(torch.nn.Module):
        def __init__(self, vocab=64, d=32):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            self.pos = torch.nn.Embedding(256, d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.SiLU(),
                                           torch.nn.Linear(4 * d, d))
            self.norm = torch.nn.LayerNorm(d)
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            h = self.emb(ids) + self.pos(pos)
            h = h + self.mlp(self.norm(h))
            labels = F.pad(ids, (0, 1), value=-100)[..., 1:]
            return F.cross_entropy(self.head(h).reshape(-1, 64), labels.reshape(-1),
                                   ignore_index=-100)

    def train(model, lengths, dev):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(3)
        losses = []
        for n in lengths:
            loss = model(torch.randint(0, 64, (2, n), generator=g).to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses).cpu()   # one host read, after the last step

    torch.manual_seed(0)
    cpu = LM()
    tpu = LM().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    ref = train(cpu, LENGTHS, "cpu")
    debug.compiles(clear=True)
    got = train(tpu, LENGTHS, "tpu")
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    windows = [c["what"] for c in debug.compiles() if c["what"].startswith("fused window")]
    print("RESULT", len(windows), debug.metrics()["fused_window_ends"]["step_repeat"])
"""


def _deferred(lengths):
    out = check(run_script(_DEFERRED.replace("LENGTHS", repr(lengths)), timeout=600,
                           TORCHTPU_EAGER_MODE="fused", TORCHTPU_DISK_CACHE="0"), "RESULT")
    windows, repeats = out.split("RESULT")[1].split()[:2]
    return int(windows), int(repeats)


def test_fused_steps_over_varying_lengths_without_host_reads():
    """Fused mode, a training loop that reads its losses only after the last
    step: the step detector matches an op over padded storages by its
    tensors' dtypes and ranks, not their sizes, so each step of a new
    length still ends where the next begins and the bucketed step's
    windows serve every later length. (The detector once
    took the first, exact step's sizes for the step's signature: bucketed
    steps never matched it, windows straddled steps, and 8 lengths
    compiled 6 windows where one length compiles 2.)"""
    one = _deferred([70] * 8)
    varied = _deferred([66, 70, 76, 82, 88, 100, 110, 120])
    assert one == (2, 7), one
    assert varied == (3, 7), varied  # the exact first step's window, once more


def test_layers_of_other_widths_are_not_a_step():
    """Fused mode, a fixed-shape MLP whose layers all differ in width, no
    host read until the end: its Linear-ReLU pattern recurs in every layer,
    but over exact storages the step detector matches signatures, sizes
    included, so only the next step's beginning ends a window (matching
    ops by dtype and rank alone cut every step after its 8th layer too)."""
    out = check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        torch.manual_seed(0)
        widths = [16 + 8 * k for k in range(13)]
        def mlp():
            torch.manual_seed(0)
            return torch.nn.Sequential(*[m for a, b in zip(widths, widths[1:])
                                         for m in (torch.nn.Linear(a, b), torch.nn.ReLU())])
        cpu, tpu = mlp(), mlp().to("tpu")
        x, y = torch.randn(8, 16), torch.randint(0, widths[-1], (8,))

        def train(m, dev):
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
            xs, ys, losses = x.to(dev), y.to(dev), []
            for _ in range(6):
                loss = torch.nn.functional.cross_entropy(m(xs), ys)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return torch.stack(losses).cpu()

        torch.testing.assert_close(train(tpu, "tpu"), train(cpu, "cpu"), rtol=1e-5, atol=1e-5)
        print("ENDS", debug.metrics()["fused_window_ends"]["step_repeat"])
    """, TORCHTPU_EAGER_MODE="fused", TORCHTPU_DISK_CACHE="0"), "ENDS")
    assert int(out.split("ENDS")[1].split()[0]) == 5


def test_a_true_size_equal_to_a_scalar_compiles_nothing():
    """A fused window shares equal scalars of one op, but a bucketed op's
    true size only with other true sizes: whether a length happens to equal
    a scalar of the program (76 here) does not change the window."""
    out = check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        counts = []
        for n in [64, 70, 76, 82, 88]:
            ids = torch.randint(0, 50, (2, n))
            got = ((ids.to("tpu") + 76) * 3).sum(1).cpu()
            assert torch.equal(got, ((ids + 76) * 3).sum(1))
            counts.append(debug.metrics()["compiles"])
        print("COUNTS", counts)
    """, TORCHTPU_EAGER_MODE="fused", TORCHTPU_DISK_CACHE="0"), "COUNTS")
    counts = eval(out.split("COUNTS")[1].strip().splitlines()[0])
    assert counts == [1, 2, 2, 2, 2], counts  # exact, then one bucketed window


def test_layer_norm_at_a_length_equal_to_its_hidden_size():
    """A layer norm over a hidden size of 128 at a length of 128: the
    normalized dims are fixed ones (weight and bias span them), so the
    length's 128 is no ambiguity and the bucketed program serves it (GPT-2
    training over lengths 64..128 compiled its whole forward exact at 128:
    34 programs there, now 2); nor is it for a sum of the whole tensor.
    Values and gradients equal the CPU's."""
    out = check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        torch.manual_seed(0)
        emb, ln = torch.nn.Embedding(50, 128), torch.nn.LayerNorm(128)
        with torch.no_grad():
            ln.weight.uniform_()
        temb, tln = torch.nn.Embedding(50, 128).to("tpu"), torch.nn.LayerNorm(128).to("tpu")
        temb.load_state_dict(emb.state_dict())
        tln.load_state_dict(ln.state_dict())
        for n in [100, 110, 128]:
            ids = torch.randint(0, 50, (2, n))
            want = ln(emb(ids))
            want.square().sum().backward()
            got = tln(temb(ids.to("tpu")))
            got.square().sum().backward()
            torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
            for a, b in [(tln.weight, ln.weight), (tln.bias, ln.bias), (temb.weight, emb.weight)]:
                torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-4)
                a.grad = b.grad = None
            torch.tpu.synchronize()
            names = [c["what"] for c in debug.compiles(clear=True)]
        print("AT128", names)
    """, TORCHTPU_DISK_CACHE="0"), "AT128")
    names = eval(out.split("AT128")[1].strip().splitlines()[0])
    assert "native_layer_norm" not in names and "sum" not in names, names


@pytest.mark.parametrize("buckets", ["pow2", "16,32"])
def test_fills_of_two_recent_lengths_stay_exact(buckets):
    """A fill whose dims are two different recent token lengths ([3, 4]
    after batches of length 3 and 4) is not padded: a storage is padded in
    dims of one true size only. It was, from its first call (explicit sizes,
    or after a batch padded from its first upload), and a complex copy into
    it corrupted the heap and polar's lowering failed."""
    check(run_script("""
        import warnings
        import torch, torchtpu
        torch.randint(0, 9, (2, 100)).to("tpu")      # padded from its first upload
        for n in (3, 4, 5, 3, 4):
            torch.randint(0, 9, (2, n)).to("tpu")
        warnings.simplefilter("ignore")
        x = torch.randn(3, 4, dtype=torch.complex64)
        d = torch.zeros(3, 4, device="tpu")
        d.copy_(x.to("tpu"))
        assert torch.equal(d.cpu(), x.real)
        h = torch.empty(3, 4, dtype=torch.complex128)
        h.copy_(x.to("tpu"))
        assert torch.equal(h, x.to(torch.complex128))
        theta = torch.outer(torch.arange(5.0), torch.rand(4))
        f = torch.polar(torch.ones_like(theta, device="tpu"), theta.to("tpu"))
        torch.testing.assert_close(f.cpu(), torch.polar(torch.ones_like(theta), theta))
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0", TORCHTPU_BUCKETS=buckets))


SWEEP = """
    import hashlib, torch, torchtpu
    from torchtpu import debug
    torch.manual_seed(0)
    digest = hashlib.sha256()
    for i in range(1, N):
        delta = torch.empty(i, dtype=torch.double, device="tpu").uniform_(-1, 1)
        indices = delta.cumsum(0).long()
        inp = torch.randn(indices.abs().max() + 1, device="tpu")
        values = torch.randn(indices.size(0), device="tpu")
        out = inp.index_put((indices,), values, accumulate=True)
        want = inp.cpu().index_put((indices.cpu(),), values.cpu(), accumulate=True)
        torch.testing.assert_close(out.cpu(), want)
        assert torch.equal(indices.cpu(), delta.cpu().cumsum(0).long())
        if i < 40:
            for t in (delta, values):
                digest.update(t.cpu().numpy().tobytes())
    per_op = {}
    for c in debug.compiles():
        per_op[c["what"]] = per_op.get(c["what"], 0) + 1
    print(digest.hexdigest(), debug.metrics()["compiles"], sorted(per_op.items()))
"""


def test_a_sweep_over_sizes_compiles_per_bucket():
    """A loop over sizes (PyTorch's test_index_put_accumulate_duplicate_indices:
    random fills of sizes 1, 2, 3, ..., a cumsum, a max, index_put with
    accumulate) is seen stepping evenly and bucketed from its fourth size:
    each op compiles per bucket, not per size. The random values are the
    ones an exact draw gives (the stream is counter-based): equal, byte for
    byte, with buckets off."""
    on = run_script("\n    N = 300" + SWEEP, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0")
    off = run_script("\n    N = 40" + SWEEP, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0",
                     TORCHTPU_BUCKETS="off")
    assert on.returncode == 0 and off.returncode == 0, (on.stderr[-3000:], off.stderr[-3000:])
    d_on, n_on, ops_on = on.stdout.split(" ", 2)
    d_off, n_off, _ = off.stdout.split(" ", 2)
    assert d_on == d_off
    # 299 sizes: 3 exact sizes and 3 buckets (128, 256, 512) for each op
    # of the sweep; randn and index_put also per value of the max.
    assert int(n_off) > 200, n_off  # 39 sizes, an exact program each
    ops = dict(eval(ops_on))
    for op in ("uniform_", "cumsum", "abs", "max", "copy_"):
        assert ops[op] == 6, ops
    assert int(n_on) < 200, (n_on, ops)


def test_evenly_stepping_sizes_that_stay_alive_stay_exact():
    """Parameters, gradients and optimizer state of evenly stepping widths
    (Linear(k + 2, k + 3) for k in 0..9) are made once and kept: not a
    sweep, which drops each size's tensor, so they stay exact."""
    check(run_script("""
        import torch, torchtpu
        from torchtpu import debug
        kept = [torch.ones(k + 3, device="tpu") for k in range(10)]
        assert all(torch.equal(t.cpu(), torch.ones(k + 3)) for k, t in enumerate(kept))
        assert not [c for c in debug.compiles() if "bucketed" in c["reason"]]
        for k in range(10):
            t = torch.ones(k + 20, device="tpu")      # dropped each time: a sweep
        torch.tpu.synchronize()
        assert [c for c in debug.compiles() if "bucketed" in c["reason"]]
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))


def test_accumulate_keeps_negative_zero():
    """index_put with accumulate over padded indices: the padding adds -0.0
    at index 0, so a -0.0 there that no true index touches stays -0.0; a
    value broadcast to every index (a scalar) is not padded, and the call
    runs exact."""
    check(run_script("""
        import torch, torchtpu
        for i in range(1, 12):
            idx = torch.arange(1, i + 1, device="tpu")
            vals = torch.ones(i, device="tpu")
            inp = torch.full((16,), -0.0, device="tpu")
            out = inp.index_put((idx,), vals, accumulate=True).cpu()
            want = torch.full((16,), -0.0).index_put((idx.cpu(),), vals.cpu(), accumulate=True)
            assert torch.equal(out, want) and torch.equal(out.signbit(), want.signbit()), (i, out)
            # a value broadcast to every index is no padded operand: exact
            one = torch.tensor(1.0, device="tpu")
            out = torch.zeros(16, device="tpu").index_put((idx,), one, accumulate=True).cpu()
            assert torch.equal(out, torch.zeros(16).index_put((idx.cpu(),), one.cpu(), accumulate=True)), (i, out)
        from torchtpu import debug
        assert any("bucketed" in c["reason"] for c in debug.compiles() if c["what"] == "_index_put_impl_")
        print("ok")
    """, TORCHTPU_EAGER_MODE="strict", TORCHTPU_DISK_CACHE="0"))
