"""Loops that compile once: PyTorch's scan and a stack of identical layers.

    from torch._higher_order_ops.scan import scan

    def step(h, x):                  # (carry, x_t) -> (next carry, y_t)
        h = torch.tanh(h @ w + x)
        return h, h.sum(-1)

    h, ys = scan(step, h0, xs)       # tpu tensors; xs sliced along dim 0

    y = torchtpu.scan_layers(model.layers, x)   # layers of one structure
    y = torchtpu.scan_layers(blocks, x, cos, sin)  # each gets (x, cos, sin)

On tpu tensors PyTorch's scan operator (``torch._higher_order_ops.scan``)
runs as ONE ``stablehlo.while``: the combine function is traced once into
a function of its own (its ops recorded, lowered by the engine's one
lowering table and never run), and the loop calls it once per step. The
program holds one copy of the body whatever the number of steps, so its
compile time does not grow with them. That holds in every mode: in strict
mode the loop is one program, in a fused window or a
``torch.compile(backend="tpu")`` graph it is one op of the window's
program. Gradients come from PyTorch's own scan autograd: its backward is
a reversed scan, which runs the same way.

``scan_layers(layers, x)`` runs ``x = layer(x)`` for each layer as such a
loop: the layers' parameters are stacked along a new dim 0 and scanned
over, so a 12-layer stack compiles about as fast as a 2-layer one, in
eager modes and in compiled graphs, forward and backward.

What the body may not do (each raises a clear error): draw random numbers
(dropout with p > 0, ``torch.rand``: draw them outside and pass them in),
read data on the host (``.item()``, printing), change its inputs in place,
or read a tpu tensor it is not given (pass it in: ``additional_inputs``
of the scan operator, or a layer's own parameters and buffers).
"""
import torch
from torch._higher_order_ops.scan import scan as _torch_scan, scan_op
from torch._C import DispatchKey
from torch.utils._python_dispatch import _disable_current_modes

from . import _C

__all__ = ["scan", "scan_layers"]

scan = _torch_scan

# (function key, input signature) -> (body callee, ys templates (shape, dtype))
_bodies = {}
_MAX_BODIES = 256


def _fn_key(fn):
    """What decides a combine function's body: a graph module's code and its
    submodules' (the graphs AOTAutograd and the scan autograd make anew per
    call are equal code); any other callable by identity (kept alive by
    the cache, so that its id is not reused)."""
    if isinstance(fn, torch.fx.GraphModule):
        own = [v for v in fn.__dict__.values() if isinstance(v, torch.Tensor)]
        if not own and not any(True for _ in fn.named_parameters()) and not any(
                True for _ in fn.named_buffers()):
            subs = tuple((n, _fn_key(m)) for n, m in fn.named_children())
            return ("graph", fn.code, subs)
    return ("fn", id(fn), fn)


def _signature(tensors):
    return tuple((tuple(t.shape), t.dtype) for t in tensors)


def _check_tensors(what, tensors):
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"scan on tpu: {what} must be tensors, got {type(t).__name__}")
        if t.device.type != "tpu":
            raise RuntimeError(f"scan on tpu: {what} must be tpu tensors, got one on {t.device}")


def _step_results(outs, carry):
    """The step's outputs checked against the carries, as fresh dense
    tensors (the function's results)."""
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    outs = list(outs)
    n_carry = len(carry)
    if len(outs) < n_carry:
        raise RuntimeError(
            f"scan: the combine function returned {len(outs)} values, "
            f"fewer than the {n_carry} carries")
    for k, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise RuntimeError(f"scan on tpu: output {k} of the combine function is not a tensor")
    for k, ((s, d), o) in enumerate(zip(carry, outs)):
        if tuple(o.shape) != tuple(s) or o.dtype != d:
            raise RuntimeError(
                f"scan: carry {k} changes from {list(s)} {d} to "
                f"{list(o.shape)} {o.dtype} in the combine function")
    return [o.clone(memory_format=torch.contiguous_format) for o in outs]


