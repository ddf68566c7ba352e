"""torch.linalg.lstsq on tpu vs CPU: every output of every driver (solution,
residuals, rank, singular values), well- and rank-deficient, tall and wide,
batched and broadcast, gradients through the solution, errors."""
import warnings

import pytest
import torch

from optest import DEV, check, same_error

TOL = dict(atol=2e-5, rtol=2e-5)


def _lstsq(a, b, **kw):
    return tuple(torch.linalg.lstsq(a, b, **kw))


def _mats(seed, *shapes, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=dtype) for s in shapes]


SHAPES = [
    ((5, 3), (5, 2)),          # tall
    ((3, 5), (3, 2)),          # wide
    ((4, 4), (4, 3)),          # square
    ((2, 5, 3), (2, 5)),       # a vector per matrix
    ((5, 3), (5,)),            # one vector
    ((1, 6, 4), (3, 6, 2)),    # broadcast batch
    ((2, 3, 7), (1, 3, 1)),
]


@pytest.mark.parametrize("driver", [None, "gels"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_drivers(sa, sb, driver):
    a, b = _mats(0, sa, sb)
    check(_lstsq, a, b, driver=driver, **TOL)


@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
@pytest.mark.parametrize("sa,sb", [s for s in SHAPES if s[0][-2] <= s[0][-1]])
def test_svd_drivers(sa, sb, driver):
    a, b = _mats(1, sa, sb)
    check(_lstsq, a, b, driver=driver, **TOL)


def test_float64():
    a, b = _mats(2, (2, 12, 7), (2, 12, 3), dtype=torch.float64)
    check(_lstsq, a, b)
    check(_lstsq, a.mT, b[:, :7], driver="gelsd")


def _min_norm(a, b):
    """The minimum-norm least-squares solution and rank, in float64."""
    x = torch.linalg.pinv(a.double(), rtol=1e-6) @ b.double()
    return x.float(), torch.linalg.matrix_rank(a.double(), rtol=1e-6)


@pytest.mark.parametrize("tall", [True, False])
def test_rank_deficient_gelsy(tall):
    # The CPU's gelsy is not a stable reference here: for the same
    # rank-deficient input it returns different solutions from call to call
    # (2 distinct answers in 300 calls for a matrix with a zero column).
    # What every gelsy answer aims at is the minimum-norm solution, which
    # is the reference.
    a, b = _mats(3, (6, 4), (6, 2))
    a[:, 3] = a[:, 0] + a[:, 1]            # rank 3
    if not tall:
        a, b = a.T.contiguous(), b[:4]
    for m in (a, torch.stack([a, a * 2]), torch.zeros_like(a)):
        rhs = b if m.dim() == 2 else torch.stack([b, b])
        t = torch.linalg.lstsq(m.to(DEV), rhs.to(DEV))
        x, r = _min_norm(m, rhs)
        torch.testing.assert_close(t.solution.cpu(), x, atol=2e-5, rtol=2e-5)
        assert torch.equal(t.rank.cpu(), r)


def test_rank_deficient_gelsd():
    # SVD drivers are deterministic on the CPU: compared directly (wide:
    # tall gelsd needs full rank, see test_tall_svd_drivers)
    a, b = _mats(3, (4, 6), (4, 2))
    a[3] = a[0] + a[1]
    check(_lstsq, a, b, driver="gelsd", **TOL)
    check(_lstsq, torch.zeros(3, 4), b[:3], driver="gelss")
    ab = torch.stack([a, _mats(4, (4, 6))[0]])
    check(_lstsq, ab, torch.stack([b, b]), driver="gelsd", **TOL)


def test_rcond_cuts_rank():
    g = torch.Generator().manual_seed(5)
    u, _ = torch.linalg.qr(torch.randn(6, 6, generator=g))
    v, _ = torch.linalg.qr(torch.randn(4, 4, generator=g))
    a = u[:, :4] @ torch.diag(torch.tensor([4.0, 2.0, 0.5, 0.1])) @ v.T
    b = torch.randn(6, 2, generator=g)
    # singular values 4, 2, 0.5, 0.1: ranks 4, 3, 1
    for rcond in (None, 0.05, 0.9):
        check(_lstsq, a.T.contiguous(), b[:4], rcond=rcond, driver="gelss", **TOL)
        check(_lstsq, a.T.contiguous(), b[:4], rcond=rcond, driver="gelsd", **TOL)
    check(_lstsq, a, b, rcond=1e-2, **TOL)           # gelsy cutting nothing
    # gelsy cutting a real singular value truncates through its pivoted QR,
    # which tpu refuses to imitate (the SVD drivers above cover the cut)
    with pytest.raises(NotImplementedError):
        torch.linalg.lstsq(a.to(DEV), b.to(DEV), rcond=0.2)


def test_rcond_is_a_run_time_value():
    """rcond (None standing for eps * max(m, n)) goes to the program at run
    time: every rcond of one driver's call shares one program, and the
    ranks it cuts are still the CPU's."""
    import torchtpu.debug as debug

    g = torch.Generator().manual_seed(7)
    u, _ = torch.linalg.qr(torch.randn(7, 7, generator=g))
    a = (u[:, :3] * torch.tensor([3.0, 1.0, 0.2])) @ torch.linalg.qr(torch.randn(3, 3, generator=g))[0]
    b = torch.randn(7, 2, generator=g)  # shapes no other test here uses: nothing cached
    debug.compiles(clear=True)
    for rcond in (None, -1, 1e-9, 0.001):
        check(_lstsq, a, b, rcond=rcond, noncontig=False, **TOL)
    for rcond in (None, 0.001, 0.1):  # 0.1 cuts 0.2: rank 2
        check(_lstsq, a.T.contiguous(), b[:3], rcond=rcond, driver="gelsd", noncontig=False, **TOL)
    whats = [c["what"] for c in debug.compiles(clear=True)]
    assert whats.count("linalg_lstsq.out") == 2, whats


def test_gels_singular_raises():
    a, b = _mats(11, (2, 5, 3), (2, 5, 2))
    a[1, :, 1] = 0
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a, b, driver="gels")
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver="gels")


