"""The long fuzz run: tpu against the CPU on random op calls for a while.

    .venv/bin/python tests/fuzz_long.py --minutes 30            # all kinds, random seed
    .venv/bin/python tests/fuzz_long.py --minutes 5 --seed 7 --kinds call
    .venv/bin/python tests/fuzz_long.py --case '{"kind": "call", ...}'   # replay one case

Cases are drawn by Hypothesis (fuzz_strategies.py) in rounds, one kind of
case after another, and run in a worker subprocess (fuzz_worker.py): a
crash or a hang is a result, never the end of the run. Every failing case
is printed with its reproducer, and a summary ends the run: cases by
status, ops covered, coverage gaps (NotImplementedError on tpu where the
CPU answers). Exit status 1 when anything failed. --log writes every
failure as a JSON line.
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hseed  # noqa: E402

import fuzz_strategies as fs  # noqa: E402
from fuzz_worker import FuzzWorker  # noqa: E402

KINDS = {
    "opinfo": lambda cat: fs.opinfo_cases(cat),
    "error": lambda cat: fs.error_cases(cat),
    "call": lambda cat: fs.call_cases,
}


def run_round(worker, strategy, tally, deadline, examples, round_seed, on_fail):
    @hseed(round_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def body(case):
        if time.monotonic() > deadline:
            return
        before = len(tally.failures)
        fs.check(worker, case, tally)
        if len(tally.failures) > before:
            on_fail(*tally.failures[-1])

    body()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kinds", default="opinfo,error,call", help="comma-separated: " + ",".join(KINDS))
    ap.add_argument("--round", type=int, default=50, help="examples per Hypothesis round")
    ap.add_argument("--case", help="run this one case (JSON) and print its result")
    ap.add_argument("--log", help="append each failure here as a JSON line")
    args = ap.parse_args()

    worker = FuzzWorker()
    try:
        worker.start()
        if args.case:
            res = worker.run(json.loads(args.case))
            print(json.dumps(res, indent=1))
            return 0 if res["status"] not in fs.Tally.FAIL else 1
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        print(f"fuzz: seed {seed}, {args.minutes:g} minutes, kinds {args.kinds}, "
              f"{len(worker.catalog)} op_db entries", flush=True)
        tally = fs.Tally()
        log = open(args.log, "a") if args.log else None
        seen = set()

        def on_fail(case, result):
            key = (case.get("op") or case.get("fn"), case.get("variant"), result["status"],
                   (result.get("detail") or "").splitlines()[0][:80] if result.get("detail") else "")
            if log:
                log.write(json.dumps(dict(case=case, result=result)) + "\n")
                log.flush()
            if key not in seen:
                seen.add(key)
                print(fs.describe(case, result), flush=True)

        t0 = time.monotonic()
        deadline = t0 + args.minutes * 60
        kinds = args.kinds.split(",")
        rnd = 0
        while time.monotonic() < deadline:
            kind = kinds[rnd % len(kinds)]
            run_round(worker, KINDS[kind](worker.catalog), tally, deadline, args.round, seed + rnd, on_fail)
            rnd += 1
            if rnd % len(kinds) == 0:
                print(f"[{(time.monotonic() - t0) / 60:.1f} min] " + tally.summary().replace("\n", "; "),
                      flush=True)
        print(tally.summary())
        print(f"worker starts: {worker.starts} (crashes, hangs and every {400} cases); "
              f"distinct failures: {len(seen)}")
        if tally.gaps:
            print("coverage gaps: " + ", ".join(f"{k} ({v})" for k, v in sorted(tally.gaps.items())))
        return 1 if tally.failures else 0
    finally:
        worker.close()


if __name__ == "__main__":
    sys.exit(main())
