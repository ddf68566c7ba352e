"""Views, storages and lazy clones on tpu: reading a view (item(),
iterating, a strided slice to the host) reads the storage where it lies,
with no program per offset; a loop over a tensor's rows, columns or blocks
compiles one program per kind of view, its offsets run-time values, in
every eager mode; a slice of a tpu storage is refused with a clear error;
torch._lazy_clone is a copy, copy-on-write until either side is written."""
import pytest
import torch

import torchtpu

T = "tpu"


def compiled():
    """Programs compiled so far, once every queued compile is done (the
    compile log is a ring: its length stops growing when it is full)."""
    torch.tpu.synchronize()
    return torchtpu.debug.metrics()["compiles"]


def test_view_reads_compile_nothing():
    """Reading a view (item(), iterating, a strided slice to the host) reads
    the storage where it lies: no program per offset."""
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(T)
    d.sum().item()
    n = compiled()
    assert [v.item() for v in d[1]] == x[1].tolist()
    assert [v.item() for v in d[:, 2]] == x[:, 2].tolist()
    assert torch.equal(d[:, 1:5:2].cpu(), x[:, 1:5:2])
    assert torch.equal(d.t()[2].to("cpu", torch.int32), x.t()[2].to(torch.int32))
    assert compiled() == n
    # a program's result, a conjugate view and an unwritten storage
    m = d @ d.t()
    assert m[1, 2].item() == (x @ x.t())[1, 2].item()
    c = torch.randn(5, dtype=torch.complex64)
    assert torch.equal(c.to(T).conj()[1:4].cpu(), c.conj()[1:4])
    assert torch.equal(torch.zeros(5, device=T)[1:3].cpu(), torch.zeros(2))
    # a write after a read is seen by the next read
    d[1, 1] = -5
    assert d[1, 1].item() == -5


def test_view_offsets_are_run_time_values():
    """A loop over a tensor's rows, columns or blocks compiles one program
    per kind of view, not one per offset: a call that runs now passes its
    views' offsets to the program. Reads and writes (in place through
    strided views) match the CPU."""
    x = torch.randn(16, 40)
    d = x.to(T)
    (d[:, 1] * 2).sum().item()  # warm: one column program
    n = compiled()
    cols = [(d[:, k] * 2 + 1).sum() for k in range(1, 40)]
    rows = [(d[k] - d[k + 1]).abs().max() for k in range(1, 15)]
    blocks = [d[k:k + 2, 3:7].clone() for k in range(1, 14)]
    assert compiled() - n <= 12, torchtpu.debug.compiles()[-13:]
    torch.testing.assert_close(torch.stack(cols).cpu(),
                               torch.stack([(x[:, k] * 2 + 1).sum() for k in range(1, 40)]))
    torch.testing.assert_close(torch.stack(rows).cpu(),
                               torch.stack([(x[k] - x[k + 1]).abs().max() for k in range(1, 15)]))
    for k, b in enumerate(blocks, 1):
        assert torch.equal(b.cpu(), x[k:k + 2, 3:7])
    y = torch.zeros(12, 30)
    e = y.to(T)
    n = compiled()
    for k in range(1, 30):
        for a in (y, e):
            a[:, k] = k
            a[k % 12, 5:9] += 1.5
            a.t()[k, 3:11:2].mul_(0.5)
    assert compiled() - n <= 12, torchtpu.debug.compiles()[-13:]
    assert torch.equal(e.cpu(), y)


@pytest.mark.parametrize("mode", ["debug", "fused"])
def test_view_offsets_in_other_modes(mode):
    """The same loops in debug mode (offsets at run time too) and in fused
    windows (offsets in the window's signature) give the CPU's values."""
    x = torch.randn(8, 10)
    y = x.clone()
    with torchtpu.set_eager_mode(mode):
        d = x.to(T)
        for k in range(1, 10):
            d[:, k] += d[:, k - 1] * 0.5
            y[:, k] += y[:, k - 1] * 0.5
        got = d.cpu()
    torch.testing.assert_close(got, y)


def test_storage_slice_is_refused_not_a_crash():
    """UntypedStorage[a:b] of a tpu storage would point into another
    buffer's memory: refused where it is made, with a clear error; the
    storage itself, its elements and tensors over it still work."""
    v = torch.arange(15, dtype=torch.int16).reshape(3, 5).to(T)
    s = v.untyped_storage()
    with pytest.raises(NotImplementedError, match="slice of a tpu storage"):
        s[2:4]
    assert s.nbytes() == 30
    assert v.storage()[14] == 14
    t = torch.tensor([], dtype=torch.int16, device=T).set_(torch.UntypedStorage(6, device=T))
    assert t.shape == (3,)


def test_lazy_clone_is_a_copy():
    def lazy(d):
        a = torch.arange(8.0, device=d)
        v = a[1::2]
        b = torch._lazy_clone(v)
        a.add_(1)
        b.mul_(10)
        return torch.cat([a, b, torch.tensor([float(b.stride(0)), float(b.storage_offset())], device=d)])

    torch.testing.assert_close(lazy(T).cpu(), lazy("cpu"), rtol=0, atol=0)
    x = torch.randn(3, device="tpu", requires_grad=True)
    torch._lazy_clone(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.ones(3))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_lazy_clone_is_copy_on_write(mode):
    """torch._lazy_clone shares the buffer until either side is written:
    then the written one gets a copy of its own (reading does not copy),
    through ops, in-place views, copies from the host and from tpu."""
    writes = {
        "op": lambda t: t.add_(10),
        "view": lambda t: t[1].mul_(3),
        "host copy": lambda t: t.copy_(torch.full((2, 2), 7.0)),
        "tpu copy": lambda t: t.copy_(torch.full((2, 2), 5.0, device=T)),
        "fill": lambda t: t.fill_(-1),
    }
    with torchtpu.set_eager_mode(mode):
        for name, write in writes.items():
            for side in ("source", "clone"):
                a = torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=T)
                c = a._lazy_clone()
                assert torch._C._is_cow_tensor(a) and torch._C._is_cow_tensor(c)
                _ = (a + c).cpu()  # a read keeps both copy-on-write
                assert torch._C._is_cow_tensor(a) and torch._C._is_cow_tensor(c), name
                w, other = (a, c) if side == "source" else (c, a)
                ref = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
                write(w)
                write(ref)
                assert not torch._C._is_cow_tensor(w), (name, side)
                assert torch.equal(w.cpu(), ref), (name, side)
                assert torch.equal(other.cpu(), torch.tensor([[0.0, 1.0], [2.0, 3.0]])), (name, side)