def _trace_body(fn, carry, x_rows, consts, device):
    """Records fn once on placeholders of the inputs' signatures into a
    function the engine defines; returns its name and the ys' templates."""
    specs = [(s, d) for s, d in carry + x_rows + consts]
    # Placeholders hold values (an upload, no program): a storage without
    # one would read as zeros inside the body.
    params = [torch.zeros(s, dtype=d).to(device) for s, d in specs]
    n_carry = len(carry)
    _C._begin_function()
    ended = False
    try:
        # Dispatch modes (a profiler's, torchtpu.aot's program counter) see
        # the loop, not the step's ops, which never run.
        with torch.no_grad(), _disable_current_modes():
            outs = fn(*params)
            results = _step_results(outs, carry)
        ended = True  # whatever end says, the body is closed after it
        name = _C._end_function(params, results)
    finally:
        if not ended:
            _C._end_function(params, None)
    ys = [(tuple(r.shape), r.dtype) for r in results[n_carry:]]
    return name, ys


def _with_statics(fn, n_before, consts):
    """fn with the non-tensor entries of consts (sizes Dynamo passes as
    symbolic ints, run as ints) in place: the body is traced for them."""
    statics = [(k, c) for k, c in enumerate(consts) if not isinstance(c, torch.Tensor)]
    if not statics:
        return fn, consts, ()
    for k, c in statics:
        if not isinstance(c, (int, float, bool)):
            raise TypeError(f"scan on tpu: additional input {k} is a {type(c).__name__}, "
                            "neither a tensor nor a number")
    tensors = [c for c in consts if isinstance(c, torch.Tensor)]

    def with_statics(*args):
        head, it = list(args[:n_before]), iter(args[n_before:])
        full = [c if not isinstance(c, torch.Tensor) else next(it) for c in consts]
        return fn(*head, *full)

    return with_statics, tensors, tuple((k, type(c), c) for k, c in statics)


def _run_scan(fn, init, xs, consts, reverse=False):
    """The loop of fn over xs (reverse: from the last row to the first, each
    y still at its row): the carries' last values, then the stacked ys."""
    init, xs, consts = list(init), list(xs), list(consts)
    fn_key = _fn_key(fn)
    fn, consts, statics = _with_statics(fn, len(init) + len(xs), consts)
    _check_tensors("init", init)
    _check_tensors("xs", xs)
    _check_tensors("additional_inputs", consts)
    if not xs:
        return tuple(init)
    length = xs[0].shape[0] if xs[0].dim() else None
    for x in xs:
        if x.dim() == 0 or x.shape[0] != length:
            raise RuntimeError("scan: every xs must have the same size in dim 0")
    if length == 0:
        xs[0].select(0, 0)  # the CPU's IndexError
    device = xs[0].device
    carry = _signature(init)
    rows = tuple((tuple(x.shape[1:]), x.dtype) for x in xs)
    ks = _signature(consts)
    key = (fn_key, statics, carry, rows, ks, device)
    hit = _bodies.get(key)
    if hit is None:
        hit = _trace_body(fn, list(carry), list(rows), list(ks), device)
        if len(_bodies) >= _MAX_BODIES:
            _bodies.clear()
        _bodies[key] = hit
    body, ys = hit
    meta = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")
    callee = _C._scan_define(
        body, int(length), bool(reverse), [meta(s, d) for s, d in carry], [meta(x.shape, x.dtype) for x in xs],
        [meta(s, d) for s, d in ks], [meta(s, d) for s, d in ys])
    outs = [torch.empty(s, dtype=d, device=device) for s, d in carry]
    outs += [torch.empty((length,) + s, dtype=d, device=device) for s, d in ys]
    _C._extern_call(callee, init + xs + consts, outs)
    return tuple(outs)


@scan_op.py_impl(DispatchKey.PrivateUse1)
def _scan_tpu(combine_fn, init, xs, additional_inputs):
    return _run_scan(combine_fn, init, xs, additional_inputs)


# ------------------------------------------------------------ scan_layers


