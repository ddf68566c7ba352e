"""torch.fft on tpu against the CPU: every function, norm modes, n/s
padding and trimming, dims (negative, reordered, more than the three dims
one XLA transform takes), non-contiguous inputs, integer/bool inputs,
gradients (of a real weighted sum of the outputs), stft/istft, and the
errors bad arguments raise."""
import pytest
import torch

from optest import DEV, noncontiguous, rand

FFT_TOL = dict(atol=1e-4, rtol=1e-4)


def _real_view(t):
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def fft_check(fn, x, grad=True, noncontig=True, **tol):
    """fn(x) on tpu equals fn(x) on the CPU (values, dtype, shape), and so
    do the gradients of sum(w * fn(x)) (complex outputs as (re, im))."""
    tol = tol or FFT_TOL
    variants = [x] + ([noncontiguous(x)] if noncontig else [])
    for v in variants:
        rg = grad and (v.is_floating_point() or v.is_complex())
        xc = v.detach().clone().requires_grad_(rg)
        xt = v.detach().to(DEV).requires_grad_(rg)
        e, a = fn(xc), fn(xt)
        assert a.device.type == DEV
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        torch.testing.assert_close(a.cpu(), e.detach(), **tol)
        if rg:
            w = torch.randn(_real_view(e).shape, generator=torch.Generator().manual_seed(0))
            gc, = torch.autograd.grad((_real_view(e) * w).sum(), xc)
            gt, = torch.autograd.grad((_real_view(a) * w.to(DEV)).sum(), xt)
            torch.testing.assert_close(gt.cpu(), gc, **tol)


