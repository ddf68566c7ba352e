"""JAX functions as ops on tpu tensors.

    import jax.numpy as jnp
    import torchtpu

    @torchtpu.jax_op
    def gelu_mlp(x, w1, w2):
        return jnp.dot(jax.nn.gelu(x @ w1), w2)

    y = gelu_mlp(x, w1, w2)          # x, w1, w2: tpu tensors
    y.sum().backward()               # through jax.vjp of the same function

A wrapped function takes tpu tensors as its positional arrays; every other
argument (an int, a tuple, a string, keyword arguments) is static: part of
what the function is lowered for. It returns an array or a tuple/list of
arrays. For each new signature (shapes, dtypes, static values) JAX lowers
the function to StableHLO, on its CPU backend and for the platform our
runtime runs on, and the engine calls that text as one op (the engine op
``torchtpu::extern_call``): in strict mode it is one program, in a fused
window or a ``torch.compile(backend="tpu")`` graph it is inlined into the
program (one FX node, no graph break). Inputs may be any views; ``out=``
(a tensor or a tuple of them, views too) writes the results in place.

Autograd: by default the backward is ``jax.vjp`` of the same function,
lowered and cached the same way, with respect to the floating and complex
inputs. ``jax_op(fn, backward=bwd)`` takes a JAX function of its own:
``bwd(*args, *grads, **kwargs)`` gets the forward's arguments (statics in
place) followed by one gradient per floating output, and returns one
gradient (or None) per tensor argument.

Pallas: ``pl.pallas_call`` kernels run in Pallas's interpret mode (plain
StableHLO) wherever the runtime is not a TPU (``pallas_interpret()``), and
as Mosaic kernels on a TPU. ``torchtpu.aot`` compiles programs that call a
JAX function with the function lowered for TPU, so a Pallas kernel reaches
libtpu as its Mosaic kernel even when the step ran on the CPU plugin.

JAX is optional (``pip install "torchtpu[kernels]"``): ``jax_op`` raises an
ImportError naming the extra without it. Unless ``JAX_PLATFORMS`` says
otherwise, JAX is then limited to its CPU backend, which it uses only to
lower: the device stays ours.
"""
import contextlib
import functools
import hashlib
import itertools
import os
import threading

import torch

from . import _C

__all__ = ["jax_op", "pallas_interpret", "lowering_platform", "retarget"]

_HINT = ('torchtpu.jax_op needs JAX: pip install "torchtpu[kernels]" '
         "(or pip install -r requirements-kernels.txt)")

_lock = threading.RLock()
_jax_mod = None


def _jax():
    """The jax module, configured for lowering only (ImportError naming
    the extra when JAX is missing)."""
    global _jax_mod
    if _jax_mod is None:
        try:
            import jax
        except ImportError as e:
            raise ImportError(_HINT) from e
        if not os.environ.get("JAX_PLATFORMS"):
            # Keep JAX off the accelerator (ours owns it) and off backends
            # it would probe; this holds only while JAX has no backend yet.
            try:
                if not jax.config.jax_platforms:
                    jax.config.update("jax_platforms", "cpu")
            except Exception:
                pass
        _jax_mod = jax
    return _jax_mod


def lowering_platform():
    """The JAX platform name of the runtime behind ``tpu``: "cpu" on the XLA
    CPU plugin, "tpu" with libtpu, "cuda" on the CUDA plugin."""
    name = _C._platform()["name"].lower()
    return {"gpu": "cuda"}.get(name, name)


def pallas_interpret(platform=None):
    """Whether Pallas TPU kernels run in interpret mode: everywhere but a
    TPU (``platform`` defaults to the runtime's)."""
    return (platform or lowering_platform()) != "tpu"


# ------------------------------------------------------------------- dtypes

def _dtype_pairs():
    jnp = _jax().numpy
    pairs = [
        (torch.float32, jnp.float32), (torch.float64, jnp.float64),
        (torch.float16, jnp.float16), (torch.bfloat16, jnp.bfloat16),
        (torch.int8, jnp.int8), (torch.int16, jnp.int16),
        (torch.int32, jnp.int32), (torch.int64, jnp.int64),
        (torch.uint8, jnp.uint8), (torch.bool, jnp.bool_),
        (torch.complex64, jnp.complex64), (torch.complex128, jnp.complex128),
    ]
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name) and hasattr(jnp, name):
            pairs.append((getattr(torch, name), getattr(jnp, name)))
    return pairs


