"""torchtpu: the TPU as a native PyTorch device.

``import torchtpu`` (or just ``import torch``: torchtpu registers itself as a
``torch.backends`` autoload entry point) makes the device ``tpu`` available:
``torch.ones(3, device="tpu")``, ``model.to("tpu")``, ``torch.tpu.*``.
"""
import os
import sys


def _autoload():
    """``torch.backends`` entry point: importing this module is enough.

    Defined before ``import torch``: when the user imports torchtpu first,
    torch's autoload finds this partially initialized module and calls it.
    """


import torch  # noqa: E402

# Must precede everything that names the device: PrivateUse1 becomes "tpu".
if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")


def _load_extension():
    """Imports torchtpu._C, or says which torch it needs.

    The extension is compiled against one torch release (its C++ ABI is
    that release's): with another minor release its symbols do not resolve,
    and the loader's "undefined symbol" names neither version."""
    try:
        from ._build_info import TORCH_RELEASE, TORCH_VERSION
    except ImportError:  # a source tree whose extension was never built
        TORCH_RELEASE = TORCH_VERSION = None
    installed = torch.__version__
    if TORCH_RELEASE is not None:
        built_minor = TORCH_RELEASE.split(".")[:2]
        if installed.split("+")[0].split(".")[:2] != built_minor:
            raise ImportError(
                f"torchtpu was built against torch {TORCH_VERSION}, but torch "
                f"{installed} is installed: install torch=={'.'.join(built_minor)}.*, "
                f"or rebuild torchtpu against torch {installed} "
                "(pip install --no-build-isolation torchtpu from source)")
    try:
        from . import _C
    except ImportError as e:
        if TORCH_VERSION is None or "undefined symbol" not in str(e):
            raise
        raise ImportError(
            f"torchtpu's extension does not load with torch {installed} "
            f"(it was built against torch {TORCH_VERSION}): rebuild torchtpu "
            f"against the installed torch. ({e})") from e
    return _C


_C = _load_extension()  # registers allocator, guard, hooks, kernels

# The engine looks for an installed plugin package (xla_plugins/..., libtpu/)
# in these directories when TORCHTPU_PLUGIN is not set.
_C._set_plugin_search_dirs([p for p in sys.path if p and os.path.isdir(p)])

from . import device_module  # noqa: E402

torch._register_device_module("tpu", device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_storage=True
)

from . import _printing  # noqa: E402
from . import debug  # noqa: E402
from .modes import flush, get_eager_mode, set_eager_mode  # noqa: E402
from . import distributed  # noqa: E402  (the "tpu" c10d backend)
from .kernels import jax_op  # noqa: E402  (JAX functions as ops; JAX imported on first use)
from .scan import scan_layers  # noqa: E402  (PyTorch's scan as one loop on tpu)

distributed.register()

_printing.install()

# One boxed kernel per op of the engine's lowering table.
registered_ops, skipped_ops = _C._register_kernels()


def _settle_autograd_threads():
    """At exit, make each tpu autograd thread drop the last backward's task.

    PyTorch runs a device's backward on its own thread; that thread releases
    its reference to the finished task just after the caller's backward()
    returns. The task holds a Python object (the context backward() stashes
    in thread-local state); if the interpreter is already finalizing when
    that reference goes, the thread cannot take the GIL, CPython ends it
    with pthread_exit, and the unwind through PyTorch's noexcept frames
    aborts the process ("terminate called without an active exception").
    A last, trivial backward on each device, queued behind the real ones
    while the interpreter is still whole, makes each thread release the old
    task with the GIL available. The trivial task holds no Python object:
    it is started below the Python layer (nothing stashed) and its gradient
    goes into a leaf, so its result list is empty."""
    try:
        if not _C._is_initialized():
            return
        engine = torch.autograd.Variable._execution_engine
        for i in range(_C._platform()["device_count"]):
            # Empty tensors and a view: the leaf takes the gradient as is,
            # so nothing is computed or compiled at exit.
            x = torch.empty((), device=f"tpu:{i}", requires_grad=True)
            engine.run_backward((x.view(()),), (torch.empty((), device=f"tpu:{i}"),),
                                False, False, (), True, True)
    except Exception:  # never turn a clean exit into a failing one
        pass


def _finish_device_work():
    """At exit, wait for the work still queued (strict mode's programs
    compiling on the engine's threads, fused windows) before the C exit
    handlers run: the execution plugin's compiler has static objects that
    those handlers destroy (the XLA CPU plugin's LLVM JIT listener), and a
    compile still running on another thread would then crash the process
    (a segfault or "pure virtual method called") after the script ended
    well. Errors are not raised here: the script is over."""
    try:
        if _C._is_initialized():
            for i in range(_C._platform()["device_count"]):
                torch.tpu.synchronize(i)
    except Exception:  # never turn a clean exit into a failing one
        pass


def _at_exit():
    _settle_autograd_threads()
    _finish_device_work()


import atexit  # noqa: E402

atexit.register(_at_exit)


def platform():
    """Which PJRT plugin is behind ``tpu``, e.g. "cpu (PJRT 0.81, 1 device)".

    Starts the runtime (raises RuntimeError if no plugin can be loaded).
    """
    p = _C._platform()
    major, minor = p["api_version"]
    n = p["device_count"]
    return f"{p['name']} (PJRT {major}.{minor}, {n} device{'s' if n != 1 else ''}, {p['plugin_path']})"


def platform_info():
    """The plugin behind ``tpu`` as a dict: name, version, plugin_path,
    api_version, device_count, compile_threads (strict mode's compile
    threads) and compile_options (the identity of the compile options, part
    of the disk cache's namespace)."""
    return dict(_C._platform())


__all__ = ["platform", "platform_info", "debug", "device_module", "jax_op", "scan_layers",
           "set_eager_mode", "get_eager_mode", "flush"]
