"""torchvision's detection ops as plain PyTorch on the CPU, written from
their documented semantics (torchvision.ops: nms, roi_align, roi_pool) for
the tests of the tpu kernels where torchvision is not installed. Where it
is, the tests compare against torchvision's own CPU kernels instead.

roi_align and roi_pool are built from differentiable CPU ops, so autograd
gives the reference backward.

`define_ops()` defines torchvision's op schemas with these as their CPU
kernels (as torchvision itself would), so the tpu kernels registered under
those names can be called.
"""
import math

import torch

SCHEMAS = [
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
]


def nms(boxes, scores, thr):
    """IoU in the boxes' dtype, compared with the threshold in double."""
    order = torch.sort(scores, descending=True, stable=True).indices.tolist()
    x1, y1, x2, y2 = boxes.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    w = (torch.minimum(x2[:, None], x2[None]) - torch.maximum(x1[:, None], x1[None])).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2[None]) - torch.maximum(y1[:, None], y1[None])).clamp(min=0)
    inter = w * h
    over = (inter / (area[:, None] + area[None] - inter)).double() > thr
    suppressed = [False] * len(order)
    keep = []
    for pos, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        for j in order[pos + 1:]:
            suppressed[j] = suppressed[j] or bool(over[i, j])
    return torch.tensor(keep, dtype=torch.long)


def _bilinear_axis(v, size):
    """Per sample coordinate v (1-d float tensor): low/high cells, their
    weights and whether the point is inside [-1, size]."""
    inside = (v >= -1) & (v <= size)
    v = torch.where(v <= 0, torch.zeros_like(v), v)
    lo = torch.where(inside, v, torch.zeros_like(v)).floor().long()
    at_end = lo >= size - 1
    lo = torch.where(at_end, torch.full_like(lo, size - 1), lo)
    hi = torch.where(at_end, lo, lo + 1)
    v = torch.where(at_end, lo.to(v.dtype), v)
    wh = v - lo.to(v.dtype)
    return lo, hi, 1 - wh, wh, inside


def roi_align(x, rois, scale, ph, pw, sampling_ratio, aligned):
    """In x's dtype step by step, as the CPU kernel computes."""
    n, c, height, width = x.shape
    t = x.dtype
    out = []
    for roi in rois:
        bi = int(roi[0])
        x1, y1, x2, y2 = roi[1:].to(t) * torch.tensor(scale, dtype=t) - torch.tensor(0.5 if aligned else 0.0, dtype=t)
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = torch.clamp(rw, min=1), torch.clamp(rh, min=1)
        bh, bw = rh / ph, rw / pw
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(float(rh.float() / ph))
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(float(rw.float() / pw))
        count = max(gh * gw, 1)
        if gh <= 0 or gw <= 0:
            out.append(x.new_zeros(c, ph, pw))
            continue

        def points(start, size, p_n, g):
            p = torch.arange(p_n, dtype=t).repeat_interleave(g)
            i = torch.arange(g, dtype=torch.float32).repeat(p_n).add(0.5).to(t)
            return start + p * size + i * size / g

        ylo, yhi, wyl, wyh, yin = _bilinear_axis(points(y1, bh, ph, gh), height)
        xlo, xhi, wxl, wxh, xin = _bilinear_axis(points(x1, bw, pw, gw), width)
        img = x[bi]
        val = 0
        for yi, wy in ((ylo, wyl), (yhi, wyh)):
            for xi, wx in ((xlo, wxl), (xhi, wxh)):
                w = (wy[:, None] * wx[None, :]) * (yin[:, None] & xin[None, :])
                val = val + w * img[:, yi][:, :, xi]
        # [C, PH*gh, PW*gw] -> the mean of each bin's samples
        out.append(val.reshape(c, ph, gh, pw, gw).sum((2, 4)) / count)
    return torch.stack(out) if out else x.new_zeros(0, c, ph, pw)


def roi_pool(x, rois, scale, ph, pw):
    """Bins in x's dtype as the CPU kernel computes them; the first
    maximum of each bin in row-major order."""
    n, c, height, width = x.shape
    t = x.dtype
    out = x.new_zeros(len(rois), c, ph, pw)
    arg = torch.full((len(rois), c, ph, pw), -1, dtype=torch.int32)
    for r, roi in enumerate(rois):
        bi = int(roi[0])
        sx, sy, ex, ey = (round_away(float(v)) for v in roi[1:].to(t) * torch.tensor(scale, dtype=t))
        bh = torch.tensor(max(ey - sy + 1, 1), dtype=t) / ph
        bw = torch.tensor(max(ex - sx + 1, 1), dtype=t) / pw

        def cells(p, size, start, limit):
            lo = int(torch.floor(torch.tensor(p, dtype=t) * size)) + start
            hi = int(torch.ceil(torch.tensor(p + 1, dtype=t) * size)) + start
            return min(max(lo, 0), limit), min(max(hi, 0), limit)

        for p in range(ph):
            hs, he = cells(p, bh, sy, height)
            for q in range(pw):
                ws, we = cells(q, bw, sx, width)
                if he <= hs or we <= ws:
                    continue
                val, idx = x[bi, :, hs:he, ws:we].reshape(c, -1).max(1)
                out[r, :, p, q] = val
                arg[r, :, p, q] = ((hs + idx // (we - ws)) * width + ws + idx % (we - ws)).int()
    return out, arg


def round_away(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def define_ops():
    """Defines torchvision's schemas with the references as CPU kernels."""
    lib = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        lib.define(schema)
    impl = torch.library.Library("torchvision", "IMPL", "CPU")
    impl.impl("nms", nms)
    impl.impl("roi_align", lambda x, r, s, ph, pw, sr, al: roi_align(x, r, s, ph, pw, sr, al))
    impl.impl("roi_pool", lambda x, r, s, ph, pw: roi_pool(x, r, s, ph, pw))
    return lib, impl
