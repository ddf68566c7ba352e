"""unique, unique_consecutive and their dim= forms on tpu against CPU: the
count is read back to the host (as for nonzero), the rest is one program."""
import pytest
import torch

from optest import DEV, check, rand

FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def data(dtype, shape=(4, 6), seed=0):
    if dtype == torch.bool:
        return rand(*shape, dtype=torch.bool, seed=seed)
    # few distinct values, so that there are repeats and runs
    return torch.randint(-2, 3, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_unique_flat(dtype):
    x = data(dtype)
    check(lambda t: torch.unique(t, sorted=True, return_inverse=True, return_counts=True), x)
    check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x)


@pytest.mark.parametrize("inv,cnt", FLAGS[:3])
def test_unique_flags(inv, cnt):
    x = data(torch.float32, (9,), seed=2)
    check(lambda t: torch.unique(t, return_inverse=inv, return_counts=cnt), x, noncontig=False)
    check(lambda t: torch.unique_consecutive(t, return_inverse=inv, return_counts=cnt), x, noncontig=False)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_dim(dim):
    x = data(torch.float32, (5, 3, 4), seed=1)
    x[3] = x[1]  # repeated slices along every dim choice
    x[:, 2] = x[:, 0]
    x[..., 3] = x[..., 1]
    x[2] = x[1]
    check(lambda t: torch.unique(t, dim=dim, return_inverse=True, return_counts=True), x)
    check(lambda t: torch.unique_consecutive(t, dim=dim, return_inverse=True, return_counts=True), x)
    # the CPU returns inverse and counts from the dim= kernels whatever the flags say
    check(lambda t: torch.ops.aten.unique_dim(t, dim, False, False, False), x)
    check(lambda t: torch.ops.aten.unique_dim_consecutive(t, dim, False, False), x)


def test_unique_int_dim_and_scalars():
    check(lambda t: torch.unique(t, dim=0, return_inverse=True, return_counts=True), data(torch.int64, (6, 2)))
    for v in [torch.tensor(3.0), torch.tensor(True), torch.tensor(7)]:  # 0-d: the op_db samples
        check(lambda t: torch.unique(t, return_inverse=True, return_counts=True), v)
        check(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), v)


def test_unique_nan_signed_zero_and_unsorted_flag():
    x = torch.tensor([float("nan"), 1.0, float("nan"), 0.0, -0.0, 1.0, 2.0, 2.0])
    for f in [lambda t: torch.unique(t, return_inverse=True, return_counts=True),
              lambda t: torch.unique(t, sorted=False, return_inverse=True, return_counts=True),
              lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True),
              lambda t: torch.ops.aten._unique(t, False, True)]:
        check(f, x)


def test_unique_empty_and_out():
    for shape in [(0,), (0, 3)]:
        check(lambda t: torch.unique(t, return_inverse=True, return_counts=True), torch.empty(shape))
    check(lambda t: torch.unique(t, dim=0, return_inverse=True, return_counts=True), torch.empty(0, 3))
    x = data(torch.int64, (10,))
    outs = [torch.empty(0, dtype=torch.int64, device=DEV) for _ in range(3)]
    torch.ops.aten._unique2.out(x.to(DEV), True, True, True, out0=outs[0], out1=outs[1], out2=outs[2])
    for got, want in zip(outs, torch.unique(x, return_inverse=True, return_counts=True)):
        assert torch.equal(got.cpu(), want)


def test_unique_bad_input_raises_like_cpu():
    for f, exc in [(lambda t: torch.unique(t, dim=0), IndexError),  # 0-d
                   (lambda t: torch.unique(t.reshape(1, 1), dim=2), IndexError),
                   (lambda t: torch.unique(torch.empty(2, 0, device=t.device), dim=0), RuntimeError)]:
        with pytest.raises(exc):
            f(torch.tensor(1.0))
        with pytest.raises(exc):
            f(torch.tensor(1.0, device=DEV))


def test_index_fill_backward_uses_unique():
    x = rand(4, 5, requires_grad=True)
    idx = torch.tensor([1, 3, 1])
    check(lambda t, i: t.index_fill(1, i, 2.0), x, idx, grad=True, noncontig=False)
