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

Replay: once a graph ran as one program, later calls with inputs of the
same dtypes, sizes, strides, offsets and storage sharing run that program
directly on the new inputs: no op goes through the dispatcher again. The
engine checks what only it can see (the shapes storages were last written
with); any difference, and any graph whose storages the capture cannot
account for (CPU tensors in the graph, constants), records the graph as
above. ``TORCHTPU_GRAPH_REPLAY=0`` turns replay off.
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


def _replay_enabled():
    return os.environ.get("TORCHTPU_GRAPH_REPLAY", "1") != "0"


def _on_tpu(val):
    for v in torch.utils._pytree.tree_leaves(val):
        if isinstance(v, torch.Tensor) and v.device.type != "tpu":
            return False
    return True


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
        if not isinstance(op, torch._ops.OpOverload) or op.namespace not in ("aten", "prims"):
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


def _graph_compiler(kind, why=None):
    def compile_graph(gm, example_inputs):
        name = f"{kind}{next(_counter)}"
        if len(graph_reasons) < 4096:
            graph_reasons[name] = (f"recompiled by Dynamo: {why}" if why
                                   else "new graph (first compile of this code)")
        replayable = _replay_enabled() and _replayable(gm)
        replays = []

        def run(*args):
            for replay in replays:
                out = replay.run(args)
                if out is not None:
                    return out
            _C._begin_graph(name)
            out = None
            try:
                out = gm(*args)
            finally:
                # (out stays None when gm raised: that graph just ends)
                if replayable and isinstance(out, (list, tuple)) and len(replays) < _MAX_REPLAYS:
                    replay = _C._end_graph_capture(args, out)
                    if replay is not None:
                        replays.append(replay)
                else:
                    _C._end_graph()
            return out

        return make_boxed_func(run)

    return compile_graph


def backend(gm, example_inputs, **kwargs):
    """The "tpu" backend for torch.compile."""
    global _DECOMPOSITIONS
    if _DECOMPOSITIONS is None:
        _DECOMPOSITIONS = _decompositions()
    why = _latest_guard_failure()
    compiler = aot_autograd(
        fw_compiler=_graph_compiler("forward", why),
        bw_compiler=_graph_compiler("backward", why),
        inference_compiler=_graph_compiler("inference", why),
        decompositions=_DECOMPOSITIONS,
        keep_inference_input_mutations=True,
    )
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