_TO_JAX = None
_TO_TORCH = None


def _dtype_maps():
    global _TO_JAX, _TO_TORCH
    if _TO_JAX is None:
        import numpy as np
        pairs = _dtype_pairs()
        _TO_TORCH = {np.dtype(j): t for t, j in pairs}
        _TO_JAX = {t: j for t, j in pairs}
    return _TO_JAX, _TO_TORCH


def _to_jax_dtype(dtype, name):
    _dtype_maps()
    if dtype not in _TO_JAX:
        raise TypeError(f"jax_op({name}): tensors of dtype {dtype} have no JAX dtype")
    return _TO_JAX[dtype]


def _to_torch_dtype(dtype, name):
    import numpy as np
    t = _dtype_maps()[1].get(np.dtype(dtype))
    if t is None:
        raise TypeError(f"jax_op({name}): JAX returned dtype {dtype}, which torch has no dtype for")
    return t


_WIDE = (torch.float64, torch.int64, torch.complex128) + tuple(
    getattr(torch, n) for n in ("uint64",) if hasattr(torch, n))


def _differentiable(dtype):
    return dtype.is_floating_point or dtype.is_complex


# ------------------------------------------------------------- lowerings

# The op's key ("<callee>.<n>") -> _Lowered. Each wrapped function and
# signature has a key of its own: two functions may lower to one text (one
# callee for the engine) and still differ in their gradients (a
# jax.custom_vjp, a given backward). The key lives in this process only.
_registry = {}
_by_callee = {}  # callee -> a _Lowered of it (for retarget)
_serial = itertools.count()


class _Lowered:
    """One JAX function for one signature: its callee name, result types
    and, per platform, the text the engine calls."""

    def __init__(self, name, build, in_specs, wide):
        self.name = name            # the user function's name, for messages
        self.build = build          # () -> the flat JAX function
        self.in_specs = in_specs    # [(shape, torch dtype)]
        self.wide = wide            # lower with 64-bit types on
        self.blocks = {}
        self.vjp = None
        self.callee = None
        self.key = None
        self.defined = False        # the engine holds the callee's text
        self.outs = None            # [(shape, torch dtype)]
        self.single = False         # the function returned one array

    def _lower(self, platform):
        jax = _jax()
        specs = [jax.ShapeDtypeStruct(tuple(s), _to_jax_dtype(d, self.name))
                 for s, d in self.in_specs]
        fn = self.build()
        x64 = jax.enable_x64(True) if self.wide else contextlib.nullcontext()
        interp = _interpret_context(pallas_interpret(platform))
        try:
            with x64, interp:
                return jax.jit(fn, keep_unused=True).trace(*specs).lower(lowering_platforms=(platform,))
        except Exception as e:
            raise _named(e, self.name) from e

    def first(self, platform):
        """Lowers once for the XLA CPU platform (in Pallas interpret mode)
        and names the callee after that text: one name always means one
        computation, and the name, so the op's signature, is the same on
        every platform (a TPU disk cache filled on a CPU host hits)."""
        lowered = self._lower("cpu")
        jax = _jax()
        leaves, tree = jax.tree_util.tree_flatten(lowered.out_info)
        if not leaves:
            raise TypeError(f"jax_op({self.name}): the function returned no array")
        if tree.num_nodes != 1 and not _flat_sequence(jax, tree, len(leaves)):
            raise TypeError(
                f"jax_op({self.name}): the function must return an array or a tuple of "
                f"arrays, got the structure {tree}")
        self.single = tree.num_nodes == 1
        self.outs = [(tuple(x.shape), _to_torch_dtype(x.dtype, self.name)) for x in leaves]
        digest = hashlib.sha256(lowered.as_text().encode()).hexdigest()[:20]
        self.callee = f"tj{digest}"
        self.key = f"{self.callee}.{next(_serial)}"
        self.blocks["cpu"] = _block(lowered, self.callee, self.name)
        if platform != "cpu":
            self.block(platform)

    def block(self, platform):
        with _lock:
            if platform not in self.blocks:
                self.blocks[platform] = _block(self._lower(platform), self.callee, self.name)
            return self.blocks[platform]


