"""bincount: the glue reads the length (one host read) and the engine op
counts (ops/bincount.c); the output dtype and the argument errors are the
CPU's (the op's meta shape)."""
import pytest
import torch

import torchtpu

X = torch.tensor([0, 3, 3, 1, 7, 3])


@pytest.fixture(autouse=True)
def strict_after():
    yield
    torchtpu.set_eager_mode("strict")
    torch.tpu.synchronize()


def both(fn, *args):
    ref = fn(*args)
    got = fn(*(a.to("tpu") if torch.is_tensor(a) else a for a in args))
    assert got.device.type == "tpu" and got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got.cpu(), ref)
    return got


@pytest.mark.parametrize("wdtype", [None, torch.float32, torch.float64, torch.float16,
                                    torch.bfloat16, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("minlength", [0, 3, 12])
def test_bincount_dtype_and_values_match_cpu(wdtype, minlength):
    w = None if wdtype is None else (torch.rand(6, generator=torch.Generator().manual_seed(0)) * 4).to(wdtype)
    both(lambda x, w: torch.bincount(x, w, minlength=minlength), X, w)


@pytest.mark.parametrize("xdtype", [torch.int8, torch.uint8, torch.int32, torch.int64], ids=str)
def test_bincount_integer_inputs(xdtype):
    both(torch.bincount, X.to(xdtype))


@pytest.mark.parametrize("weighted", [False, True])
def test_bincount_empty_input_is_int64_zeros_as_on_cpu(weighted):
    e = torch.zeros(0, dtype=torch.long)
    w = torch.zeros(0) if weighted else None
    got = both(lambda x, w: torch.bincount(x, w, minlength=4), e, w)
    assert got.dtype == torch.int64


@pytest.mark.parametrize("args", [
    (X.float(),), (X.view(2, 3),), (torch.tensor([1, -1]),), (X, torch.ones(5)),
    (X, None, -1), (torch.tensor([True, False]),)], ids=range(6))
def test_bincount_errors_match_cpu(args):
    with pytest.raises(Exception) as cpu:
        torch.bincount(*args)
    with pytest.raises(type(cpu.value)) as tpu:
        torch.bincount(*(a.to("tpu") if torch.is_tensor(a) else a for a in args))
    assert str(tpu.value).split("\n")[0].endswith(str(cpu.value).split("\n")[0])


def test_bincount_same_in_every_mode():
    w = torch.rand(6, dtype=torch.float64)
    ref = torch.bincount(X, w, minlength=9)
    for mode in ("strict", "fused", "debug"):
        with torchtpu.set_eager_mode(mode):
            got = torch.bincount(X.to("tpu"), w.to("tpu"), minlength=9).cpu()
        torch.testing.assert_close(got, ref, msg=mode)
