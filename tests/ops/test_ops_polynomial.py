"""torch.special orthogonal polynomials of a tensor degree on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand

S = torch.special
FNS = [S.chebyshev_polynomial_t, S.chebyshev_polynomial_u, S.chebyshev_polynomial_v,
       S.chebyshev_polynomial_w, S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u,
       S.shifted_chebyshev_polynomial_v, S.shifted_chebyshev_polynomial_w, S.hermite_polynomial_h,
       S.hermite_polynomial_he, S.laguerre_polynomial_l, S.legendre_polynomial_p]


@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
def test_polynomial(fn):
    x = rand(3, 8, low=-1.5, high=1.5)
    x[0, :4] = torch.tensor([1.0, -1.0, 0.0, 0.5])  # the closed-form edge values
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 9.0, 12.5])
    check(fn, x, n, rtol=1e-4, atol=1e-4)
    check(lambda a: fn(a, 5), x, rtol=1e-4, atol=1e-4)
    check(lambda m: fn(0.25, m), n, rtol=1e-4, atol=1e-4)
    check(fn, x.long(), n.long(), rtol=1e-4, atol=1e-4)


def test_polynomial_degree_limit_is_loud():
    x = torch.ones(3, device=DEV)
    with pytest.raises(NotImplementedError):
        S.hermite_polynomial_h(x, torch.full((3,), 100.0, device=DEV)).cpu()