def _interpret_context(interpret):
    if not interpret:
        return contextlib.nullcontext()
    try:
        from jax.experimental.pallas import tpu as pltpu
    except Exception:  # a JAX without Pallas TPU support: nothing to force
        return contextlib.nullcontext()
    # Plain interpret mode (an HLO loop over the grid), not TPU interpret
    # mode, which calls back into this process's JAX runtime.
    return pltpu.force_tpu_interpret_mode(True)


def _flat_sequence(jax, tree, n):
    try:
        return tree in (jax.tree_util.tree_structure((0,) * n),
                        jax.tree_util.tree_structure([0] * n))
    except Exception:
        return False


def _named(e, name):
    msg = f"jax_op({name}): {e}"
    try:
        out = type(e)(msg)
    except Exception:
        out = RuntimeError(msg)
    return out


def _block(lowered, callee, name):
    """The lowered module's functions, renamed under `callee` (its main is
    `callee`, every other function `callee`_name) and private, between
    markers retarget() finds."""
    from jax._src.lib.mlir import ir

    module = lowered.compiler_ir("stablehlo")
    with module.context:
        ops = list(module.body.operations)
        for op in ops:
            if op.operation.name != "func.func":
                raise NotImplementedError(
                    f"jax_op({name}): the lowered module holds a '{op.operation.name}' "
                    "(sharding annotations?); only functions can be called")
        table = module.operation
        for op in ops:
            old = ir.StringAttr(op.attributes["sym_name"]).value
            new = callee if old == "main" else f"{callee}_{old}"
            ir.SymbolTable.replace_all_symbol_uses(old, new, table)
            ir.SymbolTable.set_symbol_name(op, new)
            ir.SymbolTable.set_visibility(op, "private")
        body = "\n".join(op.operation.get_asm(enable_debug_info=False) for op in ops)
    return f"// torchtpu.jax_op {callee}\n{body}\n// end {callee}\n"


_retargeted = set()  # (callee, platform) whose text the engine has


def retarget(text, platform):
    """A program's text with each JAX function it calls lowered for
    `platform` instead ("tpu": Pallas kernels become Mosaic kernels): the
    engine swaps each callee's block for its text for the platform
    (ttpu_aot_retarget, next to the extern op). Functions this process did
    not lower are left as they are. Takes and returns str or bytes."""
    raw = bytes(text) if isinstance(text, (bytes, bytearray)) else text.encode()
    if b"// torchtpu.jax_op " not in raw:
        return text
    for callee, low in _by_callee.items():
        if (callee, platform) in _retargeted:
            continue
        if f"// torchtpu.jax_op {callee}\n".encode() in raw:
            _C._aot_define_callee(platform, callee, low.block(platform))
            _retargeted.add((callee, platform))
    out = _C._aot_retarget(raw, platform)
    return out if isinstance(text, (bytes, bytearray)) else out.decode()


def _define(low):
    """Gives the engine the callee's text for the runtime's platform, once
    per lowering (the engine keeps it for the process; a second lowering of
    the same text defines it again as a no-op, another text is refused)."""
    if not low.defined:
        _C._extern_define(low.callee, low.block(lowering_platform()))
        low.defined = True


# --------------------------------------------------------------- the ops

_lib = torch.library.Library("torchtpu", "FRAGMENT")
# `key` names a lowering of this process (_registry), not the engine's callee.
_lib.define("jax_call(Tensor[] inputs, str key) -> Tensor[]")
_lib.define("jax_call_out(Tensor[] inputs, str key, Tensor(a!)[] out) -> ()")


def _device_of(inputs):
    for t in inputs:
        return t.device
    return torch.device("tpu", torch.tpu.current_device())


def _lookup(key):
    low = _registry.get(key)
    if low is None:
        raise RuntimeError(
            f"torchtpu.jax_call: no JAX function {key} was lowered in this process "
            "(graphs calling JAX functions are not kept in compile caches)")
    return low


