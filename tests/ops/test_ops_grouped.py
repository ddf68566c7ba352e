"""einsum and other composite ops on tpu against the CPU.

einsum stays PyTorch's composite form (parsing, broadcasting, diagonals,
autograd and autocast through the ops it runs) in tpu's contraction order;
in strict mode the ops of one call run as one program, where each of its
permutes, products and sums was a program per shape. Other composites whose
decomposition runs several programs (scaled_dot_product_attention, losses,
distances) are grouped the same way."""
import pytest
import torch
import torch.backends.opt_einsum as opt_einsum
import torch.nn.functional as F

import torchtpu
import torchtpu.debug as debug
from optest import DEV, assert_close, check_fb, rand, same_error

# (equation, operand shapes): products, sums, diagonals, ellipses with
# broadcasting, implicit outputs, size-1 labels that broadcast, 3-4 operands
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij...,jk...", [(3, 4, 2), (4, 5, 1)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]),
    ("Aa,aB->AB", [(2, 3), (3, 4)]),
    ("...ij,...jk,k->i", [(2, 3, 4), (4, 5), (5,)]),  # an ellipsis summed
]


def operands(shapes, dtype=torch.float32, grad=True):
    return [rand(*s, dtype=dtype, requires_grad=grad, seed=k) for k, s in enumerate(shapes)]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_forward_and_backward_like_cpu(eq, shapes):
    check_fb(lambda *ts: torch.einsum(eq, *ts), *operands(shapes), noncontig=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.complex64])
def test_dtypes(dtype):
    for eq, shapes in (CASES[1], CASES[6], CASES[8]):
        # three operands are contracted in tpu's order, which may be another
        # than the CPU's: in bfloat16 the intermediate rounding then differs
        tol = dict(atol=5e-2, rtol=5e-2) if dtype == torch.bfloat16 and len(shapes) > 2 else {}
        check_fb(lambda *ts: torch.einsum(eq, *ts), *operands(shapes, dtype), **tol)


def test_three_operands_one_program_whatever_the_strategy():
    a, b, c = operands([(2, 30), (30, 40), (40,)], torch.float64, grad=False)
    expected = torch.einsum("ij,jk,k->i", a, b, c)
    ta, tb, tc = a.to(DEV), b.to(DEV), c.to(DEV)
    torch.tpu.synchronize()
    debug.compiles(clear=True)
    flags = [dict(enabled=False)]
    if opt_einsum.is_available():
        flags += [dict(enabled=True, strategy=s) for s in ("greedy", "optimal", "auto")]
    for f in flags:
        with opt_einsum.flags(**f):
            assert_close(torch.einsum("ij,jk,k->i", ta, tb, tc), expected)
    # one program: the order is tpu's (j contracted with the vector first)
    assert len(debug.compiles(clear=True)) == 1


def test_sublist_format_and_paths():
    a, b, c = operands([(2, 3), (3, 4), (4, 5)], torch.float64, grad=False)
    expected = torch.einsum("ij,jk,kl->il", a, b, c)
    ta, tb, tc = a.to(DEV), b.to(DEV), c.to(DEV)
    assert_close(torch.einsum(ta, [0, 1], tb, [1, 2], tc, [2, 3], [0, 3]), expected)
    if opt_einsum.is_available():
        for strategy in ("greedy", "optimal"):
            with opt_einsum.flags(enabled=True, strategy=strategy):
                assert_close(torch.einsum("ij,jk,kl->il", ta, tb, tc), expected)
        with opt_einsum.flags(enabled=False):
            assert_close(torch.einsum("ij,jk,kl->il", ta, tb, tc), expected)


