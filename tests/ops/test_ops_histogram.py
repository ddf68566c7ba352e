"""torch.histogram and torch.histogramdd (bin counts with or without a
range, given edges, weights, density) on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram_bin_ct(dtype):
    x = rand(4, 50, dtype=dtype, seed=1)
    w = rand(4, 50, dtype=dtype, seed=2, low=0.0)
    check(lambda t: torch.histogram(t, 7), x)
    check(lambda t: torch.histogram(t, 5, range=(-1.0, 1.5)), x)  # some elements outside
    check(lambda t, u: torch.histogram(t, 6, weight=u, density=True), x, w)
    check(lambda t: torch.histogram(t, 100), rand(1000, dtype=dtype))


def test_histogram_bins_tensor_and_edges():
    x = torch.tensor([1.0, 2.0, 2.0, 3.0, 10.0, 2.5, 0.0, float("nan")])
    check(lambda t, e: torch.histogram(t, e), x, torch.tensor([0.0, 1.0, 2.5, 3.0]))  # on-edge elements, last edge
    check(lambda t, e: torch.histogram(t, e, weight=torch.ones_like(t), density=True), x[:-1],
          torch.tensor([0.0, 1.0, 2.5, 10.0]))
    check(lambda t, e: torch.histogram(t, e), x, torch.tensor([3.0, 1.0, 2.0]))  # not increasing: the CPU's search


def test_histogram_degenerate():
    for x in [torch.tensor(2.0), torch.tensor([2.0, 2.0]), torch.tensor([])]:  # widened range, empty input
        check(lambda t: torch.histogram(t, 3), x)
        check(lambda t: torch.histogram(t, 3, density=True), x)
    hist, edges = torch.empty(0, device=DEV), torch.empty(0, device=DEV)
    torch.histogram(torch.tensor([0.5, 1.5], device=DEV), 2, out=(hist, edges))
    assert torch.equal(hist.cpu(), torch.tensor([1.0, 1.0])) and edges.shape == (3,)


def hdd(*args, **kwargs):
    r = torch.histogramdd(*args, **kwargs)
    return (r.hist, *r.bin_edges)


def test_histogramdd():
    x = rand(40, 3, seed=3)
    check(lambda t: hdd(t, [2, 3, 4]), x, noncontig=False)
    check(lambda t, u: hdd(t, 3, weight=u, density=True), x, rand(40, seed=4, low=0.0), noncontig=False)
    check(lambda t: hdd(t, [2, 2, 2], range=[-1.0, 1.0, 0.0, 2.0, -3.0, 3.0]), x, noncontig=False)
    edges = [torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([-2.0, 2.0]), torch.tensor([-1.0, 0.5, 3.0])]
    check(lambda t, *e: hdd(t, list(e), density=True), x, *edges, noncontig=False)
    check(lambda t: hdd(t, [2, 3], density=True), rand(2, 3, 2).double(), noncontig=False)  # points (..., D)
    check(lambda t: hdd(t, [2, 3]), torch.empty(0, 2), noncontig=False)
    for bad, exc in [(lambda t: torch.histogramdd(t[:, 0], 3), RuntimeError),
                     (lambda t: torch.histogramdd(t, [3, 3]), RuntimeError),
                     (lambda t: torch.histogramdd(t, [3, 0, 2]), RuntimeError),
                     (lambda t: torch.histogramdd(t, 2, range=[0.0, 1.0]), RuntimeError),
                     (lambda t: torch.histogramdd(t, [t.new_tensor([0.0, 1.0])]), RuntimeError)]:
        with pytest.raises(exc):
            bad(x)
        with pytest.raises(exc):
            bad(x.to(DEV))


def test_histogram_bad_input_raises_like_cpu():
    x = torch.tensor([1.0, 2.0, 3.0])
    cases = [(lambda t: torch.histogram(t, 0), RuntimeError),
             (lambda t: torch.histogram(t, 3, range=(2.0, 1.0)), RuntimeError),
             (lambda t: torch.histogram(t, 3, range=(0.0, float("inf"))), RuntimeError),
             (lambda t: torch.histogram(torch.cat([t, t.new_tensor([float("nan")])]), 3), RuntimeError),
             (lambda t: torch.histogram(t.long(), 3), NotImplementedError),
             (lambda t: torch.histogram(t.bfloat16(), 3), NotImplementedError),
             (lambda t: torch.histogram(t, 3, weight=t.new_ones(2)), RuntimeError),
             (lambda t: torch.histogram(t, t.new_tensor([1.0, 2.0]).double()), RuntimeError),
             (lambda t: torch.histogram(t, t.new_zeros(0)), RuntimeError)]
    for f, exc in cases:
        with pytest.raises(exc):
            f(x)
        with pytest.raises(exc):
            f(x.to(DEV))