def _layer_state(layers):
    """The first layer, its parameter and buffer names, and per name the
    layers' tensors in order. Each layer's state is walked once (under
    Dynamo each walk is traced, and the stacks take every layer's)."""
    first = layers[0]
    params = [dict(layer.named_parameters()) for layer in layers]
    buffers = [dict(layer.named_buffers()) for layer in layers]
    names, bnames = list(params[0]), list(buffers[0])
    for k, layer in enumerate(layers):
        if type(layer) is not type(first):
            raise TypeError(f"scan_layers: layer {k} is a {type(layer).__name__}, "
                            f"layer 0 a {type(first).__name__}: the layers must be alike")
        p, b = params[k], buffers[k]
        if list(p) != names or list(b) != bnames:
            raise ValueError(f"scan_layers: layer {k} has other parameters or buffers than layer 0")
        for n in names:
            q = params[0][n]
            if p[n].shape != q.shape or p[n].dtype != q.dtype:
                raise ValueError(f"scan_layers: parameter {n} of layer {k} is {list(p[n].shape)} "
                                 f"{p[n].dtype}, layer 0's {list(q.shape)} {q.dtype}")
    per_name = [[p[n] for p in params] for n in names]
    per_name += [[b[n] for b in buffers] for n in bnames]
    return first, names, bnames, per_name


def scan_layers(layers, x, *args):
    """``for layer in layers: x = layer(x, *args)`` as one loop (see the
    module doc). ``layers``: an iterable of modules of one type and
    structure (an ``nn.ModuleList``), each mapping x to a tensor of x's
    shape and dtype; their parameters and buffers are stacked along a new
    dim 0 and scanned over. ``args``: tensors every layer gets as they are
    (rotary tables, a mask). Gradients reach every layer's parameters, x
    and args."""
    layers = list(layers)
    if not layers:
        return x
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"scan_layers: x must be a tensor, got {type(x).__name__}")
    for k, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"scan_layers: argument {k + 1} after x must be a tensor, got "
                            f"{type(a).__name__} (give a layer its settings as attributes)")
    first, names, bnames, per_name = _layer_state(layers)
    if not per_name:
        # Nothing to scan over (layers without parameters or buffers): the
        # layers as they are.
        for layer in layers:
            x = layer(x, *args)
        return x
    keys = tuple(names + bnames)
    if torch.compiler.is_compiling():
        # Dynamo makes it PyTorch's scan, AOTAutograd its backward, once.
        # (No plan: a lookup in the plans' cache would be a guard that the
        # next call fails. Stacked by torch.stack: the gradients' rows are
        # outputs of the backward graph, and an autograd.Function here
        # costs Dynamo more tracing than the rows cost the optimizer.)
        stacked = [torch.stack(ts) for ts in per_name]
        h, _ = _torch_scan(lambda h, p: (_layer_call(first, keys, h, p, args), []), x, stacked)
        return h
    stacked = list(_StackLayers.apply(len(layers), *[t for ts in per_name for t in ts]))
    plan = _plan(first, keys, len(names), args)
    flat = stacked + list(args)
    if torch.is_grad_enabled() and any(t.requires_grad for t in [x] + flat):
        return _ScanLayers.apply(plan, x, *flat)
    return _run_scan(plan.step, [x], stacked, args)[0]


class _StackLayers(torch.autograd.Function):
    """torch.stack of the layers' tensors whose backward gives each layer a
    gradient of its own storage, not a row of the stacked gradient (as
    stack's own backward does): an optimizer's foreach programs and fused
    windows then read them as they read an unscanned model's, where rows of
    one storage would be a slice each in every optimizer program (a cost
    that grows with depth)."""

    @staticmethod
    def forward(ctx, n, *tensors):
        # n layers: each group of n tensors (one name) stacks into one
        return tuple(torch.stack(tensors[at:at + n]) for at in range(0, len(tensors), n))

    @staticmethod
    def backward(ctx, *grads):
        rows = [row for g in grads for row in g.unbind(0)]
        need = ctx.needs_input_grad[1:]
        return (None, *[r.clone() if n else None for r, n in zip(rows, need)])


