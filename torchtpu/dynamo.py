"""torch.compile(backend="tpu"): each FX graph becomes one XLA program.

    model = torch.compile(model, backend="tpu")

Dynamo captures the Python code as FX graphs; AOTAutograd turns each into
an ATen forward graph and, for training, an ATen backward graph. Each of
those runs as ONE program: its ATen ops go through the same C lowering
table as eager mode, recorded into one window that the engine lowers,
compiles (keyed by the ops' signatures, so a new input shape compiles a new
program and says why: torchtpu.debug.compiles()) and caches in memory and in
the persistent disk cache. Values that live only inside the graph never
reach memory, and XLA fuses across the whole graph.

Decompositions: PyTorch's core ATen decompositions, except for ops the
engine lowers itself (layer norm, softmax, convolution, ...): those stay
whole, so the program uses the same lowering eager mode does.

Graph breaks run eagerly between graphs, in the current eager mode.

A graph's first program compiles on the engine's compile threads: the
call returns while it compiles (the program runs when it is ready, in
order with everything else), so Dynamo and AOTAutograd go on tracing
what follows (the backward, the optimizer's step) meanwhile. A failed
compile, or a bad index the program checks, is raised by the next call
that waits for the device (``.item()``, ``.cpu()``, the next op that
needs the result), as with a kernel on other accelerators.

Replay: once a graph ran (or was queued to run) as one program, later
calls with inputs of the same dtypes, sizes, strides, offsets and storage
sharing run that program directly on the new inputs: no op goes through
the dispatcher again. The
engine checks what only it can see (the shapes storages were last written
with); any difference, and any graph whose storages the capture cannot
account for (CPU tensors in the graph, constants), records the graph as
above. ``TORCHTPU_GRAPH_REPLAY=0`` turns replay off.

Warm start: the graphs AOTAutograd makes are kept in PyTorch's AOTAutograd
cache (under TORCHINDUCTOR_CACHE_DIR, "bundled" entries: the backend's
compiled graph is pickled into the entry), so a new process with the same
caches skips AOTAutograd and our graph compile, and the programs come from
the engine's disk cache: it pays Dynamo's tracing and loading only.
``torch._dynamo.utils.counters["aot_autograd"]["autograd_cache_hit"]``
counts the hits; ``torch.compiler.save_cache_artifacts()`` /
``load_cache_artifacts()`` carry the entries to another machine.
``TORCHTPU_AOT_AUTOGRAD_CACHE=0`` turns it off. Where a torch lacks the
pieces (``SerializableAOTDispatchCompiler``, ``bundled_autograd_cache``),
graphs compile as before.
"""
import itertools
import operator
import os

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from . import _C

_counter = itertools.count()


def _decompositions():
    native = set(_C._engine_ops())
    table = {}
    for op, fn in core_aten_decompositions().items():
        name = op.name().split("::", 1)[-1]
        if name.endswith(".default"):
            name = name[: -len(".default")]
        if name not in native:
            table[op] = fn
    return table


_DECOMPOSITIONS = None


# Replays kept per graph: one per distinct input layout seen (a graph whose
# inputs keep changing layout records instead of growing without bound).
_MAX_REPLAYS = 4
# Ops that act outside the program (checks, printing): a replay would skip them.
_SIDE_EFFECT_PREFIXES = ("aten::_assert", "aten::_print", "aten::sym_constrain",
                         "aten::_functional_assert")
_METADATA_MUTATIONS = {"aten::set_", "aten::resize_", "aten::resize_as_"}
# Our own ops that are one engine op each (torchtpu.jax_op's calls).
_ENGINE_CUSTOM_OPS = {"torchtpu::jax_call", "torchtpu::jax_call_out"}


def _replay_enabled():
    return os.environ.get("TORCHTPU_GRAPH_REPLAY", "1") != "0"


def _on_tpu(val):
    for v in torch.utils._pytree.tree_leaves(val):
        if isinstance(v, torch.Tensor) and v.device.type != "tpu":
            return False
    return True


_SCAN_DECOMPOSITIONS = None


def _has_scan(gm):
    scan = _scan_op()
    return any(n.op == "call_function" and n.target is scan for n in gm.graph.nodes)