def test_empty():
    check(_lstsq, torch.zeros(0, 3), torch.zeros(0, 2))
    check(_lstsq, torch.zeros(0, 5, 3), torch.zeros(0, 5, 2))


@pytest.mark.parametrize("sa,sb", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 5, 3), (2, 5)),
                                   ((1, 6, 4), (3, 6, 2))])
def test_gradients(sa, sb):
    a, b = _mats(6, sa, sb)
    a.requires_grad_()
    b.requires_grad_()
    check(lambda x, y: torch.linalg.lstsq(x, y).solution, a, b, grad=True, atol=1e-4, rtol=1e-4)


def test_out_form():
    a, b = _mats(7, (5, 3), (5, 2))
    outs_c = [torch.empty(0), torch.empty(0), torch.empty(0, dtype=torch.long), torch.empty(0)]
    outs_t = [t.to(DEV) for t in outs_c]
    torch.linalg.lstsq(a, b, driver="gels", out=outs_c)
    torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver="gels", out=outs_t)
    for c, t in zip(outs_c, outs_t):
        torch.testing.assert_close(t.cpu(), c, **TOL)


@pytest.mark.parametrize("sa,sb,kw", [
    ((5,), (5, 2), {}),                              # input not a matrix
    ((2, 5, 3), (5,), {}),                           # rank gap > 1
    ((5, 3), (4, 2), {}),                            # rows differ
    ((5, 3), (4,), {}),                              # vector rows differ
    ((2, 5, 3), (3, 5, 2), {}),                      # batch does not broadcast
    ((5, 3), (5, 2), dict(driver="foo")),
])
def test_errors(sa, sb, kw):
    a, b = _mats(8, sa, sb)
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a, b, **kw)
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a.to(DEV), b.to(DEV), **kw)


@pytest.mark.parametrize("da,db", [(torch.float32, torch.float64), (torch.bfloat16, torch.bfloat16),
                                   (torch.int64, torch.int64)])
def test_dtype_errors(da, db):
    a, b = _mats(9, (5, 3), (5, 2))
    a, b = a.to(da), b.to(db)
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a, b)
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(a.to(DEV), b.to(DEV))


@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
def test_tall_svd_drivers(driver):
    a, b = _mats(10, (2, 5, 3), (2, 5, 2))
    check(_lstsq, a, b, driver=driver, **TOL)
    check(_lstsq, a[0], b[0, :, 0], driver=driver, **TOL)
    # residuals of gelsd/gelss exist only when every matrix has full rank:
    # tpu sizes them for full rank and fails a deficient call
    a[1, :, 2] = a[1, :, 0]
    with pytest.raises(NotImplementedError):
        torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver)


def _lstsq_inputs(d, dt=torch.float32):
    g = torch.Generator().manual_seed(11)
    a = torch.rand(2, 3, generator=g, dtype=torch.float64).to(dt)
    b = torch.rand(3, generator=g, dtype=torch.float64).to(dt)
    return a.to(d), b.to(d)


@pytest.mark.parametrize("case", ["input 1-d", "other 0-d", "vector rows", "matrix rows", "batched rows",
                                  "dtypes", "driver", "int", "solution out dtype", "residuals out dtype",
                                  "rank out dtype", "singular_values out dtype"])