class _ScanLayers(torch.autograd.Function):
    """scan_layers in eager modes: the forward loop keeps each step's input
    (its ys); the backward is a reversed loop of the step's vector-Jacobian
    product, carrying x's gradient and the arguments' sums and stacking the
    parameters'. Both steps are traced once per plan and signature (PyTorch's
    own scan autograd would trace the step's joint graph on every call)."""

    @staticmethod
    def forward(ctx, plan, x, *flat):
        n = plan.n_state
        h, hs = _run_scan(plan.saving, [x], flat[:n], flat[n:])
        ctx.plan = plan
        ctx.save_for_backward(hs, *flat)
        return h

    @staticmethod
    def backward(ctx, g):
        plan = ctx.plan
        hs, *flat = ctx.saved_tensors
        n = plan.n_state
        stacked, args = flat[:n], flat[n:]
        sums = [torch.zeros_like(args[i]) for i in plan.float_args]
        outs = _run_scan(plan.backward, [g, *sums], [*stacked, hs], args, reverse=True)
        g_x, g_sums, g_params = outs[0], outs[1:1 + len(sums)], outs[1 + len(sums):]
        g_args = [None] * len(args)
        for i, gs in zip(plan.float_args, g_sums):
            g_args[i] = gs
        return (None, g_x, *g_params, *[None] * (n - plan.n_params), *g_args)


_plans = {}


def _layer_call(module, keys, h, state, args):
    """module's forward on (h, *args) with its state (parameters and
    buffers, by name) replaced by one layer's slice of the stacks."""
    out = torch.func.functional_call(module, dict(zip(keys, state)), (h, *args))
    if not isinstance(out, torch.Tensor) or out.shape != h.shape or out.dtype != h.dtype:
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise RuntimeError(
            "scan_layers: a layer must map a tensor to one of the same shape "
            f"and dtype ({list(h.shape)} {h.dtype}), got {got}")
    return out


class _Plan:
    """A layer's steps for the loops of scan_layers: one per module, state
    names and arguments' dtypes, so each is traced once. step(h, *state,
    *args) -> (h',); saving: (h', h); backward(g, *sums, *state, h, *args)
    -> (g of h, *sums + g of the floating args, *g of the parameters)."""

    def __init__(self, module, keys, n_params, float_args):
        self.n_state = len(keys)
        self.n_params = n_params
        self.float_args = float_args
        n_state = self.n_state

        def step(h, *rest):
            return (_layer_call(module, keys, h, rest[:n_state], rest[n_state:]),)

        def saving(h, *rest):
            return step(h, *rest)[0], h

        def backward(g, *rest):
            sums = rest[:len(float_args)]
            state = rest[len(float_args):len(float_args) + n_state]
            h = rest[len(float_args) + n_state]
            args = list(rest[len(float_args) + n_state + 1:])
            with torch.enable_grad():
                h = h.detach().requires_grad_()
                params = [t.detach().requires_grad_() for t in state[:n_params]]
                for i in float_args:
                    args[i] = args[i].detach().requires_grad_()
                out = step(h, *params, *state[n_params:], *args)[0]
                wrt = [h, *params, *[args[i] for i in float_args]]
                grads = torch.autograd.grad(out, wrt, g, allow_unused=True)
            grads = [torch.zeros_like(w) if d is None else d for d, w in zip(grads, wrt)]
            g_h, g_p, g_a = grads[0], grads[1:1 + n_params], grads[1 + n_params:]
            return (g_h, *[s + d for s, d in zip(sums, g_a)], *g_p)

        self.module = module
        self.step = step
        self.saving = saving
        self.backward = backward


def _plan(module, keys, n_params, args):
    float_args = tuple(i for i, a in enumerate(args) if a.dtype.is_floating_point)
    k = (id(module), keys, n_params, float_args)
    hit = _plans.get(k)
    if hit is None or hit.module is not module:
        hit = _plans[k] = _Plan(module, keys, n_params, float_args)
    return hit