def _scan_decompositions():
    """The table for graphs with a scan: detach and alias_copy stay whole.
    Decomposed, the scan's step graph returns aliases of its inputs, which
    PyTorch's scan refuses when it functionalizes the step ("scan might be
    aliasing the input or the output!"); whole, they are views as usual."""
    global _SCAN_DECOMPOSITIONS
    if _SCAN_DECOMPOSITIONS is None:
        keep = {torch.ops.aten.detach.default, torch.ops.aten.alias_copy.default}
        _SCAN_DECOMPOSITIONS = {op: fn for op, fn in _DECOMPOSITIONS.items() if op not in keep}
    return _SCAN_DECOMPOSITIONS


def _scan_op():
    from torch._higher_order_ops.scan import scan_op

    return scan_op


def _replayable(gm):
    """Whether every effect of the graph is inside its one program: only
    ATen ops on tpu tensors, none that changes an input's metadata or acts
    outside the device."""
    for n in gm.graph.nodes:
        if not _on_tpu(n.meta.get("val")):
            return False
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        op = n.target
        if op is _scan_op():
            continue  # one engine op (torchtpu.scan): the loop's program
        if not isinstance(op, torch._ops.OpOverload):
            return False
        if op.namespace not in ("aten", "prims") and op.name() not in _ENGINE_CUSTOM_OPS:
            return False
        name = op.name()
        if (torch.Tag.inplace_view in op.tags or name in _METADATA_MUTATIONS
                or name.startswith(_SIDE_EFFECT_PREFIXES)):
            return False
    return True


# Why Dynamo compiled each graph (name -> reason), for torchtpu.debug.compiles():
# the engine only sees a new program; Dynamo knows which guard failed.
graph_reasons = {}
_failures_seen = {}


def _latest_guard_failure():
    """The guard failure that made Dynamo recompile now, if any (first line)."""
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:
        return None
    latest = None
    for code, reasons in list(guard_failures.items()):
        if len(reasons) > _failures_seen.get(code, 0):
            _failures_seen[code] = len(reasons)
            latest = str(reasons[-1]).splitlines()[0]
    return latest


# Sizes of a graph with symbolic sizes that keep their own replays (each
# replay holds the true sizes of its recording: docs/design/shapes.md).
_MAX_REPLAY_SIZES = 64


def _symbolic_inputs(gm):
    """A graph's inputs with symbolic sizes (Dynamo's dynamic shapes:
    dynamic=True, automatic dynamic, mark_dynamic): the indices of its
    integer size inputs, and per tensor input with symbolic dims, those
    dims grouped by symbol."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    sizes, tensors = [], []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(placeholders):
        v = n.meta.get("val")
        if isinstance(v, torch.SymInt):
            sizes.append(i)
        elif isinstance(v, torch.Tensor):
            groups = {}
            for d, size in enumerate(v.shape):
                if not is_concrete_int(size):
                    groups.setdefault(str(size), []).append(d)
            if groups:
                tensors.append((i, list(groups.values())))
    return sizes, tensors


class _Padder:
    """Stores a graph's tensor inputs padded along their symbolic dims, so
    that the graph compiles one program per bucket of sizes, not one per
    size. A tensor with one symbolic size is padded along it from the first
    call (mark_dynamic, or a dimension Dynamo found changing); with several
    (dynamic=True) along the one seen changing."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.last = {}
        self.chosen = {}

    def __call__(self, args):
        for i, groups in self.tensors:
            a = args[i]
            if not isinstance(a, torch.Tensor) or a.device.type != "tpu":
                continue
            d = self.chosen.get(i)
            if d is None:
                if len(groups) == 1:
                    d = groups[0][0]
                else:
                    prev, now = self.last.get(i), a.shape
                    self.last[i] = now
                    if prev is None or len(prev) != len(now):
                        continue
                    moved = [g[0] for g in groups if prev[g[0]] != now[g[0]]]
                    if len(moved) != 1:
                        continue
                    d = moved[0]
                self.chosen[i] = d
            _C._pad_graph_input(a, d)


