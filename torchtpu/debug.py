"""Diagnostics: what the engine compiled, ran and moved, and why.

    torchtpu.debug.metrics()    -> dict of counters
    torchtpu.debug.compiles()   -> the compile log: what, why, how long
    torchtpu.debug.report()     -> printable summary (also returned as str)

Every compile records its reason: "first compile", or which part of the
signature changed ("input 0 size of dim 1 changed (8 -> 9)"). An op that
keeps recompiling raises a UserWarning at the call site that names the
changing dimension (TORCHTPU_RECOMPILE_WARN=N sets after how many, 0 turns
it off). TORCHTPU_DUMP_DIR=<dir> writes every compiled program's StableHLO.
"""
from . import _C


def metrics():
    """Engine counters for all tpu devices, plus CPU fallbacks per op.

    compiles / compile_seconds / recompiles: programs compiled (recompiles:
    of an op already compiled with another signature); cache_hits: in-memory
    hits; disk_hits / disk_load_seconds / disk_writes: the persistent cache;
    executions; h2d_bytes / d2h_bytes; bytes_in_use / peak_bytes_in_use;
    fused_windows / fused_ops / fused_max_ops / fused_window_ends: fused mode
    windows, the ops they held, and why each ended; graph_replays:
    torch.compile graphs run again from their captured program without
    recording their ops; programs_loaded / program_cache_size: compiled
    programs loaded now and the most kept (0: no bound; see
    set_program_cache_size); programs_shared: signatures that took the
    executable of a loaded program with the same text instead of compiling
    it (an out= form after its op); programs_evicted / programs_reloaded: unloaded
    as least recently used, and needed again afterwards; programs_retired:
    evicted ones still waiting for their last execution; cpu_fallbacks per
    op; cpu_replays: calls asked of the CPU's own kernel on stand-ins, for
    its error text where a meta kernel refused ("error_text") and for its
    verdict on writes through shared memory ("alias_checks", of them
    "alias_checks_shrunk" on small stand-ins of a large call), and those
    not asked because a replay would cost too much host memory
    ("skipped"); cpu_heap_kept: on the XLA CPU plugin, whether freed
    device memory stays in the process heap for reuse (TORCHTPU_CPU_HEAP).
    """
    m = dict(_C._compile_stats())
    m["cpu_fallbacks"] = dict(_C._fallback_counts())
    m["cpu_replays"] = dict(_C._cpu_replay_counts())
    m["last_compile_reason"] = _C._last_compile_reason()
    m["eager_mode"] = _C._eager_mode()
    m["cache_dir"] = _C._cache_dir()
    m["cpu_heap_kept"] = _C._keeps_host_heap()
    return m


def set_program_cache_size(n):
    """Keep at most ``n`` compiled programs loaded (0: no bound).

    Every loaded program holds host memory and, on the CPU plugin, a few
    memory mappings of the process (which the kernel caps, at 65530 by
    default). Past ``n``, the least recently used programs are unloaded and
    come back from the disk cache, or are compiled again, when next needed;
    a program a compiled graph holds, or one still running, is never
    dropped under its user. The default is ``TORCHTPU_PROGRAM_CACHE_SIZE``,
    else 1024. Takes effect at once (evicting down to ``n``)."""
    _C._set_program_cache_size(int(n))


def program_cache_size():
    """The most compiled programs kept loaded (0: no bound)."""
    return _C._program_cache_size()


def programs():
    """The compiled programs loaded now, most recently used first: dicts
    with what (op name, "fused window (N ops)", "graph NAME (N ops)"),
    hits, and the plugin's compiled memory figures in bytes: code_bytes
    (held while the program is loaded), temp_bytes (needed while it runs),
    argument_bytes and output_bytes; -1 where the plugin reports none.
    Signatures that share one executable (metrics' programs_shared) are
    listed each, with the executable's figures."""
    return list(_C._programs())