@torch.library.register_fake("torchtpu::jax_call")
def _jax_call_fake(inputs, key):
    low = _lookup(key)
    dev = _device_of(inputs)
    return [torch.empty(s, dtype=d, device=dev) for s, d in low.outs]


@torch.library.impl("torchtpu::jax_call", "PrivateUse1")
def _jax_call_tpu(inputs, key):
    low = _lookup(key)
    dev = _device_of(inputs)
    outs = [torch.empty(s, dtype=d, device=dev) for s, d in low.outs]
    _define(low)
    _C._extern_call(low.callee, list(inputs), outs)
    return outs


@torch.library.register_fake("torchtpu::jax_call_out")
def _jax_call_out_fake(inputs, key, out):
    return None


@torch.library.impl("torchtpu::jax_call_out", "PrivateUse1")
def _jax_call_out_tpu(inputs, key, out):
    low = _lookup(key)
    _define(low)
    _C._extern_call(low.callee, list(inputs), list(out))


def _setup_context(ctx, inputs, output):
    tensors, key = inputs
    ctx.key = key
    ctx.save_for_backward(*tensors)


def _backward(ctx, grads):
    low = _registry[ctx.key]
    primals = list(ctx.saved_tensors)
    bwd = low.vjp
    if bwd is None:
        raise RuntimeError(f"jax_op({low.name}): no backward was lowered")
    cts = []
    for g, (shape, dtype) in zip(grads, low.outs):
        if not _differentiable(dtype):
            continue
        cts.append(g if g is not None else torch.zeros(shape, dtype=dtype, device=_device_of(primals)))
    with _lock:
        lowered = bwd(primals, cts)
    outs = torch.ops.torchtpu.jax_call(primals + cts, lowered.key)
    it = iter(outs)
    return [next(it) if keep else None for keep in lowered.grads_for], None


torch.library.register_autograd("torchtpu::jax_call", _backward, setup_context=_setup_context)


# ------------------------------------------------------------- jax_op


def _signature(tensors):
    return tuple((tuple(t.shape), t.dtype) for t in tensors)


def jax_op(fn=None, *, backward=None):
    """Wraps a JAX function as an op on tpu tensors (see the module doc).
    Usable as ``@jax_op`` or ``jax_op(fn, backward=bwd)``."""
    if fn is None:
        return functools.partial(jax_op, backward=backward)
    if not callable(fn):
        raise TypeError(f"jax_op: expected a function, got {type(fn).__name__}")
    _jax()  # ImportError naming the extra when JAX is missing
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    cache = {}

    def lowered_for(args, kwargs, tensors):
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        # Typed: 1, 1.0 and True are equal keys but lower differently.
        statics = tuple((i, type(a), a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor))
        named = tuple((k, type(v), v) for k, v in sorted(kwargs.items()))
        try:
            key = (positions, statics, named, _signature(tensors))
            hash(key)
        except TypeError as e:
            raise TypeError(f"jax_op({name}): static (non-tensor) arguments must be hashable: {e}") from None
        with _lock:
            low = cache.get(key)
            if low is not None:
                return low

            # The statics in place, no tensor: the cache must not keep the
            # first call's tensors alive.
            template = [None if isinstance(a, torch.Tensor) else a for a in args]
            kw = dict(kwargs)

            def build():
                def flat(*arrays):
                    full = list(template)
                    for i, a in zip(positions, arrays):
                        full[i] = a
                    return fn(*full, **kw)
                return flat

            specs = [(tuple(t.shape), t.dtype) for t in tensors]
            wide = any(d in _WIDE for _, d in specs)
            low = _Lowered(name, build, specs, wide)
            low.first(lowering_platform())
            _registry[low.key] = low
            _by_callee.setdefault(low.callee, low)
            low.vjp = _vjp_maker(low, fn, backward, template, kw, positions)
            cache[key] = low
            return low

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                raise TypeError(f"jax_op({name}): tensor argument {k}= must be passed positionally "
                                "(keyword arguments are static)")
        if not tensors:
            raise TypeError(
                f"jax_op({name}): needs at least one tpu tensor argument (the call runs on "
                "its device); pass tensors positionally")
        for i, t in enumerate(tensors):
            if t.device.type != "tpu":
                raise ValueError(
                    f"jax_op({name}): tensor argument {i} is on {t.device}; move it to tpu")
        low = lowered_for(args, kwargs, tensors)
        if out is not None:
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            _check_out(low, outs, tensors, name)
            torch.ops.torchtpu.jax_call_out(tensors, low.key, outs)
            return out
        results = torch.ops.torchtpu.jax_call(tensors, low.key)
        return results[0] if low.single else tuple(results)

    try:
        import torch._dynamo
        call = torch._dynamo.allow_in_graph(call)
    except Exception:  # a torch without Dynamo: eager only
        pass
    call.__wrapped_jax__ = fn
    return call