def test_one_program_per_call_in_strict_mode():
    x, y, z = (t.to(DEV) for t in operands([(3, 4, 5), (5, 6), (6, 2)], grad=False))
    torch.tpu.synchronize()
    debug.compiles(clear=True)
    r = torch.einsum("ijk,kl,lm->im", x, y, z)  # a sum, two products, permutes
    torch.tpu.synchronize()
    log = debug.compiles(clear=True)
    assert len(log) == 1 and log[0]["what"].startswith("fused window"), log
    again = torch.einsum("ijk,kl,lm->im", x, y, z)
    torch.tpu.synchronize()
    assert debug.compiles(clear=True) == []
    assert_close(again, r.cpu())
    assert torchtpu.get_eager_mode() == "strict"
    with torch.inference_mode():  # no autograd key: the backend's kernel
        torch.einsum("ijk,kl->il", x, y)
        torch.tpu.synchronize()
    assert len(debug.compiles(clear=True)) == 1


def test_other_modes_unchanged():
    x, y = (t.to(DEV) for t in operands([(3, 4), (4, 5)], grad=False))
    with torchtpu.set_eager_mode("fused"):
        r = torch.einsum("ij,jk->ik", x, y) + 1  # one window with the add
        assert torchtpu.get_eager_mode() == "fused"
    with torchtpu.set_eager_mode("debug"):
        d = torch.einsum("ij,jk->ik", x, y) + 1
    assert_close(r, d.cpu())


def test_errors_like_cpu_and_mode_restored():
    same_error(lambda dev: torch.einsum("ij,jk->ik", torch.ones(2, 3, device=dev), torch.ones(4, 5, device=dev)))
    same_error(lambda dev: torch.einsum("ij->k", torch.ones(2, 3, device=dev)))
    same_error(lambda dev: torch.einsum("ii->i", torch.ones(2, 3, device=dev)))
    assert torchtpu.get_eager_mode() == "strict"
    t = torch.ones(2, 2, device=DEV)
    assert torch.einsum("ij->", t).item() == 4.0  # the runtime still runs


def test_empty_and_special_values_like_cpu():
    nan, inf = float("nan"), float("inf")
    cases = [
        ("ij,jk->ik", [torch.ones(0, 3), torch.ones(3, 4)]),
        ("ij,jk->ik", [torch.ones(2, 0), torch.ones(0, 4)]),  # an empty contraction: zeros
        ("ij,jk,kl->il", [torch.ones(2, 0), torch.ones(0, 4), torch.ones(4, 2)]),
        ("ij,jk,k->i", [torch.tensor([[nan, 1.0], [2.0, 3.0]]), torch.ones(2, 3), torch.tensor([1.0, inf, 0.0])]),
    ]
    for eq, ts in cases:
        assert_close(torch.einsum(eq, *(t.to(DEV) for t in ts)), torch.einsum(eq, *ts))
    q = torch.ones(0, 2, 3, 4)
    assert_close(F.scaled_dot_product_attention(q.to(DEV), q.to(DEV), q.to(DEV)),
                 F.scaled_dot_product_attention(q, q, q))
    x, t = torch.tensor([[nan, 1.0], [0.0, 1.0]]), torch.tensor([0, 1])
    assert_close(F.cross_entropy(x.to(DEV), t.to(DEV)), F.cross_entropy(x, t))


def test_mixed_devices_refused_like_cuda():
    with pytest.raises(RuntimeError):
        torch.einsum("ij,jk->ik", torch.ones(2, 3, device=DEV), torch.ones(3, 4)).cpu()


def test_compiled_and_autocast():
    a, b = operands([(2, 3, 4), (2, 4, 5)], grad=False)
    fn = torch.compile(lambda x, y: torch.einsum("bij,bjk->bik", x, y).relu(), backend="tpu")
    assert_close(fn(a.to(DEV), b.to(DEV)), torch.einsum("bij,bjk->bik", a, b).relu())
    with torch.autocast("tpu", dtype=torch.bfloat16):
        r = torch.einsum("bij,bjk->bik", a.to(DEV), b.to(DEV))
    assert r.dtype == torch.bfloat16  # the product inside was autocast, as on the CPU


# ------------------------------------------------------------------ other composites
# CompositeImplicitAutograd ops whose decomposition runs several programs
# are grouped the same way in strict mode (register_grouped_composites).

