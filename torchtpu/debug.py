"""Diagnostics: what the engine compiled, ran and moved, and why.

    torchtpu.debug.metrics()   -> dict of counters
    torchtpu.debug.report()    -> printable summary (also returned as str)
"""
import torch

from . import _C


def metrics():
    """Engine counters for all tpu devices, plus CPU fallbacks per op."""
    m = dict(_C._compile_stats())
    m["cpu_fallbacks"] = dict(_C._fallback_counts())
    m["last_compile_reason"] = _C._last_compile_reason()
    return m


def report(file=None):
    m = metrics()
    p = _C._platform()
    lines = [
        f"torchtpu on {p.get('name', '?')} ({p.get('plugin_path', '?')})",
        f"  compiles            {m['compiles']} ({m['compile_seconds']:.2f} s)",
        f"  cache hits          {m['cache_hits']}",
        f"  executions          {m['executions']}",
        f"  host->device bytes  {m['h2d_bytes']}",
        f"  device->host bytes  {m['d2h_bytes']}",
        f"  bytes in use        {m['bytes_in_use']} (peak {m['peak_bytes_in_use']})",
        f"  last compile        {m['last_compile_reason'] or '-'}",
    ]
    fb = m["cpu_fallbacks"]
    lines.append(f"  cpu fallbacks       {sum(fb.values())}" + (": " + ", ".join(f"{k} x{v}" for k, v in sorted(fb.items())) if fb else ""))
    from . import distributed  # collectives: which path ran, how often
    lines += distributed.report_lines()
    text = "\n".join(lines)
    print(text, file=file)
    return text


__all__ = ["metrics", "report"]
