"""First and second call of Hugging Face `generate()` on tpu, each setting in
a fresh process with an empty disk cache, against the CPU.

    .venv/bin/python benchmarks/generate_cold.py [--tokens 32] [--prompt 16]
        [--settings cpu,strict:dynamic,strict:static,fused:static]

The model is a LLaMA-style decoder built from a config (hidden 256, 4
layers, 4 heads, vocab 512; random weights), greedy decoding of --tokens
tokens after a --prompt token prompt. A setting is a mode and a cache:
"dynamic" is transformers' default cache (its key/value tensors grow by one
position per token, so the attention ops compile a program per length);
"static" preallocates them (transformers then compiles the decoding
forward with torch.compile, which on tpu builds one graph). Reported per
setting: seconds of the first and the second call, the engine's compiles
and compile seconds in the process, and the ops that compiled most often
(the reason a length-dependent op compiles again is its input's storage
growing by a token). The tokens are checked against the CPU's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter


def child(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dev, _, cache = a.setting.partition(":")
    mode = None if dev == "cpu" else dev
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=688,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=a.prompt + a.tokens + 16)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 512, (1, a.prompt))
    kw = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    times, tokens = [], None
    if mode:
        import torchtpu
        import torchtpu.debug

        model, ids = model.to("tpu"), ids.to("tpu")
        torch.tpu.synchronize()
        ctx = torchtpu.set_eager_mode(mode)
    else:
        import contextlib

        ctx = contextlib.nullcontext()
    with torch.no_grad(), ctx:
        for _ in range(2):
            t0 = time.perf_counter()
            out = model.generate(ids, **kw).cpu()
            times.append(time.perf_counter() - t0)
            tokens = out[0].tolist()
    r = {"setting": a.setting, "first_s": times[0], "second_s": times[1], "tokens": tokens}
    if mode:
        m = torchtpu.debug.metrics()
        log = torchtpu.debug.compiles()
        by_op = Counter((e.get("reason") or "").split(":")[0] for e in log)
        r.update(compiles=m["compiles"], compile_s=m["compile_seconds"],
                 top=by_op.most_common(5))
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--settings", default="cpu,strict:dynamic,strict:static,fused:static")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        a.setting = a.child
        print(json.dumps(child(a)))
        return
    print(f"generate(): {a.prompt}-token prompt, {a.tokens} new tokens; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    ref = None
    for setting in a.settings.split(","):
        with tempfile.TemporaryDirectory() as cache_dir:
            env = dict(os.environ, TORCHTPU_CACHE_DIR=cache_dir,
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
                       TORCHTPU_RECOMPILE_WARN="0", PYTHONWARNINGS="ignore")
            p = subprocess.run([sys.executable, __file__, "--child", setting,
                                "--tokens", str(a.tokens), "--prompt", str(a.prompt)],
                               env=env, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            print(f"  {setting:16s} failed: {p.stderr.strip()[-800:]}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if ref is None and setting == "cpu":
            ref = r["tokens"]
        same = "" if ref is None else ("  tokens = cpu" if r["tokens"] == ref else "  TOKENS DIFFER from cpu")
        line = f"  {setting:16s} 1st call {r['first_s']:6.2f} s, 2nd {r['second_s']:6.2f} s"
        if "compiles" in r:
            top = ", ".join(f"{k} {v}" for k, v in r["top"])
            line += f", {r['compiles']} compiles ({r['compile_s']:.1f} s; most: {top})"
        print(line + same, flush=True)
    print("load average after " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
