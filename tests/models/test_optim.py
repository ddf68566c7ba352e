"""torch.optim on tpu against CPU: SGD (momentum, nesterov, weight decay),
Adam, AdamW (amsgrad), on a small MLP's parameters with the same init and
the same gradients. On tpu the optimizers take their foreach path (the
default for non-CPU devices), so this also checks that path runs on the
engine and that a changing learning rate never recompiles (runtime
Scalars). Also clip_grad_norm_ / clip_grad_value_ and zero_grad."""
import pytest
import torch
import torchtpu

from optest import DEV

SHAPES = [(16, 8), (16,), (4, 16), (4,)]  # Linear(8, 16) -> Linear(16, 4)
TOL = dict(atol=1e-5, rtol=1e-5)


def init_params(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(s, generator=g) * 0.5).to(dtype) for s in SHAPES]


def grads_for_step(step, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(s, generator=g).to(dtype) for s in SHAPES]


def run(device, make_opt, steps=5, dtype=torch.float32, sched=None, **kw):
    params = [torch.nn.Parameter(t.clone().to(device)) for t in init_params(dtype)]
    opt = make_opt(params, **kw)
    scheduler = sched(opt) if sched else None
    for step in range(steps):
        for p, gr in zip(params, grads_for_step(step, dtype)):
            p.grad = gr.to(device)
        opt.step()
        if scheduler:
            scheduler.step()
    return [p.detach().cpu() for p in params], opt


CONFIGS = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.1, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True)),
    (torch.optim.Adam, dict(lr=1e-2)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.05)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.95), eps=1e-6, maximize=True)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
]


def config_id(c):
    return c[0].__name__ + "-" + "-".join(f"{k}={v}" for k, v in c[1].items())


def test_tpu_defaults_to_foreach():
    params = [torch.zeros(2, device=DEV, requires_grad=True)]
    from torch.optim.optimizer import _default_to_fused_or_foreach
    fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    assert foreach and not fused


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_matches_cpu(config):
    cls, kw = config
    expected, _ = run("cpu", cls, **kw)  # CPU default: the for-loop path
    expected_foreach, _ = run("cpu", cls, foreach=True, **kw)
    actual, opt = run(DEV, cls, **kw)
    assert opt.defaults.get("foreach") is None  # tpu chose foreach by itself
    for a, e, ef in zip(actual, expected, expected_foreach):
        torch.testing.assert_close(a, e, **TOL)
        torch.testing.assert_close(a, ef, **TOL)


def test_state_lives_on_device():
    _, opt = run(DEV, torch.optim.Adam, steps=2, lr=1e-2, amsgrad=True)
    for state in opt.state.values():
        assert state["exp_avg"].device.type == DEV
        assert state["max_exp_avg_sq"].device.type == DEV


def test_adam_capturable_on_device():
    # capturable keeps step counts on the device: _foreach_pow(Scalar, Tensor[])
    expected, _ = run("cpu", torch.optim.Adam, lr=1e-2)
    actual, opt = run(DEV, torch.optim.Adam, lr=1e-2, capturable=True)
    for state in opt.state.values():
        assert state["step"].device.type == DEV
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, **TOL)


def test_bfloat16_params():
    expected, _ = run("cpu", torch.optim.SGD, dtype=torch.bfloat16, lr=0.1, momentum=0.9)
    actual, _ = run(DEV, torch.optim.SGD, dtype=torch.bfloat16, lr=0.1, momentum=0.9)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-2, rtol=1.6e-2)


def test_foreach_step_is_one_program_per_op():
    params = [torch.nn.Parameter(t.to(DEV)) for t in init_params()]
    opt = torch.optim.SGD(params, lr=0.1)
    grads = [g.to(DEV) for g in grads_for_step(0)]
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()
    before = torchtpu._C._compile_stats()["executions"]
    opt.step()
    after = torchtpu._C._compile_stats()["executions"]
    # plain SGD is one _foreach_add_ over all four parameters
    assert after - before == 1


@pytest.mark.parametrize("config", [
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
], ids=config_id)
def test_lr_schedule_does_not_recompile(config):
    cls, kw = config
    params = [torch.nn.Parameter(t.to(DEV)) for t in init_params()]
    opt = cls(params, **kw)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    grads = [[g.to(DEV) for g in grads_for_step(s)] for s in range(8)]

    def step(s):
        for p, g in zip(params, grads[s]):
            p.grad = g
        opt.step()
        sched.step()

    for s in range(3):  # first steps create state (momentum buffers, ...)
        step(s)
    before = torchtpu._C._compile_stats()["compiles"]
    lrs = set()
    for s in range(3, 8):
        lrs.add(opt.param_groups[0]["lr"])
        step(s)
    assert len(lrs) == 5
    assert torchtpu._C._compile_stats()["compiles"] == before
    # and the schedule was applied: same as CPU
    expected, _ = run("cpu", cls, steps=8, sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (1 + s)), **kw)
    for a, e in zip(params, expected):
        torch.testing.assert_close(a.detach().cpu(), e, **TOL)


def test_zero_grad_keep_tensors():
    params = [torch.nn.Parameter(t.to(DEV)) for t in init_params()]
    for p, g in zip(params, grads_for_step(0)):
        p.grad = g.to(DEV)
    opt = torch.optim.SGD(params, lr=0.1)
    opt.zero_grad(set_to_none=False)  # _foreach_zero_
    for p in params:
        assert p.grad.device.type == DEV and (p.grad.cpu() == 0).all()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm(norm_type):
    def clipped(device):
        params = [torch.nn.Parameter(t.clone().to(device)) for t in init_params()]
        for p, g in zip(params, grads_for_step(0)):
            p.grad = g.to(device)
        total = torch.nn.utils.clip_grad_norm_(params, max_norm=1.0, norm_type=norm_type)
        return total, [p.grad for p in params]

    et, eg = clipped("cpu")
    at, ag = clipped(DEV)
    assert at.device.type == DEV
    torch.testing.assert_close(at.cpu(), et, **TOL)
    for a, e in zip(ag, eg):
        torch.testing.assert_close(a.cpu(), e, **TOL)


def test_clip_grad_value():
    params = [torch.nn.Parameter(t.to(DEV)) for t in init_params()]
    grads = grads_for_step(0)
    for p, g in zip(params, grads):
        p.grad = g.to(DEV)
    torch.nn.utils.clip_grad_value_(params, 0.5)  # _foreach_clamp_min_/max_
    for p, g in zip(params, grads):
        torch.testing.assert_close(p.grad.cpu(), g.clamp(-0.5, 0.5))


def test_mlp_training_matches_cpu():
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(3)
        for _ in range(4):
            x = torch.randn(32, 8, generator=g).to(device)
            y = torch.randn(32, 4, generator=g).to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    for a, e in zip(train(DEV), train("cpu")):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)