def _graph_runner(name, gm, replayable, symbolic=None):
    """The boxed callable that runs one ATen graph as one program (and
    replays it once it did). symbolic: _symbolic_inputs(gm), given for a
    graph loaded from its source (which has no FX graph to read)."""
    replays = {}
    sizes, tensors = symbolic if symbolic is not None else _symbolic_inputs(gm)
    pad = _Padder(tensors) if tensors and os.environ.get("TORCHTPU_BUCKETS", "") != "off" else None

    def run(*args):
        if pad is not None:
            pad(args)
        if sizes or tensors:
            key = tuple(args[i] for i in sizes) + tuple(
                getattr(args[i], "shape", None) for i, _ in tensors)
        else:
            key = ()
        kept = replays.get(key)
        for replay in kept or ():
            out = replay.run(args)
            if out is not None:
                return out
        _C._begin_graph(name)
        out = None
        try:
            out = gm(*args)
        finally:
            # (out stays None when gm raised: that graph just ends)
            room = (len(kept) < _MAX_REPLAYS if kept is not None
                    else len(replays) < _MAX_REPLAY_SIZES)
            if replayable and isinstance(out, (list, tuple)) and room:
                replay = _C._end_graph_capture(args, out)
                if replay is not None:
                    replays.setdefault(key, []).append(replay)
            else:
                _C._end_graph()
        return out

    return run


def _whole_slice_scatters(gm):
    """slice_scatter(x, src, dim, 0, end, 1) with src the shape of x (end
    at or past x's size: the backward of a slice over a whole dim, as in
    Hugging Face's logits_to_keep=0) is src itself: it becomes a clone of
    src. Written as a fill and a scatter, it would cost a program per size
    where the sizes are symbolic, since the fill is not of an input's
    size."""
    target = torch.ops.aten.slice_scatter.default
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not target:
            continue
        args = list(n.args) + [None] * (6 - len(n.args))
        x, src, dim, start, end, step = args[:6]
        dim = n.kwargs.get("dim", 0 if dim is None else dim)
        start = n.kwargs.get("start", start)
        end = n.kwargs.get("end", end)
        step = n.kwargs.get("step", 1 if step is None else step)
        xv = getattr(x, "meta", {}).get("val")
        sv = getattr(src, "meta", {}).get("val")
        if not (isinstance(xv, torch.Tensor) and isinstance(sv, torch.Tensor)):
            continue
        if (start not in (None, 0) or step != 1 or xv.dtype != sv.dtype
                or [str(d) for d in xv.shape] != [str(d) for d in sv.shape]
                or not isinstance(end, int) or not isinstance(dim, int)):
            continue
        size = xv.shape[dim]
        if end < 2 ** 62 and str(end) != str(size):
            continue
        with gm.graph.inserting_before(n):
            copy = gm.graph.call_function(torch.ops.aten.clone.default, (src,))
        copy.meta = dict(n.meta)
        n.replace_all_uses_with(copy)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return gm


def _graph_compiler(kind, why=None):
    def compile_graph(gm, example_inputs):
        gm = _whole_slice_scatters(gm)
        name = f"{kind}{next(_counter)}"
        if len(graph_reasons) < 4096:
            graph_reasons[name] = (f"recompiled by Dynamo: {why}" if why
                                   else "new graph (first compile of this code)")
        replayable = _replay_enabled() and _replayable(gm)
        return make_boxed_func(_graph_runner(name, gm, replayable))

    return compile_graph


# ---------------------------------------------------------- warm start
# PyTorch's AOTAutograd cache (torch._functorch, "bundled" entries) keeps,
# per Dynamo graph and input signature, the result of AOTAutograd: the
# forward/backward ATen graphs and the runtime wrappers around them. A
# backend takes part by compiling to an OutputCode that pickles; ours is
# the ATen graph itself (its program then comes from the engine's disk
# cache). A warm process skips AOTAutograd's tracing, partitioning and our
# graph compile; Dynamo still traces the Python (its own precompile cache,
# torch._dynamo.config.caching_precompile, stores these same entries).


