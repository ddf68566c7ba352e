"""How many programs torchtpu compiles when shapes change: Hugging Face
generate() for a few and for more new tokens, and training over varying
sequence lengths against one length, in strict and fused eager mode.

    .venv/bin/python benchmarks/shapes/changing_shapes.py [--markdown]
        [--workloads llama,llama-static,gpt2,...] [--modes strict,fused]
        [--tokens 8,40] [--timeout 900]

Workloads (random weights, models built from a config on the CPU with
torch.manual_seed(0), then copied to tpu):

- llama: LlamaForCausalLM (hidden 128, 2 layers, 4 heads, vocab 512,
  intermediate 256), eval(), greedy generate() of N new tokens
  (min_new_tokens = max_new_tokens, so EOS cannot stop it early) after an
  8-token prompt, transformers' default cache; one process per N in
  --tokens.
- llama-static: the same with cache_implementation="static".
- gpt2: GPT2LMHeadModel (n_embd 128, 2 layers, 4 heads, vocab 512), default
  cache, as llama.
- llama-batch: the llama model on a batch of two prompts, the second
  left-padded by 3 (its attention mask holds zeros, so each step builds a
  4-d mask).
- llama-static-batch: llama-batch with cache_implementation="static" (the
  mask is padded to the cache's length each step).
- llama-beam: the llama model, beam search with 2 beams.
- mistral, qwen2, gemma, phi3, neox, opt (not run by default): those
  decoder families from a config of the llama model's sizes (hidden 128, 2
  layers, 4 heads, vocab 512), greedy, as llama.
- train: the llama config trained with AdamW (lr 1e-3), batch 2, labels =
  input_ids, 12 steps; one process at length 128 every step ("fixed"), one
  with lengths 64, 70, ..., 124, 128 ("varied").

Every measurement runs in a fresh process (this script with --one) with
TORCHTPU_DISK_CACHE=0 (nothing comes from an earlier run's programs) and
the mode set by TORCHTPU_EAGER_MODE. Reported per measurement: programs
compiled by the measured call (torchtpu.debug.metrics()["compiles"] after
it, synchronized, minus before it), its wall time, the programs loaded
after it (torchtpu.debug.programs()), and a check against the CPU: the
generated tokens equal the CPU model's (MATCH/DIFF), or every step's loss
within 1e-4 relative of the same steps on the CPU. A process that runs past
--timeout seconds is killed and reported as TIMEOUT.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

PROMPT = 8
VOCAB = 512
STEPS = 12
FIXED_LEN = 128
VARIED_LENS = [64, 70, 76, 82, 88, 94, 100, 106, 112, 118, 124, 128]
BATCH = 2
LOSS_RTOL = 1e-4

WORKLOADS = ("llama", "llama-static", "gpt2", "llama-batch", "llama-static-batch", "llama-beam",
             "train", "train-sized", "train-gpt2")
FAMILIES = ("mistral", "qwen2", "gemma", "phi3", "neox", "opt")
# Settings a workload runs under (lengths declared varying: explicit sizes).
SETTINGS = {"train-sized": {"TORCHTPU_BUCKETS": "128,256,512"}}
LABELS = {
    "llama": "HF LlamaForCausalLM from a config (hidden 128, 2 layers, 4 heads, vocab 512, "
             "intermediate 256), greedy generate(), default cache: programs compiled for {a} "
             "new tokens -> for {b}",
    "llama-static": 'the same with cache_implementation="static"',
    "gpt2": "GPT2LMHeadModel from a config (n_embd 128, 2 layers, 4 heads, vocab 512), "
            "default cache, same {a} -> {b}",
    "llama-batch": "the LLaMA model on 2 prompts, one left-padded (a mask with zeros), same {a} -> {b}",
    "llama-static-batch": "the same 2 prompts with the static cache, same {a} -> {b}",
    "llama-beam": "the LLaMA model, beam search (2 beams), same {a} -> {b}",
    **{f: f"{f} from a config (hidden 128, 2 layers), greedy, same {{a}} -> {{b}}" for f in FAMILIES},
    "train": "LLaMA-style training (d=128, 2 layers, AdamW), 12 sequence lengths in 64..128 "
             "against one length",
    "train-sized": "the same with TORCHTPU_BUCKETS=128,256,512 (explicit sizes: batches "
                   "padded from the first)",
    "train-gpt2": "GPT-2 training (the model above, dropout off, AdamW), the same lengths",
}
RESULT = "RESULT "


# --- one measurement, in its own process ------------------------------------

def build(kind):
    import torch
    import transformers as T
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    sizes = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=VOCAB,
                 max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    if kind == "mistral":
        return T.MistralForCausalLM(T.MistralConfig(num_key_value_heads=2, intermediate_size=256, **sizes))
    if kind == "qwen2":
        return T.Qwen2ForCausalLM(T.Qwen2Config(num_key_value_heads=2, intermediate_size=256, **sizes))
    if kind == "gemma":
        return T.GemmaForCausalLM(T.GemmaConfig(num_key_value_heads=1, head_dim=32, intermediate_size=256,
                                                **sizes))
    if kind == "phi3":
        return T.Phi3ForCausalLM(T.Phi3Config(num_key_value_heads=4, intermediate_size=256, pad_token_id=0,
                                              **sizes))
    if kind == "neox":
        return T.GPTNeoXForCausalLM(T.GPTNeoXConfig(intermediate_size=256, **sizes))
    if kind == "opt":
        return T.OPTForCausalLM(T.OPTConfig(ffn_dim=256, word_embed_proj_dim=128, pad_token_id=0, **sizes))
    if kind == "gpt2":
        cfg = GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=256,
                         bos_token_id=1, eos_token_id=2)
        return GPT2LMHeadModel(cfg)
    cfg = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, vocab_size=VOCAB, intermediate_size=256,
                      max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg)


def counters():
    import torch
    import torchtpu.debug

    torch.tpu.synchronize()
    m = torchtpu.debug.metrics()
    c = {k: m[k] for k in ("compiles", "recompiles", "compile_seconds", "fused_windows",
                           "executions")}
    c["fused_window_ends"] = dict(m["fused_window_ends"])
    return c


def measured(fn):
    """Run fn() (which ends with a host read) and return its result with the
    programs it compiled, its wall time and what else the engine counted."""
    import torch
    import torchtpu.debug

    torch.tpu.synchronize()
    torchtpu.debug.compiles(clear=True)
    before = counters()
    t0 = time.perf_counter()
    out = fn()
    torch.tpu.synchronize()
    wall = time.perf_counter() - t0
    after = counters()
    m = torchtpu.debug.metrics()
    log = torchtpu.debug.compiles()
    top = Counter(c["what"].split(" (")[0] for c in log).most_common(5)
    r = {k: after[k] - before[k] for k in before if k != "fused_window_ends"}
    r["fused_window_ends"] = {k: n - before["fused_window_ends"].get(k, 0)
                              for k, n in after["fused_window_ends"].items()
                              if n - before["fused_window_ends"].get(k, 0)}
    r["graphs"] = sum(c["what"].startswith("graph ") for c in log)
    r.update(wall_s=wall, compiles_in_process=after["compiles"], top=top,
             cpu_fallbacks=m["cpu_fallbacks"], eager_mode=m["eager_mode"])
    try:
        r["programs_loaded"] = len(torchtpu.debug.programs())
    except Exception:  # an engine without the program list
        r["programs_loaded"] = None
    return out, r


def one_generate(workload, tokens):
    import copy

    import torch
    import torchtpu  # noqa: F401  (registers the device)

    model = build(workload if workload in FAMILIES or workload == "gpt2" else "llama").eval()
    batch = 2 if workload in ("llama-batch", "llama-static-batch") else 1
    ids = torch.randint(3, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(1234))
    mask = torch.ones_like(ids)
    if batch > 1:   # the second prompt is 3 tokens shorter, left-padded
        ids[1, :3] = 0
        mask[1, :3] = 0
    kw = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    if workload in ("llama-static", "llama-static-batch"):
        kw["cache_implementation"] = "static"
    if workload == "llama-beam":
        kw["num_beams"] = 2
    with torch.no_grad():
        ref = model.generate(ids, attention_mask=mask, **kw).tolist()
        tmodel = copy.deepcopy(model).to("tpu")
        tids = ids.to("tpu")
        tmask = mask.to("tpu")
        out, r = measured(lambda: tmodel.generate(tids, attention_mask=tmask, **kw).cpu())
    got, ref = out.tolist(), ref
    r["check"] = "MATCH" if got == ref else "DIFF"
    if got != ref:
        row = next(i for i, (a, b) in enumerate(zip(got, ref)) if a != b) if len(got) == len(ref) else 0
        g, w = got[row], ref[row] if row < len(ref) else []
        first = next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
        r["check_detail"] = f"row {row}: first different position {first} (prompt {PROMPT}); " \
                            f"len {len(g)} vs cpu {len(w)}"
    r["new_tokens"] = len(got[0]) - PROMPT
    r["attn"] = getattr(model.config, "_attn_implementation", None)
    return r


def train_run(model, lengths, device):
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(4321)
    batches = [torch.randint(0, VOCAB, (BATCH, n), generator=g) for n in lengths]
    losses = []
    for ids in batches:
        ids = ids.to(device)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(x) for x in torch.stack(losses).cpu()]   # one host read, at the end


def one_train(workload, variant):
    import copy

    import torch
    import torchtpu  # noqa: F401

    lengths = VARIED_LENS if variant == "varied" else [FIXED_LEN] * STEPS
    model = build("gpt2" if workload == "train-gpt2" else "llama").train()
    for m in model.modules():   # losses comparable with the CPU's
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    tmodel = copy.deepcopy(model).to("tpu")
    ref = train_run(model, lengths, "cpu")
    got, r = measured(lambda: train_run(tmodel, lengths, "tpu"))
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, ref))
    r["check"] = "MATCH" if rel <= LOSS_RTOL else "DIFF"
    r["check_detail"] = f"max relative loss difference {rel:.2e}"
    r["losses"] = got
    r["cpu_losses"] = ref
    r["lengths"] = sorted(set(lengths))
    r["attn"] = getattr(model.config, "_attn_implementation", None)
    return r


def one(spec):
    workload, variant = spec.split(":")
    import torchtpu

    want = os.environ.get("TORCHTPU_EAGER_MODE", "strict")
    if torchtpu.get_eager_mode() != want:
        raise SystemExit(f"eager mode is {torchtpu.get_eager_mode()}, TORCHTPU_EAGER_MODE={want}")
    if workload.startswith("train"):
        r = one_train(workload, variant)
    else:
        r = one_generate(workload, int(variant))
    r.update(workload=workload, variant=variant)
    print(RESULT + json.dumps(r), flush=True)


# --- the driver ----------------------------------------------------------------

def run_one(workload, mode, variant, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHTPU_DISK_CACHE="0", TORCHTPU_EAGER_MODE=mode,
                   TORCHTPU_CACHE_DIR=os.path.join(tmp, "torchtpu"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TORCHTPU_RECOMPILE_WARN="0", PYTHONWARNINGS="ignore",
                   TRANSFORMERS_VERBOSITY="error", **SETTINGS.get(workload, {}))
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one",
                                f"{workload}:{variant}"],
                               env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "TIMEOUT", "process_s": time.perf_counter() - t0}
    elapsed = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(RESULT)]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-12:]
        return {"status": "FAILED", "rc": p.returncode, "tail": tail, "process_s": elapsed}
    r = json.loads(lines[-1][len(RESULT):])
    r.update(status="ok", process_s=elapsed)
    return r


def describe(workload, mode, variant, r):
    head = f"  {workload:12s} {mode:6s} {variant:>6s}"
    if r["status"] == "TIMEOUT":
        return f"{head}  TIMEOUT after {r['process_s']:.0f} s"
    if r["status"] == "FAILED":
        return f"{head}  FAILED (exit {r['rc']}):\n" + "\n".join("      " + t for t in r["tail"])
    top = ", ".join(f"{w} {n}" for w, n in r["top"])
    fb = sum(r["cpu_fallbacks"].values())
    line = (f"{head}  {r['compiles']:5d} programs compiled ({r['compile_seconds']:.1f} s summed, "
            f"{r['recompiles']} recompiles) in {r['wall_s']:7.2f} s; "
            f"{r['programs_loaded']} loaded; {r['check']}")
    if r.get("check_detail"):
        line += f" ({r['check_detail']})"
    line += f"\n      most compiled: {top}"
    if r["fused_windows"]:
        ends = ", ".join(f"{k} {n}" for k, n in r["fused_window_ends"].items())
        line += f"; {r['fused_windows']} fused windows (ended by {ends})"
    if r["graphs"]:
        line += f"; {r['graphs']} torch.compile graph(s)"
    if fb:
        line += f"; {fb} CPU fallbacks {r['cpu_fallbacks']}"
    line += f"; process {r['process_s']:.0f} s"
    return line


def cell(results):
    if any(r["status"] != "ok" for r in results):
        return " -> ".join(r["status"] if r["status"] != "ok" else str(r["compiles"])
                           for r in results)
    progs = " -> ".join(str(r["compiles"]) for r in results)
    times = " -> ".join(f"{r['wall_s']:.1f} s" for r in results)
    checks = {r["check"] for r in results}
    return f"{progs} programs ({times}) {'MATCH' if checks == {'MATCH'} else 'DIFF'}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--modes", default="strict,fused")
    ap.add_argument("--tokens", default="8,40", help="new tokens of generate(), one process each")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table at the end")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        one(a.one)
        return
    workloads = [w for w in a.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS + FAMILIES:
            ap.error(f"unknown workload {w!r} (one of {', '.join(WORKLOADS + FAMILIES)})")
    modes = [m for m in a.modes.split(",") if m]
    tokens = [int(t) for t in a.tokens.split(",") if t]
    print("changing shapes: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
          + f"; modes {','.join(modes)}; new tokens {','.join(map(str, tokens))}; "
          f"train lengths {FIXED_LEN} x{STEPS} vs {VARIED_LENS[0]}..{VARIED_LENS[-1]} ({STEPS})",
          flush=True)
    table = {}
    for w in workloads:
        variants = ["fixed", "varied"] if w.startswith("train") else [str(t) for t in tokens]
        for mode in modes:
            for v in variants:
                r = run_one(w, mode, v, a.timeout)
                table.setdefault((w, mode), []).append(r)
                print(describe(w, mode, v, r), flush=True)
    print("load average after " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    if a.markdown:
        ta = str(tokens[0])
        tb = " -> for ".join(str(t) for t in tokens[1:]) or ta
        print()
        print("| workload | " + " | ".join(modes) + " |")
        print("|---" * (len(modes) + 1) + "|")
        for w in workloads:
            label = LABELS[w].format(a=ta, b=tb)
            if len(tokens) == 1 and not w.startswith("train"):
                label = label.replace(f" -> for {ta}", "").replace(f" -> {ta}", "")
            print(f"| {label} | " + " | ".join(cell(table[(w, m)]) for m in modes) + " |")
        print()
        print("Cells: programs compiled by the measured call(s) (generate: "
              + " -> ".join(f"{t} new tokens" for t in tokens)
              + f"; train: {STEPS} steps at length {FIXED_LEN} -> {STEPS} lengths "
              f"{VARIED_LENS[0]}..{VARIED_LENS[-1]}), wall time of each, and whether "
              "tokens / losses equal the CPU's.")


if __name__ == "__main__":
    main()
