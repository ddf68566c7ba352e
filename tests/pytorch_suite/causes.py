"""Failure causes for the PyTorch suite report.

`classify(rec)` puts one failed test record (from plugin.py) in a cause:
a wrong result, a wrong or missing exception, an op without a tpu kernel,
a time-out, a crash, or the test's own assumption about CUDA or the CPU.
ASSUMPTIONS lists the tests whose failure is the test's assumption rather
than torchtpu's, each with the reason found when it was examined.
"""
import re

# (test-name regex, reason): failures that come from what the test assumes
# of the device under test, not from a tpu result.
ASSUMPTIONS = [
    (r"_cuda_|cuda_only|test_.*cudnn|test_.*_cuda$",
     "written for CUDA: the test calls CUDA APIs or checks CUDA-only behaviour"),
    (r"test_.*pin_memory",
     "pinned host memory is a CUDA/accelerator-runtime feature torchtpu does not claim"),
]

# (test-name regex, regex over the failure's message and innermost frames,
# reason): a failure at a known place in a test that checks what only the
# CPU gives. Each was examined and the reason is what was found.
CPU_BEHAVIOUR = [
    (r"test_stable_sort_against_numpy", r"found at least two devices, tpu:0 and cpu",
     "the test index_fills a tpu tensor with a CPU index tensor; CUDA refuses that "
     "the same way (TensorIterator takes one device) and the test returns before it on CUDA"),
    (r"test_float_to_int_conversion_finite_tpu_int(32|64)", r"at index \(8,\)",
     "float32's largest value into int64 is undefined in C++: x86 gives INT64_MIN, CUDA and "
     "XLA saturate to INT64_MAX; the test leaves that value out on CUDA"),
    (r"test_unique_dim_tpu", r"test_sort_and_select.py:679",
     "rows with NaN: the CPU's order comes from std::sort with a comparator that is not an "
     "ordering (NaN is neither less nor greater), so it is libstdc++'s insertion-sort detail; "
     "tpu sorts NaN rows last, as torch.unique and torch.sort do"),
    (r"test_linalg_lstsq_input_checks_tpu", r"`driver` other than `gels` is not supported on CUDA",
     "for every device but the CPU the test expects CUDA's refusal of the drivers other than "
     "gels; tpu computes every driver, as the CPU does (the test's other checks pass)"),
    (r"test_addbmm_tpu_bfloat16", r"RuntimeError not raised",
     "for bfloat16 on every device but the CPU the test expects the refusal of CUDA devices "
     "older than sm_53 (it asks SM53OrLater, false without CUDA); tpu computes it, as the CPU "
     "does"),
    (r"test_eig(vals)?_numpy_tpu_float64", r"Tensor-likes are not close",
     "for batched inputs the test reverses its sort indices along the batch axis ([::-1], not "
     "[..., ::-1]), so it compares each matrix's eigenvalues in the order another matrix's "
     "sort gives: only LAPACK's own order passes. tpu's eigenvalues are the same set (sorted "
     "per matrix they equal NumPy's, the test's unbatched cases pass), in the order its "
     "shifted QR deflates them"),
    (r"test_linalg_lu_solve_tpu_float32", r"Greatest absolute difference: 0\.0[123]\d* at index \(1,",
     "the test draws its matrices with the device's generator, and at its seed the 2x128x128 "
     "float32 pair is ill-conditioned: given the same matrices the CPU's residual |A X - B| is "
     "0.022-0.023 (tpu's 0.014-0.030), over the test's 0.01 for both; on 30 other seeds the two "
     "devices' worst residuals are 0.027 (CPU) and 0.027 (tpu), with the same pivots"),
    (r"test_conv_backend_", r"_ConvBackend\.Overrideable",
     "the test checks which of ATen's own convolution kernels the dispatcher picks for the "
     "device (CPU's slow dilated, CUDA's cuDNN...); every backend that is not CPU or CUDA gets "
     "'Overrideable', its own convolution op, by design"),
    (r"test_checkpointing_without_reentrant_dataparallel|test_dataparallel_saved_tensors_hooks",
     r"has no attribute '_scatter'",
     "nn.DataParallel replicates the module onto the available accelerator's devices (tpu's) "
     "through torch._C._scatter, which only CUDA builds of torch define; without an "
     "accelerator it calls the module as it is, which is what the test expects"),
    (r"test_EmbeddingBag_per_sample_weights_and_new_offsets_tpu_.*(bfloat16|float16)",
     r"Greatest absolute difference: [0-9.]+ at index \(\d+, \d+\)",
     "the per-sample weights are random draws on the device under test, and in bf16/half its "
     "reference (rounded after each product) and embedding_bag (rounded once) differ by more "
     "than the test's tolerance for some draws: on the CPU 37 of 600 seeded draws fail the same "
     "comparison; given the same weights, tpu's results equal the CPU's bit for bit"),
]