def test_argument_errors_as_cpu(case):
    """PyTorch's test_linalg_lstsq_input_checks and the out= dtype checks:
    the CPU's exception type and message."""
    def call(d):
        a, b = _lstsq_inputs(d)
        outs = dict(solution=torch.empty(0, device=d), residuals=torch.empty(0, device=d),
                    rank=torch.empty(0, dtype=torch.int64, device=d),
                    singular_values=torch.empty(0, device=d))
        bad = {"solution out dtype": torch.int32, "residuals out dtype": torch.int32,
               "rank out dtype": torch.bool, "singular_values out dtype": torch.int64}
        if case in bad:
            name = case.split(" out")[0]
            outs[name] = torch.empty(0, dtype=bad[case], device=d)
            return torch.linalg.lstsq(a, b.unsqueeze(-1)[:2], out=tuple(outs.values()))
        if case == "input 1-d":
            return torch.linalg.lstsq(b, b)
        if case == "other 0-d":
            return torch.linalg.lstsq(a, torch.tensor(1.0, device=d))
        if case == "vector rows":
            return torch.linalg.lstsq(a, b)
        if case == "matrix rows":
            return torch.linalg.lstsq(a, b.unsqueeze(-1))
        if case == "batched rows":
            return torch.linalg.lstsq(torch.ones(1, 1, 1, device=d), torch.ones(3, 1, device=d))
        if case == "dtypes":
            return torch.linalg.lstsq(a, b[:2].double().unsqueeze(-1))
        if case == "driver":
            return torch.linalg.lstsq(a, b[:2], driver="bad")
        return torch.linalg.lstsq(a.int(), b[:2].int())
    same_error(call)


def test_out_resize_warnings_as_cpu():
    """Outs of another shape are resized, each with PyTorch's warning, as
    the CPU does (also when the call is answered from the shape cache)."""
    def warned(d):
        a, b = _lstsq_inputs(d)
        outs = (torch.empty(1, device=d), torch.empty(1, device=d),
                torch.empty(1, dtype=torch.int64, device=d), torch.empty(1, device=d))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = torch.linalg.lstsq(a, b[:2].unsqueeze(-1), driver="gelsd", out=outs)
        return [str(x.message).split(".")[0] for x in w], [tuple(t.shape) for t in r]
    cpu = warned("cpu")
    assert len(cpu[0]) == 4
    assert warned(DEV) == cpu
    assert warned(DEV) == cpu


def _cmats(seed, *shapes, dtype=torch.complex64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=dtype) for s in shapes]


CTOL = {torch.complex64: dict(atol=5e-5, rtol=5e-5), torch.complex128: dict(atol=1e-10, rtol=1e-10)}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
@pytest.mark.parametrize("sa,sb", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 5, 3), (2, 5)), ((1, 6, 4), (3, 6, 2))])
def test_complex(sa, sb, driver, dtype):
    """Complex matrices: W = A^H for a wide A, conjugated products."""
    a, b = _cmats(12, sa, sb, dtype=dtype)
    check(_lstsq, a, b, driver=driver, **CTOL[dtype])


def test_complex_rank_deficient_and_gradients():
    a, b = _cmats(13, (6, 4), (6, 2), dtype=torch.complex128)
    a[:, 3] = a[:, 0] * (1 - 2j)  # rank 3
    check(_lstsq, a, b, **CTOL[torch.complex128])
    check(_lstsq, a.mH, b[:4], **CTOL[torch.complex128])
    a, b = _cmats(14, (2, 5, 3), (2, 5, 2), dtype=torch.complex128)
    a.requires_grad_()
    b.requires_grad_()
    check(lambda x, y: torch.linalg.lstsq(x, y).solution, a, b, grad=True, **CTOL[torch.complex128])


def test_complex_out_form_and_singular_gels():
    a, b = _cmats(15, (5, 3), (5, 2))
    outs_c = [torch.empty(0, dtype=a.dtype), torch.empty(0), torch.empty(0, dtype=torch.long), torch.empty(0)]
    outs_t = [t.to(DEV) for t in outs_c]
    torch.linalg.lstsq(a, b, driver="gelsd", out=outs_c)
    torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver="gelsd", out=outs_t)
    for c, t in zip(outs_c, outs_t):
        assert t.dtype == c.dtype
        torch.testing.assert_close(t.cpu(), c, **CTOL[torch.complex64])
    a[:, 1] = 0
    for x, y in ((a, b), (a.to(DEV), b.to(DEV))):
        with pytest.raises(torch.linalg.LinAlgError, match="does not have full rank"):
            torch.linalg.lstsq(x, y, driver="gels")
