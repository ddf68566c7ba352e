"""A short version of the training soak (benchmarks/soak.py, 2,000 steps
documented): the demo model on tpu and on the CPU with varying sequence
lengths and checkpoint round trips; losses agree, memory, RSS and mappings
stop growing after warm-up."""
import json

import pytest

from _proc import check, run_script
from support import soak


@pytest.mark.long
def test_short_soak():
    out = check(run_script("""
        import json, warnings
        from support import soak
        warnings.filterwarnings("ignore", message=".*recompiled")
        result = soak.run(steps=60, every=10, checkpoint_every=20, lengths=(16, 24, 40), batch=8)
        failures, growth = soak.judge(result, tolerance=1e-4, warmup=20)
        for s in result["samples"]:
            print(soak.row(s))
        print(json.dumps({"failures": failures, "growth": growth, "max_rel": result["max_rel"],
                          "checkpoints": result["checkpoints"], "samples": len(result["samples"]),
                          "final": result["losses"][-1], "first": result["losses"][0]}))
    """, timeout=180), expect=None)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["failures"] == [], out
    assert result["checkpoints"] == 3 and result["samples"] == 7
    assert result["max_rel"] <= 1e-4
    assert result["final"][0] < result["first"][0]   # it trains
    assert set(result["growth"]) == {"device_bytes", "rss", "mappings"}


def _samples(values):
    return [{"step": 10 * i, "device_bytes": d, "rss": r, "mappings": m}
            for i, (d, r, m) in enumerate(values)]


def test_judge_rules():
    flat = {"samples": _samples([(100, 500 << 20, 3000)] * 10), "max_rel": 1e-6,
            "max_rel_step": 3, "all_lengths_at": 5}
    assert soak.judge(flat, warmup=20)[0] == []
    # Warm-up growth is allowed; growth after it is not.
    warm = dict(flat, samples=_samples([(0, 0, 0)] * 3 + [(100, 500 << 20, 3000)] * 7))
    assert soak.judge(warm, warmup=20)[0] == []
    leaking = dict(flat, samples=_samples([(100 + (i << 20), (500 + 20 * i) << 20, 3000 + 40 * i)
                                           for i in range(10)]))
    failures = soak.judge(leaking, warmup=20)[0]
    assert [f.split()[0] for f in failures] == ["device_bytes", "rss", "mappings"]
    diverging = dict(flat, max_rel=3e-3)
    assert soak.judge(diverging)[0][0].startswith("losses diverge")
    assert "too few samples" in soak.judge(dict(flat, all_lengths_at=95))[0][0]
