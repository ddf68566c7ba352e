"""torch.optim's fused=True steps (_fused_adam_, _fused_adamw_, _fused_sgd_,
_fused_adagrad_) on tpu against the CPU's fused kernels: the same
parameters and states after several steps, bfloat16 parameters computed in
float and rounded once, grad_scale/found_inf as GradScaler passes them."""
import pytest
import torch

from optest import DEV

CASES = [
    (torch.optim.Adam, dict(lr=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.05)),
    (torch.optim.AdamW, dict(lr=torch.tensor(1e-2), weight_decay=0.05, amsgrad=True)),
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, maximize=True)),
    (torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.01)),
]


def run(opt_cls, kw, device, dtype, steps=4, grad_scale=None, found_inf=None):
    g = torch.Generator().manual_seed(0)
    shapes = [(5, 3), (7,), (2, 2, 2)]
    params = [torch.randn(s, generator=g).to(dtype).to(device).requires_grad_() for s in shapes]
    kw = dict(kw)
    if isinstance(kw.get("lr"), torch.Tensor):
        kw["lr"] = kw["lr"].clone()
    opt = opt_cls(params, fused=True, **kw)
    for k in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(dtype).to(device)
        if grad_scale is not None:
            opt.grad_scale = torch.tensor(grad_scale, device=device)
            opt.found_inf = torch.tensor(float(found_inf[k]), device=device)
        opt.step()
    states = [t for p in params for t in opt.state[p].values() if isinstance(t, torch.Tensor)]
    return [p.detach().cpu() for p in params] + [s.cpu() for s in states] + [p.grad.cpu() for p in params]


@pytest.mark.parametrize("opt_cls,kw", CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_step_matches_cpu(opt_cls, kw, dtype):
    exp = run(opt_cls, kw, "cpu", dtype)
    act = run(opt_cls, kw, DEV, dtype)
    assert len(exp) == len(act)
    tol = dict(atol=1e-6, rtol=1e-6) if dtype == torch.float32 else dict(atol=8e-3, rtol=0)
    for i, (a, e) in enumerate(zip(act, exp)):
        assert a.dtype == e.dtype, i
        torch.testing.assert_close(a, e, **tol, msg=f"tensor {i}")


@pytest.mark.parametrize("opt_cls,kw", [CASES[1], CASES[3], CASES[5], CASES[7]])
def test_grad_scale_and_found_inf(opt_cls, kw):
    # GradScaler's protocol: grads unscaled in place; a step with found_inf = 1 changes nothing
    found = [0, 1, 0, 1]
    exp = run(opt_cls, kw, "cpu", torch.float32, grad_scale=4.0, found_inf=found)
    act = run(opt_cls, kw, DEV, torch.float32, grad_scale=4.0, found_inf=found)
    for i, (a, e) in enumerate(zip(act, exp)):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5, msg=f"tensor {i}")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fused_adamw_training_loop_matches_cpu(mode):
    import torchtpu

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    dev_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to(DEV)
    dev_model.load_state_dict(model.state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True) for m in (model, dev_model)]
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    for _ in range(5):
        for m, opt, (xi, yi) in ((model, opts[0], (x, y)), (dev_model, opts[1], (x.to(DEV), y.to(DEV)))):
            with torchtpu.set_eager_mode(mode if xi.device.type == DEV else "strict"):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(xi), yi).backward()
                opt.step()
    for a, e in zip(dev_model.parameters(), model.parameters()):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), atol=1e-5, rtol=1e-5)