# Message patterns that mean the test itself assumed CUDA or CPU.
_ASSUMPTION_MSGS = [
    (r"Torch not compiled with CUDA|CUDA error|cuda runtime|no CUDA GPUs|torch\.cuda",
     "the test uses CUDA"),
    (r"can't convert .*tpu.* to numpy|Use Tensor\.cpu\(\) to copy the tensor to host",
     "the test converts a device tensor to NumPy without .cpu()"),
    (r"doesn't support device type 'tpu'|device type tpu is not supported|"
     r"Unsupported device type for .* tpu",
     "the test's helper supports a fixed list of device types"),
]


def normal_id(test_id):
    """A test id without its device class suffix: the first file a process
    collects names its classes TestXPRIVATEUSE1, later ones TestXTPU."""
    return re.sub(r"(PRIVATEUSE1|TPU)::", "::", test_id)


_NOT_IMPL = re.compile(r"(aten::[\w.]+|torchvision::\w+|[\w.]+) (?:is not|isn't) "
                       r"(?:yet )?(?:implemented|supported)")


def classify(test_id, rec):
    """(cause, detail) for a record whose outcome is not passed/skipped."""
    out = rec.get("outcome")
    if out in ("timeout", "hang"):
        return "time-out", ""
    if out == "crash":
        return "crash", rec.get("msg", "")
    name = test_id.split("::")[-1]
    for pat, why in ASSUMPTIONS:
        if re.search(pat, name):
            return "test assumption", why
    etype = rec.get("type") or ""
    msg = rec.get("msg") or ""
    where = rec.get("where") or ""
    for pat, at, why in CPU_BEHAVIOUR:
        if re.search(pat, name) and re.search(at, msg + "\n" + where):
            return "test assumption", why
    for pat, why in _ASSUMPTION_MSGS:
        if re.search(pat, msg):
            return "test assumption", why
    if etype == "NotImplementedError":
        q = re.search(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend", msg)
        if q:
            kind = "quantized" if "Quantized" in q.group(2) else \
                "sparse" if "Sparse" in q.group(2) else "dispatch"
            return f"not implemented: {kind}", f"{q.group(1)} ({q.group(2)})"
        m = _NOT_IMPL.search(msg)
        if "sparse" in msg.lower() or "Sparse" in msg:
            return "not implemented: sparse", (m.group(1) if m else msg.split("\n")[0][:120])
        if "complex" in msg.lower():
            return "not implemented: complex", (m.group(1) if m else msg.split("\n")[0][:120])
        return "not implemented", (m.group(1) if m else msg.split("\n")[0][:120])
    if etype == "AssertionError" or etype.endswith("AssertionError"):
        if re.search(r"not raised|does not match|didn't match|Regex|"
                     r"Expected .* to be raised|exception", msg) \
                or "assertRaises" in where:
            return "wrong exception", msg.split("\n")[0][:160]
        if re.search(r"not close|not equal|mismatch|Tensor-likes|Scalars|"
                     r"Booleans|The values for attribute|!=|differ", msg):
            return "wrong result", msg.split("\n")[0][:160]
        return "assertion", msg.split("\n")[0][:160]
    return f"error: {etype}", msg.split("\n")[0][:160]