def _cache_support():
    """(OutputCode base, SerializableAOTDispatchCompiler) when this torch's
    AOTAutograd cache accepts a custom backend's bundled entries, else None."""
    try:
        import torch._functorch.config as fconfig
        from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
        from torch._inductor.output_code import OutputCode
    except ImportError:
        return None
    if not (hasattr(fconfig, "enable_autograd_cache") and hasattr(fconfig, "bundled_autograd_cache")):
        return None
    return OutputCode, SerializableAOTDispatchCompiler


def cache_enabled():
    """Whether compiled graphs use PyTorch's AOTAutograd cache
    (``TORCHTPU_AOT_AUTOGRAD_CACHE=0`` turns it off)."""
    return os.environ.get("TORCHTPU_AOT_AUTOGRAD_CACHE", "1") != "0" and _cache_support() is not None


_GraphCode = None
_loading_why = None


def _graph_code_type():
    global _GraphCode
    if _GraphCode is not None:
        return _GraphCode
    OutputCode, _ = _cache_support()

    class GraphCode(OutputCode):
        """One ATen graph as the AOTAutograd cache stores it: the graph
        module (pickled by torch.fx) and whether it may replay. The runner
        is rebuilt after loading."""

        def __init__(self, kind, gm, replayable):
            # An instance attribute, so that wrappers (functools.wraps) copy it.
            self._boxed_call = True
            self.kind = kind
            self.gm = gm
            self.replayable = replayable
            self.symbolic = _symbolic_inputs(gm)
            self.name = f"{kind}{next(_counter)}"
            self._run = _graph_runner(self.name, gm, replayable, self.symbolic)

        def __call__(self, inputs):
            return self._run(*inputs)

        def prepare_for_serialization(self):
            self._run = None

        def post_compile(self, example_inputs, constants, graph_kwargs):
            if len(graph_reasons) < 4096:
                why = _loading_why
                graph_reasons[self.name] = (f"recompiled by Dynamo: {why} (AOTAutograd cache hit)" if why
                                            else "new graph (first compile of this code; AOTAutograd cache hit)")
            self._run = _graph_runner(self.name, self.gm, self.replayable and _replay_enabled(),
                                      getattr(self, "symbolic", None) or ([], []))

        def set_triton_bundle(self, triton_bundle):
            pass

        def __getstate__(self):
            state = dict(self.__dict__)
            state["_run"] = None
            state["gm"] = _graph_source(self.gm)
            return state

        def __setstate__(self, state):
            state["gm"] = _graph_from_source(state["gm"])
            self.__dict__.update(state)

    GraphCode.__qualname__ = "GraphCode"
    GraphCode.__module__ = __name__
    _GraphCode = GraphCode
    globals()["GraphCode"] = GraphCode  # where pickle finds it
    return GraphCode


def _graph_source(gm):
    """A graph module as its Python source and attributes. torch.fx's own
    pickling re-traces the source symbolically on load, which runs any op
    without tensor inputs (an arange) there and then and folds it into a
    constant: a different program. The source runs as it is instead."""
    from torch.fx.graph_module import _format_import_block
    from torch.package import sys_importer

    saved = getattr(gm, "_torchtpu_source", None)
    if saved is not None:  # loaded from source already
        return saved
    python_code = gm.graph.python_code(root_module="self")
    body = dict(gm.__dict__)
    body.pop("_graph", None)
    return (_format_import_block(python_code.globals, sys_importer), python_code.src, body)


def _graph_from_source(saved):
    from torch.fx.graph_module import _forward_from_src

    import_block, src, body = saved
    forward = _forward_from_src(import_block + src, {})
    cls = type("LoadedGraph", (torch.nn.Module,), {"forward": forward})
    module = cls.__new__(cls)
    module.__dict__.update(body)
    module._torchtpu_source = saved
    return module


_KEY_PASS = None


