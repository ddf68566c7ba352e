"""The ops of torch.amp.GradScaler (csrc/core/ops/amp.c) against CPU."""
import pytest
import torch

from optest import DEV, assert_close, noncontiguous, rand


def _grads(dtype, bad=None):
    gs = [rand(5, dtype=dtype), rand(3, 4, dtype=dtype), noncontiguous(rand(4, 3, dtype=dtype)),
          rand(2, 3, dtype=dtype)[:, 1]]
    if bad is not None:
        gs[1][1, 2] = bad
    return gs


def _unscale(gs, found, inv, device):
    gs = [g.clone(memory_format=torch.preserve_format).to(device) for g in gs]
    found, inv = found.to(device), inv.to(device)
    torch._amp_foreach_non_finite_check_and_unscale_(gs, found, inv)
    return gs, found


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("found0", [0.0, 1.0])
def test_unscale_matches_cpu(dtype, bad, found0):
    gs = _grads(dtype, bad)
    inv = torch.full((), 1 / 1024.0)
    exp, found_c = _unscale(gs, torch.full((), found0), inv, "cpu")
    act, found_t = _unscale(gs, torch.full((), found0), inv, DEV)
    assert_close(found_t, found_c, msg="found_inf")
    for i, (a, e) in enumerate(zip(act, exp)):
        assert_close(a, e, msg=f"grad {i}")


def test_unscale_through_views_and_shapes():
    """Views of one storage are unscaled in place; found_inf may be [1].
    (The views do not overlap: the engine reads every input before it
    writes, where CPU unscales overlapping elements twice.)"""
    base_c = rand(4, 6)
    base_t = base_c.to(DEV)
    for base, dev in ((base_c, "cpu"), (base_t, DEV)):
        found = torch.zeros(1, device=dev)
        torch._amp_foreach_non_finite_check_and_unscale_([base[:2, 1], base[2:]], found,
                                                         torch.full((1,), 0.5, device=dev))
    assert_close(base_t, base_c)


def test_unscale_empty_list_keeps_found_inf():
    found = torch.ones((), device=DEV)
    torch._amp_foreach_non_finite_check_and_unscale_([], found, torch.ones((), device=DEV))
    assert found.item() == 1.0


@pytest.mark.parametrize("args,exc", [
    (lambda d: ([torch.ones(2, device=d)], torch.zeros(2, device=d), torch.ones((), device=d)), RuntimeError),
    (lambda d: ([torch.ones(2, device=d)], torch.zeros((), device=d), torch.ones(2, device=d)), RuntimeError),
    (lambda d: ([torch.ones(2, device=d)], torch.zeros((), device=d, dtype=torch.float64),
                torch.ones((), device=d)), RuntimeError),
    (lambda d: ([torch.ones(2, device=d, dtype=torch.long)], torch.zeros((), device=d),
                torch.ones((), device=d)), NotImplementedError),
])
def test_unscale_errors_match_cpu(args, exc):
    with pytest.raises(exc):
        torch._amp_foreach_non_finite_check_and_unscale_(*args("cpu"))
    with pytest.raises(exc):
        torch._amp_foreach_non_finite_check_and_unscale_(*args(DEV))


def test_update_scale_matches_cpu():
    """A sequence of clean and overflowing steps, growth overflowing float32
    at the end: the scale and tracker follow CPU's step by step."""
    found_seq = [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]
    states = {}
    for dev in ("cpu", DEV):
        scale = torch.full((), 3e38 / 64, device=dev)
        tracker = torch.zeros((), dtype=torch.int32, device=dev)
        seen = []
        for f in found_seq:
            out = torch._amp_update_scale_(scale, tracker, torch.full((), float(f), device=dev), 4.0, 0.5, 3)
            assert out is scale
            seen.append((scale.item(), tracker.item()))
        states[dev] = seen
    assert states[DEV] == states["cpu"]


@pytest.mark.parametrize("make", [
    lambda d: (torch.ones((), device=d), torch.zeros((), device=d), torch.zeros((), device=d)),
    lambda d: (torch.ones(2, device=d), torch.zeros((), dtype=torch.int32, device=d), torch.zeros((), device=d)),
    lambda d: (torch.ones((), device=d, dtype=torch.float64), torch.zeros((), dtype=torch.int32, device=d),
               torch.zeros((), device=d)),
])
def test_update_scale_errors_match_cpu(make):
    with pytest.raises(RuntimeError):
        torch._amp_update_scale_(*make("cpu"), 2.0, 0.5, 3)
    with pytest.raises(RuntimeError):
        torch._amp_update_scale_(*make(DEV), 2.0, 0.5, 3)