def _check_out(low, outs, tensors, name):
    if len(outs) != len(low.outs):
        raise ValueError(f"jax_op({name}): out= has {len(outs)} tensors, the function returns {len(low.outs)}")
    for k, (t, (shape, dtype)) in enumerate(zip(outs, low.outs)):
        if not isinstance(t, torch.Tensor) or t.device.type != "tpu":
            raise ValueError(f"jax_op({name}): out[{k}] must be a tpu tensor")
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise ValueError(
                f"jax_op({name}): out[{k}] is {t.dtype}{list(t.shape)}; the result is {dtype}{list(shape)}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in list(tensors) + outs):
        raise RuntimeError(
            f"jax_op({name}): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.")


def _vjp_maker(low, fn, backward, args, kwargs, positions):
    """The lowering of low's backward for given primals and cotangents,
    made on first use and cached per signature."""
    cache = {}
    jax_holder = {}

    def make(primals, cts):
        key = _signature(primals + cts)
        got = cache.get(key)
        if got is not None:
            return got
        jax = _jax()
        n = len(primals)
        diff = [_differentiable(t.dtype) for t in primals]
        out_float = [_differentiable(d) for _, d in low.outs]
        if backward is None and not any(diff):
            raise RuntimeError(f"jax_op({low.name}): no tensor argument is differentiable")

        if backward is not None:
            def build():
                def flat(*arrays):
                    full = list(args)
                    for i, a in zip(positions, arrays[:n]):
                        full[i] = a
                    grads = backward(*full, *arrays[n:], **kwargs)
                    if not isinstance(grads, (tuple, list)):
                        grads = (grads,)
                    if len(grads) != n:
                        raise ValueError(
                            f"the backward returned {len(grads)} gradients for {n} tensor arguments")
                    keep = [g is not None for g in grads]
                    jax_holder["keep"] = keep
                    return tuple(g for g in grads if g is not None)
                return flat
        else:
            def build():
                import numpy as np
                jnp = jax.numpy

                def flat(*arrays):
                    full_p = list(arrays[:n])
                    idx = [i for i in range(n) if diff[i]]

                    def f_diff(*d):
                        full = list(args)
                        vals = list(full_p)
                        for i, v in zip(idx, d):
                            vals[i] = v
                        for i, a in zip(positions, vals):
                            full[i] = a
                        r = fn(*full, **kwargs)
                        return tuple(r) if isinstance(r, (tuple, list)) else (r,)

                    outs, pull = jax.vjp(f_diff, *[full_p[i] for i in idx])
                    it = iter(arrays[n:])
                    # PyTorch's gradients of complex values are the conjugates
                    # of JAX's cotangents: conjugate on the way in and out.
                    cts_all = tuple(jnp.conj(next(it)) if f else np.zeros(o.shape, dtype=jax.dtypes.float0)
                                    for o, f in zip(outs, out_float))
                    grads = pull(cts_all)
                    jax_holder["keep"] = diff
                    return tuple(jnp.conj(g) if jnp.iscomplexobj(g) else g for g in grads)
                return flat

        specs = [(tuple(t.shape), t.dtype) for t in primals + cts]
        wide = low.wide or any(d in _WIDE for _, d in specs)
        bl = _Lowered(f"{low.name} (backward)", build, specs, wide)
        bl.first(lowering_platform())
        bl.grads_for = list(jax_holder.get("keep", diff))
        if not any(bl.grads_for):
            raise RuntimeError(f"jax_op({low.name}): no tensor argument is differentiable")
        _registry[bl.key] = bl
        _by_callee.setdefault(bl.callee, bl)
        cache[key] = bl
        return bl

    return make