def crand(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


F = torch.fft
ONE_D = [F.fft, F.ifft, F.rfft, F.irfft, F.hfft, F.ihfft]
N_D = [F.fft2, F.ifft2, F.rfft2, F.irfft2, F.hfft2, F.ihfft2,
       F.fftn, F.ifftn, F.rfftn, F.irfftn, F.hfftn, F.ihfftn]
TAKES_COMPLEX = {F.fft, F.ifft, F.irfft, F.hfft, F.fft2, F.ifft2, F.irfft2, F.hfft2,
                 F.fftn, F.ifftn, F.irfftn, F.hfftn}


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("fn", ONE_D, ids=lambda f: f.__name__)
def test_one_dim(fn, norm):
    fft_check(lambda t: fn(t, norm=norm), rand(3, 8), noncontig=norm is None)


@pytest.mark.parametrize("n,dim", [(5, -1), (12, 0)])
@pytest.mark.parametrize("fn", ONE_D, ids=lambda f: f.__name__)
def test_one_dim_pad_trim(fn, n, dim):
    fft_check(lambda t: fn(t, n=n, dim=dim), rand(7, 8), noncontig=False)


@pytest.mark.parametrize("fn", sorted(TAKES_COMPLEX & set(ONE_D), key=lambda f: f.__name__),
                         ids=lambda f: f.__name__)
def test_one_dim_complex_input(fn):
    fft_check(lambda t: fn(t, norm="ortho"), crand(4, 6))


@pytest.mark.parametrize("fn", N_D, ids=lambda f: f.__name__)
def test_n_dim(fn):
    fft_check(fn, rand(2, 4, 6))


@pytest.mark.parametrize("s,dim", [((3, 10), (0, 2)), ((5, 4), (-1, 0)), (None, (2, 1))])
@pytest.mark.parametrize("fn", [F.fftn, F.rfftn, F.irfftn, F.hfftn, F.ihfftn],
                         ids=lambda f: f.__name__)
def test_n_dim_sizes_dims(fn, s, dim):
    fft_check(lambda t: fn(t, s=s, dim=dim, norm="forward"), rand(4, 3, 6), noncontig=False)


@pytest.mark.parametrize("fn", [F.fftn, F.ifftn, F.rfftn, F.irfftn], ids=lambda f: f.__name__)
def test_more_than_three_dims(fn):
    # XLA transforms at most three dims at once: four or five take chunks
    fft_check(fn, rand(2, 3, 4, 2, 5), noncontig=False)
    fft_check(lambda t: fn(t, dim=(0, 4, 1, 3)), rand(2, 3, 4, 2, 6), grad=False, noncontig=False)


def test_complex_n_dim_input():
    fft_check(lambda t: F.ifftn(t, dim=(0, 2), norm="ortho"), crand(3, 2, 5))
    fft_check(lambda t: F.irfftn(t, s=(4, 6)), crand(5, 4, 4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
@pytest.mark.parametrize("fn", [F.fft, F.rfft, F.ihfft, F.fft2, F.irfftn], ids=lambda f: f.__name__)
def test_integer_inputs(fn, dtype):
    fft_check(fn, rand(4, 6, dtype=dtype), grad=False, noncontig=False)


def test_double():
    fft_check(F.fftn, rand(3, 5, dtype=torch.float64), atol=1e-10, rtol=1e-10)
    fft_check(F.irfft, crand(4, 5, dtype=torch.complex128), atol=1e-10, rtol=1e-10)


def test_out_variants():
    x = rand(4, 8)
    for fn in (F.fft, F.rfft, F.irfft):
        out = torch.empty(0, dtype=fn(x).dtype, device=DEV)
        r = fn(x.to(DEV), out=out)
        assert r is out
        torch.testing.assert_close(out.cpu(), fn(x), **FFT_TOL)


def test_single_point():
    # (an empty batch is not tested: the CPU's MKL FFT fails on it)
    fft_check(F.rfft, rand(3, 1), noncontig=False)
    fft_check(lambda t: F.irfft(t, n=1), crand(3, 1), noncontig=False)


def test_shift():
    fft_check(lambda t: F.fftshift(F.fft2(t)), rand(5, 6), noncontig=False)
    fft_check(lambda t: F.ifftshift(t, dim=0), rand(5, 6), noncontig=False)


def test_through_views():
    # the result written into a slice of a bigger tensor, and read back
    x = rand(4, 8)
    base_c = torch.zeros(6, 5, dtype=torch.complex64)
    base_t = base_c.to(DEV)
    base_c[1:5] = F.rfft(x)
    base_t[1:5] = F.rfft(x.to(DEV))
    torch.testing.assert_close(base_t.cpu(), base_c, **FFT_TOL)


def test_stft_istft():
    x = rand(2, 64)
    win = torch.hann_window(16)

    def stft(t):
        return torch.stft(t, 16, hop_length=4, window=win.to(t.device), return_complex=True)

    fft_check(stft, x, noncontig=False)
    spec = stft(x)
    a = torch.istft(spec.to(DEV), 16, hop_length=4, window=win.to(DEV), length=64)
    e = torch.istft(spec, 16, hop_length=4, window=win, length=64)
    torch.testing.assert_close(a.cpu(), e, **FFT_TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_dtypes_fail_like_cpu(dtype):
    x = rand(4, 8).to(dtype)
    for fn in (F.fft, F.rfft, F.fft2):
        try:
            fn(x)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(type(exc)):
                fn(x.to(DEV))
        else:
            torch.testing.assert_close(fn(x.to(DEV)).cpu(), fn(x), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("bad", [
    lambda t: F.fft(t, n=0),
    lambda t: F.fft(t, dim=2),
    lambda t: F.rfft(t.to(torch.complex64)),
    lambda t: F.fftn(t, s=(3,), dim=(0, 1)),
    lambda t: F.irfft(t, n=-1),
    lambda t: F.fft(t, norm="bogus"),
])
def test_bad_input_raises_like_cpu(bad):
    x = rand(4, 8)
    with pytest.raises(Exception) as cpu:
        bad(x)
    with pytest.raises(type(cpu.value)):
        bad(x.to(DEV))