GROUPED = [
    ("scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)]),
    ("causal sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)]),
    ("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=1), [(4, 6), (4, 6)]),
    ("pairwise_distance", lambda a, b: F.pairwise_distance(a, b), [(4, 6), (4, 6)]),
    ("triplet_margin_loss", lambda a, b, c: F.triplet_margin_loss(a, b, c), [(4, 6), (4, 6), (4, 6)]),
    ("kl_div", lambda a, b: F.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"), [(4, 6), (4, 6)]),
]


@pytest.mark.parametrize("name,fn,shapes", GROUPED, ids=[g[0] for g in GROUPED])
def test_grouped_composites_like_cpu(name, fn, shapes):
    check_fb(fn, *operands(shapes), noncontig=True)


def test_grouped_composites_one_program():
    q, k, v = (t.to(DEV) for t in operands([(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)], grad=False))
    t = torch.randint(0, 6, (4,)).to(DEV)
    x = rand(4, 6, seed=9).to(DEV)
    for fn in (lambda: F.scaled_dot_product_attention(q, k, v), lambda: F.cross_entropy(x, t),
               lambda: F.pairwise_distance(x, x + 1)):
        fn()
        torch.tpu.synchronize()
        before = debug.metrics()["executions"]
        fn()
        torch.tpu.synchronize()
        # pairwise_distance's `x + 1` is its own program
        assert debug.metrics()["executions"] - before <= 2
    by_op = torch.ops.aten.scaled_dot_product_attention.default.decompose
    by_op(q, k, v)
    torch.tpu.synchronize()
    before = debug.metrics()["executions"]
    by_op(q, k, v)
    torch.tpu.synchronize()
    assert debug.metrics()["executions"] - before >= 5  # its math form op by op
    assert torchtpu.get_eager_mode() == "strict"


def test_a_composites_fills_are_in_its_program():
    """Causal attention's math form makes its own temporaries by filling
    new tensors (the mask's ones, the -inf and zero scalars); a composite's
    fills are recorded in its window, not launched each as a program before
    it: one program a call in strict and in fused mode, where the fills were
    four more, and the same values as the CPU."""
    qc, kc, vc = operands([(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)], grad=False)
    q, k, v = qc.to(DEV), kc.to(DEV), vc.to(DEV)
    expected = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    for mode in ("strict", "fused"):
        with torchtpu.set_eager_mode(mode):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.tpu.synchronize()
            before = debug.metrics()["executions"]
            r = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.tpu.synchronize()
            assert debug.metrics()["executions"] - before == 1, mode
        assert_close(r, expected)


def test_a_backward_passs_fills_are_in_its_window():
    """The zeros a backward formula writes a gradient into (slice_backward
    for rotary embedding's halves) are recorded in the fused window: a step
    launches its window and the loss's seed of ones, not a program per fill
    as well; the gradient equals the CPU's."""
    def f(x):
        a, b = x[:, :8], x[:, 8:]
        return torch.cat([-b, a], dim=-1).mul(x).sum()

    xc = rand(4, 16, requires_grad=True)
    xt = xc.detach().to(DEV).requires_grad_()
    with torchtpu.set_eager_mode("fused"):
        f(xt).backward()
        xt.grad = None
        torch.tpu.synchronize()
        before = debug.metrics()["executions"]
        f(xt).backward()
        torch.tpu.synchronize()
        launched = debug.metrics()["executions"] - before
    f(xc).backward()
    assert_close(xt.grad, xc.grad)
    assert launched == 2, launched


def test_grouped_composite_error_at_its_op_in_strict_mode():
    """A grouped composite runs as one window in strict mode, and strict
    mode raises a data-dependent error at its op: cross-entropy's target
    check is read when the group ends, not left for the next read."""
    x = torch.randn(4, 3)
    t = torch.tensor([0, 2, 5, 1])
    with torchtpu.set_eager_mode("strict"):
        same_error(lambda d: F.cross_entropy(x.to(d), t.to(d)))
        # nothing left over for the next read
        assert F.cross_entropy(x.to(DEV), t.clamp(max=2).to(DEV)).item() == pytest.approx(
            F.cross_entropy(x, t.clamp(max=2)).item(), rel=1e-6)
