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
"""
import itertools

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


def _graph_compiler(kind):
    def compile_graph(gm, example_inputs):
        name = f"{kind}{next(_counter)}"

        def run(*args):
            _C._begin_graph(name)
            try:
                return gm(*args)
            finally:
                _C._end_graph()

        return make_boxed_func(run)

    return compile_graph


def backend(gm, example_inputs, **kwargs):
    """The "tpu" backend for torch.compile."""
    global _DECOMPOSITIONS
    if _DECOMPOSITIONS is None:
        _DECOMPOSITIONS = _decompositions()
    compiler = aot_autograd(
        fw_compiler=_graph_compiler("forward"),
        bw_compiler=_graph_compiler("backward"),
        inference_compiler=_graph_compiler("inference"),
        decompositions=_DECOMPOSITIONS,
        keep_inference_input_mutations=True,
    )
    return compiler(gm, example_inputs, **kwargs)


def register():
    from torch._dynamo import list_backends, register_backend

    if "tpu" not in list_backends(exclude_tags=()):
        register_backend(name="tpu")(backend)


__all__ = ["backend", "register"]