def programs_by_op():
    """The loaded programs grouped by what they run: {what: {"programs",
    "code_bytes", "temp_bytes"}}, most programs first. An op with many
    programs is one that compiles per shape (see compiles() for why)."""
    groups = {}
    for p in programs():
        what = p["what"]
        if what.startswith(("fused window", "graph ")):
            what = what.split(" (")[0]
        g = groups.setdefault(what, {"programs": 0, "code_bytes": 0, "temp_bytes": 0})
        g["programs"] += 1
        g["code_bytes"] += max(p["code_bytes"], 0)
        g["temp_bytes"] = max(g["temp_bytes"], p["temp_bytes"])
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["programs"]))


def compiles(clear=False):
    """The most recent compiles (up to 4096), oldest first: dicts with
    what (op or fused window), reason, seconds, from_disk, ops."""
    log = list(_C._compile_log())
    import sys
    dynamo = sys.modules.get("torchtpu.dynamo")
    if dynamo is not None:  # compiled graphs: say why Dynamo compiled them
        for c in log:
            parts = c["what"].split()
            why = dynamo.graph_reasons.get(parts[1]) if parts[:1] == ["graph"] and len(parts) > 1 else None
            if why:
                c["reason"] = f"{c['what']}: {why}"
    if clear:
        _C._clear_compile_log()
    return log


def report(file=None):
    m = metrics()
    p = _C._platform()
    fb = m["cpu_fallbacks"]
    ends = ", ".join(f"{k} {v}" for k, v in m["fused_window_ends"].items() if v)
    windows = m["fused_windows"]
    lines = [
        f"torchtpu on {p.get('name', '?')} ({p.get('plugin_path', '?')}), eager mode {m['eager_mode']}",
        f"  compiles            {m['compiles']} ({m['compile_seconds']:.2f} s), recompiles {m['recompiles']}; "
        f"{p.get('compile_threads', 1)} compile thread(s), options {p.get('compile_options', '?')}",
        f"  cache hits          {m['cache_hits']} in memory",
        f"  disk cache          {m['disk_hits']} loaded ({m['disk_load_seconds']:.2f} s), "
        f"{m['disk_writes']} written, {m['cache_dir'] or 'off'}",
        f"  executions          {m['executions']}",
        f"  programs loaded     {m['programs_loaded']} (at most "
        f"{m['program_cache_size'] or 'unbounded'}), {m['programs_evicted']} evicted, "
        f"{m['programs_reloaded']} reloaded, {m['programs_shared']} shared",
        f"  fused windows       {windows}"
        + (f", {m['fused_ops'] / windows:.1f} ops each (max {m['fused_max_ops']}); ended by {ends}" if windows else ""),
        f"  graph replays       {m['graph_replays']}",
        f"  host->device bytes  {m['h2d_bytes']}",
        f"  device->host bytes  {m['d2h_bytes']}",
        f"  bytes in use        {m['bytes_in_use']} (peak {m['peak_bytes_in_use']})",
        f"  last compile        {m['last_compile_reason'] or '-'}",
    ]
    lines.append(f"  cpu fallbacks       {sum(fb.values())}"
                 + (": " + ", ".join(f"{k} x{v}" for k, v in sorted(fb.items())) if fb else ""))
    by_op = programs_by_op()
    if by_op:
        code = sum(g["code_bytes"] for g in by_op.values())
        top = ", ".join(f"{w} x{g['programs']}" for w, g in list(by_op.items())[:5])
        lines.append(f"  programs by op      {top}; code {code / 2**20:.1f} MiB in all")
    recent = [c for c in compiles() if not c["reason"].endswith("first compile")][-5:]
    if recent:
        lines.append("  recent recompiles:")
        lines += [f"    {c['seconds'] * 1e3:7.1f} ms  {c['reason']}" for c in recent]
    from . import distributed  # collectives: which path ran, how often
    lines += distributed.report_lines()
    text = "\n".join(lines)
    print(text, file=file)
    return text


__all__ = ["metrics", "compiles", "programs", "programs_by_op", "report",
           "set_program_cache_size",
           "program_cache_size"]
