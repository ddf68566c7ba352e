"""generate() over several prompt lengths and token counts, for filling a
compile cache and for checking what a later run finds in it.

    TORCHTPU_BUCKETS=16,32,64,128 python benchmarks/shapes/generate_lengths.py \
        [--model llama|llama-static|gpt2] [--prompts 8] [--tokens 56] [--no-cpu-check]
        [--max-cache-len N]

Each prompt length in --prompts (random token ids, seeded by the length)
is decoded greedily for --tokens new tokens with the model of
changing_shapes.py (random weights from a config). Prints, per call, the
programs the engine compiled and loaded from the disk cache, and whether
the tokens equal the CPU model's. With explicit bucket sizes, prompts are
padded to a bucket from their first upload and the default cache's
key/value tensors grow inside buckets, so one run that reaches the largest
length leaves nothing to compile for other prompt lengths and shorter
generations (docs/guides/shapes_and_recompiles.md). With --max-cache-len
each call gets a new transformers.StaticCache of that length, as a server
that keeps its cache length fixed does (llama-static alone sizes the cache
to prompt + tokens, so every shape changes with the prompt). To fill a TPU
cache
on a machine without a TPU:

    TORCHTPU_BUCKETS=16,32,64,128 python -m torchtpu.aot --topology v5e:2x2 \
        --fill-cache DIR benchmarks/shapes/generate_lengths.py --tokens 112 --no-cpu-check
"""
import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama", choices=("llama", "llama-static", "gpt2"))
    ap.add_argument("--prompts", default="8")
    ap.add_argument("--tokens", type=int, default=56)
    ap.add_argument("--no-cpu-check", action="store_true")
    ap.add_argument("--max-cache-len", type=int, default=0)
    a = ap.parse_args(argv)

    import torch
    import torchtpu
    import transformers
    from changing_shapes import VOCAB, build

    model = build("gpt2" if a.model == "gpt2" else "llama").eval()
    tmodel = copy.deepcopy(model).to("tpu")
    kw = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False, pad_token_id=0)
    if a.model == "llama-static":
        kw["cache_implementation"] = "static"
    ok = True
    for n in (int(x) for x in a.prompts.split(",")):
        ids = torch.randint(3, VOCAB, (1, n), generator=torch.Generator().manual_seed(n))
        before = torchtpu.debug.metrics()

        def cache(m):
            if not a.max_cache_len:
                return {}
            return {"cache": transformers.StaticCache(config=m.config, max_cache_len=a.max_cache_len)}
        with torch.no_grad():
            got = tmodel.generate(ids.to("tpu"), **kw, **cache(tmodel)).cpu()
        torch.tpu.synchronize()
        after = torchtpu.debug.metrics()
        check = "not checked"
        if not a.no_cpu_check:
            with torch.no_grad():
                same = torch.equal(model.generate(ids, **kw, **cache(model)), got)
            ok &= same
            check = "tokens equal the CPU's" if same else "tokens DIFFER from the CPU's"
        print(f"prompt {n}, {a.tokens} new tokens: compiled {after['compiles'] - before['compiles']}, "
              f"from disk {after['disk_hits'] - before['disk_hits']}; {check}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
