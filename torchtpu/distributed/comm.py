"""Collectives over several tpu devices of this process, one tensor each.

In the spirit of ``torch.cuda.comm`` and ``torch.cuda.nccl``: every function
takes a list with one tensor per device (``TORCHTPU_NUM_DEVICES=4`` gives
the CPU plugin ``tpu:0`` .. ``tpu:3``) and runs as ONE XLA collective program
over those devices (``stablehlo.all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``collective_permute``), compiled once per
signature and enqueued like any other op: later ops and host reads are
ordered after it. Tensors of one call must share dtype and shape and sit on
distinct devices; the list order is the member order (rank order).

    a, b = torch.ones(4, device="tpu:0"), torch.ones(4, device="tpu:1")
    comm.all_reduce([a, b])                 # in place: both hold 2.0
    g = comm.all_gather([a, b])             # each (8,), on its device

``torchtpu.debug.report()`` counts these calls under
"xla collective program".
"""
import torch

from .. import _C

__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter",
           "all_to_all", "permute", "REDUCE_OPS"]

# Engine codes (ttpu_coll.h).
_ALL_REDUCE, _BROADCAST, _ALL_GATHER, _REDUCE_SCATTER, _ALL_TO_ALL, _PERMUTE = range(6)
REDUCE_OPS = ("sum", "avg", "product", "min", "max", "premul_sum")


def _reduce_code(op, factor):
    """(engine code, premul factor) of a reduce op given as a name or as
    torch.distributed.ReduceOp."""
    name = op
    if not isinstance(op, str):
        name = str(getattr(op, "name", op)).rsplit(".", 1)[-1]
    name = name.lower()
    if name not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {REDUCE_OPS}")
    if name == "premul_sum":
        if factor is None:
            raise ValueError("premul_sum needs factor=")
        return REDUCE_OPS.index(name), float(factor)
    if factor is not None:
        raise ValueError(f"factor= only applies to premul_sum, not {name}")
    return REDUCE_OPS.index(name), 1.0


def _check_members(tensors, what):
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what}: expected a list of tensors, one per device")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what}: the list of tensors is empty")
    devices = set()
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: element {i} is not a tensor")
        if t.device.type != "tpu":
            raise ValueError(f"{what}: element {i} is on {t.device}, not a tpu device")
        if t.device.index in devices:
            raise ValueError(f"{what}: two tensors on {t.device}; each tensor must "
                             f"be on its own device")
        devices.add(t.device.index)
        if t.dtype != tensors[0].dtype or t.shape != tensors[0].shape:
            raise ValueError(f"{what}: every tensor must have the dtype and shape of "
                             f"the first ({tensors[0].dtype}, {tuple(tensors[0].shape)}); "
                             f"element {i} has {t.dtype}, {tuple(t.shape)}")
    return tensors


def _outputs(outputs, inputs, shape, what):
    """Caller's outputs (checked), or new ones of `shape` on each input's device."""
    if outputs is None:
        return [torch.empty(shape, dtype=t.dtype, device=t.device) for t in inputs]
    outputs = list(outputs)
    if len(outputs) != len(inputs):
        raise ValueError(f"{what}: {len(outputs)} outputs for {len(inputs)} inputs")
    for i, (o, t) in enumerate(zip(outputs, inputs)):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"{what}: output {i} is not a tensor")
        if o.device != t.device or o.dtype != t.dtype or tuple(o.shape) != tuple(shape):
            raise ValueError(f"{what}: output {i} must be {t.dtype}{list(shape)} on "
                             f"{t.device}, got {o.dtype}{list(o.shape)} on {o.device}")
    return outputs


def _chunked_shape(t, n, what):
    if t.dim() == 0 or t.shape[0] % n:
        raise ValueError(f"{what}: the first dimension ({t.shape[0] if t.dim() else 'none'}) "
                         f"must divide evenly by the number of devices ({n})")
    return (t.shape[0] // n,) + tuple(t.shape[1:])


def _run(kind, inputs, outputs, name, op=0, factor=1.0, root=0, peers=()):
    _C._coll_run(kind, inputs, outputs, op, factor, root, list(peers), name)
    return outputs


def all_reduce(tensors, op="sum", outputs=None, factor=None):
    """Reduces the tensors elementwise across devices: op "sum", "avg"
    (integers divide truncating), "product", "min", "max" or "premul_sum"
    (each input times `factor`, then summed). In place unless `outputs`."""
    tensors = _check_members(tensors, "all_reduce")
    code, f = _reduce_code(op, factor)
    outs = tensors if outputs is None else _outputs(outputs, tensors, tensors[0].shape,
                                                    "all_reduce")
    return _run(_ALL_REDUCE, tensors, outs, "all_reduce", code, f)


def broadcast(tensors, root=0):
    """Copies tensors[root] into every other tensor of the list, in place."""
    tensors = _check_members(tensors, "broadcast")
    if not 0 <= root < len(tensors):
        raise ValueError(f"broadcast: root {root} is not an index of the list "
                         f"(0..{len(tensors) - 1})")
    return _run(_BROADCAST, tensors, tensors, "broadcast", root=root)


def all_gather(inputs, outputs=None):
    """Every output is the inputs concatenated along dim 0 (0-d inputs
    stack into shape (n,))."""
    inputs = _check_members(inputs, "all_gather")
    t, n = inputs[0], len(inputs)
    shape = (n * t.shape[0],) + tuple(t.shape[1:]) if t.dim() else (n,)
    return _run(_ALL_GATHER, inputs, _outputs(outputs, inputs, shape, "all_gather"),
                "all_gather")


def reduce_scatter(inputs, op="sum", outputs=None, factor=None):
    """Reduces the inputs as all_reduce does and leaves chunk i (along dim 0)
    of the result on device i of the list."""
    inputs = _check_members(inputs, "reduce_scatter")
    code, f = _reduce_code(op, factor)
    shape = _chunked_shape(inputs[0], len(inputs), "reduce_scatter")
    return _run(_REDUCE_SCATTER, inputs,
                _outputs(outputs, inputs, shape, "reduce_scatter"), "reduce_scatter",
                code, f)


def all_to_all(inputs, outputs=None):
    """Chunk j (along dim 0) of input i becomes chunk i of output j."""
    inputs = _check_members(inputs, "all_to_all")
    _chunked_shape(inputs[0], len(inputs), "all_to_all")
    return _run(_ALL_TO_ALL, inputs,
                _outputs(outputs, inputs, inputs[0].shape, "all_to_all"), "all_to_all")


def permute(inputs, peers, outputs=None):
    """Send/recv pairs in one program: input i goes to output peers[i]
    (None or -1: it sends nothing); an output that receives nothing is
    zeros. Targets must be distinct."""
    inputs = _check_members(inputs, "permute")
    peers = [-1 if p is None else int(p) for p in peers]
    if len(peers) != len(inputs):
        raise ValueError(f"permute: {len(peers)} peers for {len(inputs)} inputs")
    return _run(_PERMUTE, inputs, _outputs(outputs, inputs, inputs[0].shape, "permute"),
                "collective_permute", peers=peers)