def _key_pass():
    """What makes our cache entries ours, in the cache key: the AOTAutograd
    cache hashes the inductor passes' uuid() whichever backend runs, so a
    pass that never runs (inductor does not compile our graphs) carries this
    backend's identity: its source and the engine's op table, which decide
    the decompositions."""
    global _KEY_PASS
    if _KEY_PASS is None:
        try:
            from torch._inductor.custom_graph_pass import CustomGraphPass
        except ImportError:
            return None
        import hashlib

        h = hashlib.sha256()
        with open(__file__, "rb") as f:
            h.update(f.read())
        h.update(" ".join(sorted(_C._engine_ops())).encode())
        ident = "torchtpu-" + h.hexdigest()

        class BackendIdentity(CustomGraphPass):
            def __call__(self, graph):
                pass

            def uuid(self):
                return ident

        _KEY_PASS = BackendIdentity()
    return _KEY_PASS


def _cached_graph_compiler(kind, why=None):
    _, Serializable = _cache_support()
    code_type = _graph_code_type()

    def compile_graph(gm, example_inputs):
        gm = _whole_slice_scatters(gm)
        code = code_type(kind, gm, _replay_enabled() and _replayable(gm))
        if len(graph_reasons) < 4096:
            graph_reasons[code.name] = (f"recompiled by Dynamo: {why}" if why
                                        else "new graph (first compile of this code)")
        return code

    return Serializable(code_type, compile_graph)


def backend(gm, example_inputs, **kwargs):
    """The "tpu" backend for torch.compile."""
    global _DECOMPOSITIONS
    if _DECOMPOSITIONS is None:
        _DECOMPOSITIONS = _decompositions()
    global _loading_why
    why = _latest_guard_failure()
    _loading_why = why  # for graphs the AOTAutograd cache hands back
    cached = cache_enabled()
    make = _cached_graph_compiler if cached else _graph_compiler
    compiler = aot_autograd(
        fw_compiler=make("forward", why),
        bw_compiler=make("backward", why),
        inference_compiler=make("inference", why),
        decompositions=_scan_decompositions() if _has_scan(gm) else _DECOMPOSITIONS,
        keep_inference_input_mutations=True,
    )
    if not cached:
        return compiler(gm, example_inputs, **kwargs)
    import torch._functorch.config as fconfig
    import torch._inductor.config as iconfig

    # The cache checks the FX graph cache switch even for other backends.
    # A lazily compiled backward would save its entry after this call, with
    # these switches back to the user's: compile it now (our backward compile
    # only wraps the graph; its program compiles when it first runs).
    switches = dict(enable_autograd_cache=True, bundled_autograd_cache=True)
    if hasattr(fconfig, "force_non_lazy_backward_lowering"):
        switches["force_non_lazy_backward_lowering"] = True
    inductor = dict(fx_graph_cache=True)
    key_pass = _key_pass()
    if key_pass is not None and getattr(iconfig, "post_grad_custom_post_pass", 0) is None:
        inductor["post_grad_custom_post_pass"] = key_pass
    with fconfig.patch(**switches), iconfig.patch(**inductor):
        return compiler(gm, example_inputs, **kwargs)


def _keep_optimizer_steps_on_tpu():
    """Compiled optimizers keep their step counters on the device, as
    torch.compile does for CUDA: Dynamo turns `capturable` on for a param
    group whose params are all on cuda/xpu and have no state yet; this does
    the same for tpu (PyTorch's optimizers support capturable on the
    PrivateUse1 device). With the counters on the host, every compiled
    step would upload them and mix host ops into the graph; on the device
    the whole optimizer step is one program that can be replayed."""
    try:
        from torch._dynamo.variables.optimizer import OptimizerVariable
    except ImportError:
        return
    original = getattr(OptimizerVariable, "_set_capturable", None)
    if original is None or getattr(original, "_torchtpu", False):
        return

    def _set_capturable(self, tx):
        state = self.value.state
        for group in self.value.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params
                    and all(isinstance(p, torch.Tensor) and p.device.type == "tpu" for p in params)
                    and all(p not in state for p in params)):
                group["capturable"] = True
        return original(self, tx)

    _set_capturable._torchtpu = True
    OptimizerVariable._set_capturable = _set_capturable


_keep_optimizer_steps_on_tpu()


def register():
    from torch._dynamo import list_backends, register_backend

    if "tpu" not in list_backends(exclude_tags=()):
        register_backend(name="tpu")(backend)


__all__ = ["backend", "register"]
