"""PyTorch's own device-generic test suite, run on the tpu device.

    .venv/bin/python tests/pytorch_suite/run.py --download          # the default files, all tests
    .venv/bin/python tests/pytorch_suite/run.py --source ~/pytorch  # a PyTorch checkout of your own
    .venv/bin/python tests/pytorch_suite/run.py --source pytorch_2.6.0+dfsg.orig.tar.xz  # archive
    .venv/bin/python tests/pytorch_suite/run.py --download --files test_view_ops.py --sample 200
    .venv/bin/python tests/pytorch_suite/run.py --report-only       # docs/pytorch_suite.md again
    .venv/bin/python tests/pytorch_suite/run.py --download --ids tests/pytorch_suite/ci_tests.txt \
        --one-worker --out /tmp/suite.json                           # CI's part (exit 1 on a failure)
    .venv/bin/python tests/pytorch_suite/run.py --pick-ci 10        # choose CI's part again

The test files come from a PyTorch source tree. `--source PATH` (or its
older spelling `--src`) names one: a tree (its root or its test/ folder) or
a source archive (.tar.xz, .tar.gz, .tar.bz2: Debian's orig tarball, a
PyTorch release's sources), whose test/ folder is unpacked into ~/.cache.
`--download` fetches Debian's PyTorch source package (SOURCE_PACKAGE,
upstream version SOURCE_VERSION) by name with apt, the ordinary client
(`apt-get source --download-only`): from apt's own `deb-src` entries when
they carry that version (APT_CONFIG may name another configuration), else
from SOURCE_SUITE's sources in the Debian archives the machine's apt
already uses, through an apt configuration of its own under ~/.cache (the
machine's is left as it is). The archive is checked against SOURCE_SHA256
and unpacked into ~/.cache; a second run uses the cache. The installed
torch's `torch.testing._internal` runs the tests, so tests that need a
newer or older torch than the tree's fail at import and are reported as
such.

Each file runs in its own pytest process with plugin.py: torchtpu is
imported first, `PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1` keeps only
the tpu variants, every test has a time limit (--timeout), and one JSON
line per test is written as it finishes. A worker that crashes or stops
answering is killed, its running test recorded as `crash`/`hang`, and the
file goes on from the next test. The CPU fallback is off: a fallback never
counts as a pass.

Writes docs/pytorch_suite.json (every result) and docs/pytorch_suite.md
(per file: pass / fail / skip / time-out; failures by cause; each wrong
result and wrong exception by name). With --files, results are merged into
an existing docs/pytorch_suite.json; files run whole (no --sample) into a
sampled report are named as such in its header.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

from pytorch_suite import causes  # noqa: E402

# Debian's PyTorch source package: its name, its upstream version, and the
# upstream archive it carries (the same file in every Debian revision).
SOURCE_PACKAGE = "pytorch"
SOURCE_VERSION = "2.6.0+dfsg"
SOURCE_FILE = "pytorch_2.6.0+dfsg.orig.tar.xz"
SOURCE_SHA256 = "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"
SOURCE_DIR = "pytorch-v2.6.0"
# A Debian release whose `pytorch` source package has that upstream version.
SOURCE_SUITE = "trixie"
SOURCE_DESCRIPTION = (f"Debian's source package {SOURCE_PACKAGE} {SOURCE_VERSION} "
                      f"({SOURCE_FILE}), through apt")
# The name tests/conformance/test_pytorch_suite.py's skip message reads: what --download
# fetches (a package, not an address).

DEFAULT_FILES = [
    "test_view_ops.py", "test_indexing.py", "test_tensor_creation_ops.py",
    "test_type_promotion.py", "test_binary_ufuncs.py", "test_unary_ufuncs.py",
    "test_reductions.py", "test_shape_ops.py", "test_sort_and_select.py",
    "test_scatter_gather_ops.py", "test_foreach.py", "test_autograd.py",
    "test_nn.py", "nn/test_convolution.py", "nn/test_pooling.py",
    "nn/test_embedding.py", "test_optim.py", "test_torch.py", "test_ops.py",
    "test_linalg.py",
]

JSON_OUT = os.path.join(ROOT, "docs", "pytorch_suite.json")
MD_OUT = os.path.join(ROOT, "docs", "pytorch_suite.md")
CI_IDS = os.path.join(HERE, "ci_tests.txt")


def cache_dir():
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                        "torchtpu", "pytorch-src")


class FetchError(OSError):
    """The sources could not be fetched; the message says what to do."""


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _apt_versions(env=None):
    """The versions of SOURCE_PACKAGE the deb-src entries of an apt
    configuration carry (env: APT_CONFIG naming another), and apt's own
    messages."""
    if not shutil.which("apt-get"):
        raise FetchError(f"--download needs apt (apt-get source); without it, fetch {SOURCE_FILE} "
                         f"(Debian's source package {SOURCE_PACKAGE}, any {SOURCE_VERSION}-* "
                         "revision) yourself and pass --source FILE")
    p = subprocess.run(["apt-cache", "showsrc", SOURCE_PACKAGE], capture_output=True, text=True,
                       env=env)
    versions = re.findall(r"^Version: (\S+)$", p.stdout, re.M)
    return versions, (p.stderr or "").strip()


def _upstream(version):
    """Debian's version without its epoch and revision: 1:2.6.0+dfsg-7 -> 2.6.0+dfsg."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def _debian_archives():
    """The Debian archives (their URIs) the machine's apt takes packages
    from, as `apt-cache policy` lists them; security archives left out."""
    p = subprocess.run(["apt-cache", "policy"], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    uris = []
    for line, release in zip(lines, lines[1:] + [""]):
        m = re.match(r"^\s*-?\d+\s+(\S+://\S+)\s+\S+\s+\S+\s+Packages$", line)
        fields = dict(f.split("=", 1) for f in release.strip().removeprefix("release ").split(",")
                      if "=" in f)
        if m and fields.get("o") == "Debian" and fields.get("l") == "Debian" \
                and m.group(1) not in uris:
            uris.append(m.group(1))
    return uris


def _private_apt(dest):
    """An apt configuration of our own under `dest` whose deb-src entries
    are SOURCE_SUITE's, from the Debian archives the machine's apt already
    uses (signed by the keys apt already trusts), its index fetched with
    apt-get update into `dest`: the machine's own configuration is left as
    it is. Returns (the environment that selects it, None), or (None, why)."""
    uris = _debian_archives()
    if not uris:
        return None, "the machine's apt takes packages from no Debian archive"
    root = os.path.join(dest, "apt")
    for d in ("lists/partial", "cache/archives/partial", "sources.list.d"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "sources.list"), "w") as f:
        f.writelines(f"deb-src {uri} {SOURCE_SUITE} main\n" for uri in uris)
    conf = os.path.join(root, "apt.conf")
    with open(conf, "w") as f:
        f.write(f'Dir::Etc::sourcelist "{root}/sources.list";\n'
                f'Dir::Etc::sourceparts "{root}/sources.list.d";\n'
                f'Dir::State::Lists "{root}/lists";\n'
                f'Dir::Cache "{root}/cache";\n')
    env = dict(os.environ, APT_CONFIG=conf)
    p = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None, f"apt-get update of {SOURCE_SUITE}'s sources failed: {p.stderr[-1000:]}"
    return env, None


def fetch_with_apt(dest):
    """Fetches SOURCE_FILE into `dest` with `apt-get source --download-only`,
    by package name; returns its path. First from apt's configured deb-src
    entries (APT_CONFIG may name another configuration); when they carry no
    SOURCE_VERSION, from SOURCE_SUITE's sources of the Debian archives apt
    already uses, through a private configuration (_private_apt)."""
    env = None
    versions, apt_msg = _apt_versions()
    wanted = [v for v in versions if _upstream(v) == SOURCE_VERSION]
    private_msg = None
    if not wanted:
        env, private_msg = _private_apt(dest)
        if env is not None:
            more, private_msg = _apt_versions(env)
            wanted = [v for v in more if _upstream(v) == SOURCE_VERSION]
            if not wanted:
                private_msg = (f"{SOURCE_SUITE}'s sources carry "
                               f"{', '.join(sorted(set(more))) or 'none'}"
                               + (f" ({private_msg})" if private_msg else ""))
    if not wanted:
        have = ", ".join(sorted(set(versions))) or "none"
        raise FetchError(
            f"apt has no source package {SOURCE_PACKAGE} {SOURCE_VERSION}-* (its deb-src "
            f"entries carry: {have}{'; apt says: ' + apt_msg if apt_msg else ''}; "
            f"{private_msg}). Add a deb-src entry for a Debian release that carries it to apt's "
            "sources (or point APT_CONFIG at a configuration that does), run apt-get update, and "
            f"retry; or fetch {SOURCE_FILE} some other way and pass --source FILE")
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        p = subprocess.run(["apt-get", "source", "--download-only", "-q",
                            f"{SOURCE_PACKAGE}={wanted[0]}"],
                           cwd=tmp, capture_output=True, text=True, env=env)
        got = os.path.join(tmp, SOURCE_FILE)
        if p.returncode != 0 or not os.path.exists(got):
            raise FetchError(f"apt-get source {SOURCE_PACKAGE}={wanted[0]} failed "
                             f"(status {p.returncode}): {(p.stderr or p.stdout)[-2000:]}")
        path = os.path.join(dest, SOURCE_FILE)
        os.replace(got, path)
    return path


def unpack_tests(archive, dest):
    """Unpacks the test/ folder of a PyTorch source archive under `dest`;
    returns that test/ folder. The archive's top folder is the one holding
    test/test_torch.py."""
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        tops = sorted({m.name[:-len("test/test_torch.py")] for m in members
                       if m.name == "test/test_torch.py" or m.name.endswith("/test/test_torch.py")})
        if not tops:
            raise SystemExit(f"{archive}: not a PyTorch source archive (no test/test_torch.py)")
        prefix = tops[0] + "test/"
        tf.extractall(dest, members=[m for m in members if m.name.startswith(prefix)],
                      filter="data")
    return os.path.join(dest, prefix.rstrip("/"))


def download():
    """The test/ folder of Debian's PyTorch source package, fetched with apt
    (FetchError, an OSError, when it cannot be), checked and unpacked."""
    dest = cache_dir()
    test_dir = os.path.join(dest, SOURCE_DIR, "test")
    if os.path.isdir(test_dir):
        return test_dir
    os.makedirs(dest, exist_ok=True)
    tar_path = os.path.join(dest, SOURCE_FILE)
    if not os.path.exists(tar_path):
        tar_path = fetch_with_apt(dest)
    digest = _sha256(tar_path)
    if digest != SOURCE_SHA256:
        os.remove(tar_path)
        raise SystemExit(f"{tar_path}: sha256 {digest} is not {SOURCE_SHA256}")
    return unpack_tests(tar_path, dest)


def from_source(path):
    """(test folder, description) of --source PATH: a tree, or an archive
    unpacked into the cache (once per archive)."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        return find_test_dir(path), path
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file or folder")
    if not tarfile.is_tarfile(path):
        raise SystemExit(f"{path}: neither a folder nor a tar archive")
    digest = _sha256(path)
    if digest == SOURCE_SHA256:  # Debian's archive: the cache --download uses
        dest = cache_dir()
        test_dir = os.path.join(dest, SOURCE_DIR, "test")
        description = f"Debian's PyTorch source package ({SOURCE_FILE})"
    else:
        dest = os.path.join(cache_dir(), "src-" + digest[:16])
        test_dir = None
        description = os.path.basename(path)
    if test_dir is None or not os.path.isdir(test_dir):
        os.makedirs(dest, exist_ok=True)
        test_dir = unpack_tests(path, dest)
    return test_dir, description


def find_test_dir(src):
    src = os.path.abspath(os.path.expanduser(src))
    for cand in (os.path.join(src, "test"), src):
        if os.path.isfile(os.path.join(cand, "test_torch.py")) or \
                os.path.isfile(os.path.join(cand, "test_view_ops.py")):
            return cand
    raise SystemExit(f"{src}: not a PyTorch source tree (no test/test_torch.py)")


def worker_env(results, done, timeout):
    env = dict(os.environ)
    env.pop("TORCHTPU_CPU_FALLBACK", None)
    env["PYTHONPATH"] = TESTS + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
    env["TTPU_SUITE_RESULTS"] = results
    env["TTPU_SUITE_DONE"] = done
    env["TTPU_SUITE_TIMEOUT"] = str(timeout)
    env.setdefault("TORCHTPU_CACHE_DIR", tempfile.mkdtemp(prefix="torchtpu-suite-cache-"))
    return env


def pytest_cmd(targets, extra):
    """pytest on targets (a file, or test ids) with the suite plugin."""
    return [sys.executable, "-m", "pytest", "-q", "--noconftest", "-p", "no:cacheprovider",
            "-p", "pytorch_suite.plugin", "-o", "addopts=", "-W", "ignore"] + targets + extra


def collect(test_dir, path, env, extra):
    """Test ids of one file, or (None, error) when it cannot be collected."""
    p = subprocess.run(pytest_cmd([path], ["--co"] + extra), cwd=test_dir, env=env,
                       capture_output=True, text=True, timeout=900)
    ids = [line.strip() for line in p.stdout.splitlines()
           if "::" in line and not line.startswith(("ERROR", "FAILED"))]
    if not ids:
        tail = (p.stdout + p.stderr).strip().splitlines()[-12:]
        return None, "\n".join(tail)
    return ids, ""


def read_records(results):
    starts, ends = [], {}
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec["event"] == "start":
                    starts.append(rec["id"])
                elif rec["id"] not in ends:
                    ends[rec["id"]] = rec
    return starts, ends


def run_file(test_dir, path, args, log, chosen=None):
    """Every selected test of one file (or the test ids `chosen` of it, run
    without collecting the whole file first): {test id: record}."""
    work = tempfile.mkdtemp(prefix="ttpu-suite-")
    results = os.path.join(work, "results.jsonl")
    done = os.path.join(work, "done.txt")
    env = worker_env(results, done, args.timeout)
    extra = ["-k", args.k] if args.k else []
    if chosen:
        # the files as targets, the ids chosen by the plugin (a test's class
        # name depends on which file a process collected first)
        ids, all_ids = sorted(chosen), set(chosen)
        targets = sorted({t.split("::", 1)[0] for t in chosen})
        only = os.path.join(work, "only.txt")
        with open(only, "w") as f:
            f.write("\n".join(ids))
        env["TTPU_SUITE_ONLY"] = only
    else:
        ids, err = collect(test_dir, path, env, extra)
        if ids is None:
            return {"error": err}, 0
        all_ids, targets = set(ids), [path]
    if args.sample and len(ids) > args.sample:
        rng = random.Random(f"{args.seed}:{path}")
        ids = sorted(rng.sample(ids, args.sample))
    wanted = set(ids)
    collected = len(ids)
    # The selection: every id not wanted counts as done for the plugin.
    skip_ids = all_ids - wanted
    # a worker's ids back to the wanted ones (its class names may differ)
    by_normal = {causes.normal_id(t): t for t in wanted}
    records = {}
    while True:
        with open(done, "w") as f:
            f.write("\n".join(sorted(skip_ids | set(records))))
        if wanted <= set(records):
            break
        t_last = time.monotonic()
        proc = subprocess.Popen(pytest_cmd(targets, extra), cwd=test_dir,
                                env=env, stdout=log, stderr=log, start_new_session=True)
        seen = 0
        how = None
        while proc.poll() is None:
            time.sleep(1.0)
            starts, ends = read_records(results)
            n = len(starts) + len(ends)
            if n != seen:
                seen, t_last = n, time.monotonic()
            elif time.monotonic() - t_last > args.timeout + 60:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                how = "hang"
        starts, ends = read_records(results)
        for tid, rec in ends.items():
            tid = by_normal.get(causes.normal_id(tid), tid)
            if tid in wanted:
                records.setdefault(tid, dict(rec, id=tid))
        starts = [by_normal.get(causes.normal_id(t), t) for t in starts]
        ends = {by_normal.get(causes.normal_id(t), t): r for t, r in ends.items()}
        running = [t for t in starts if t not in ends and t in wanted and t not in records]
        if running:
            tid = running[-1]
            records[tid] = {"id": tid, "outcome": how or "crash",
                            "msg": f"worker exit status {proc.returncode}" if not how else
                            "no progress; worker killed"}
        elif not (wanted <= set(records)):
            # The worker ended with tests left and none running: they were
            # not collected in this process (collection differs per run).
            for tid in wanted - set(records):
                records[tid] = {"id": tid, "outcome": "not run",
                                "msg": f"worker exit status {proc.returncode}"}
    return records, collected


def cpu_id(test_id):
    """The CPU instance of a tpu test id (class TestXPRIVATEUSE1 or TestXTPU
    becomes TestXCPU, test_y_tpu_float32 becomes test_y_cpu_float32)."""
    path, _, rest = test_id.partition("::")
    cls, _, name = rest.rpartition("::")
    cls = re.sub(r"(PRIVATEUSE1|TPU)$", "CPU", cls)
    name = re.sub(r"_tpu(?=_|$)", "_cpu", name)
    return f"{path}::{cls}::{name}"


def check_on_cpu(test_dir, path, records, args, log):
    """Runs the CPU instances of the failed tests; a test that fails on the
    CPU too is the test files' own (a torch version apart, a CPU-only
    assumption), marked `cpu_fails` with the CPU's outcome."""
    failed = [t for t, r in records.items()
              if r.get("outcome") not in ("passed", "xpass", "skipped", "xfail")]
    if not failed:
        return
    work = tempfile.mkdtemp(prefix="ttpu-suite-cpu-")
    results = os.path.join(work, "results.jsonl")
    env = worker_env(results, os.path.join(work, "none"), args.timeout)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
    ids = {cpu_id(t): t for t in failed}
    try:
        subprocess.run(pytest_cmd(sorted(ids), []), cwd=test_dir, env=env,
                       stdout=log, stderr=log, timeout=max(600, 3 * args.timeout * len(ids)),
                       start_new_session=True)
    except subprocess.TimeoutExpired:
        pass
    _, ends = read_records(results)
    for cid, rec in ends.items():
        if cid in ids and rec.get("outcome") not in ("passed", "xpass", "skipped"):
            records[ids[cid]]["cpu_fails"] = rec.get("outcome")


def summarize(results):
    files = {}
    for path, recs in results["files"].items():
        if "error" in recs:
            files[path] = {"error": recs["error"]}
            continue
        c = {"passed": 0, "failed": 0, "skipped": 0, "time-out": 0, "crash": 0,
             "xfail": 0, "causes": {}}
        for tid, rec in recs.items():
            out = rec.get("outcome")
            if out in ("passed", "xpass"):
                c["passed"] += 1
            elif out == "skipped":
                c["skipped"] += 1
            elif out == "xfail":
                c["xfail"] += 1
            elif rec.get("cpu_fails"):
                rec["cause"], rec["detail"] = "fails on CPU too", rec.get("type") or rec.get("outcome")
                c["failed"] += 1
                c["causes"]["fails on CPU too"] = c["causes"].get("fails on CPU too", 0) + 1
            else:
                cause, detail = causes.classify(tid, rec)
                rec["cause"], rec["detail"] = cause, detail
                if cause == "time-out":
                    c["time-out"] += 1
                elif cause == "crash":
                    c["crash"] += 1
                else:
                    c["failed"] += 1
                c["causes"][cause] = c["causes"].get(cause, 0) + 1
        files[path] = c
    return files


def write_report(results, json_out=None, md_out=None):
    json_out, md_out = json_out or JSON_OUT, md_out or MD_OUT
    files = summarize(results)
    meta = results["meta"]
    lines = [
        "# PyTorch's device-generic test suite on tpu",
        "",
        "PyTorch's own test files, instantiated for the tpu device through",
        "`instantiate_device_type_tests` (PrivateUse1), with the CPU fallback off.",
        "Generated by `tests/pytorch_suite/run.py`; every result is in",
        "`docs/pytorch_suite.json`.",
        "",
        f"- test files: {meta.get('source')}",
        f"- torch {meta.get('torch')}, per-test limit {meta.get('timeout')} s"
        + (f", a sample of {meta['sample']} tests per file (seed {meta.get('seed')})"
           if meta.get("sample") else ", every test")
        + (f"; every test of {', '.join(sorted(meta['whole']))}" if meta.get("sample") and meta.get("whole")
           else ""),
        f"- run on {meta.get('date')}",
        "",
        "| file | tests | pass | fail | skip | xfail | time-out | crash | failures by cause |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tot = {k: 0 for k in ("n", "passed", "failed", "skipped", "xfail", "time-out", "crash")}
    for path in sorted(files):
        c = files[path]
        if "error" in c:
            lines.append(f"| {path} | not collected | | | | | | | "
                         f"{c['error'].splitlines()[-1][:120] if c['error'] else ''} |")
            continue
        n = sum(c[k] for k in ("passed", "failed", "skipped", "xfail", "time-out", "crash"))
        for k in tot:
            tot[k] += n if k == "n" else c[k]
        by = ", ".join(f"{k} {v}" for k, v in sorted(c["causes"].items(), key=lambda kv: -kv[1]))
        lines.append(f"| {path} | {n} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                     f"{c['xfail']} | {c['time-out']} | {c['crash']} | {by} |")
    lines.append(f"| **all** | {tot['n']} | {tot['passed']} | {tot['failed']} | {tot['skipped']} | "
                 f"{tot['xfail']} | {tot['time-out']} | {tot['crash']} | |")
    groups = {}
    for path, recs in results["files"].items():
        if "error" in recs:
            continue
        for tid, rec in recs.items():
            if "cause" in rec:
                groups.setdefault(rec["cause"], []).append((path, tid, rec))
    order = ["wrong result", "wrong exception", "crash", "time-out", "test assumption",
             "fails on CPU too"]
    for cause in order + sorted(set(groups) - set(order)):
        if cause not in groups:
            continue
        items = sorted(groups[cause], key=lambda x: x[1])
        lines += ["", f"## {cause} ({len(items)})", ""]
        if cause.startswith("not implemented"):
            ops = {}
            for _, tid, rec in items:
                ops.setdefault(rec.get("detail") or "?", []).append(tid.split("::")[-1])
            for op, tids in sorted(ops.items(), key=lambda kv: -len(kv[1])):
                lines.append(f"- `{op}`: {len(tids)} ({', '.join(sorted(tids)[:3])}"
                             f"{', ...' if len(tids) > 3 else ''})")
            continue
        for path, tid, rec in items:
            detail = (rec.get("detail") or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"- `{tid.split('::', 1)[-1]}` ({path}): {detail}")
    with open(md_out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(json_out, "w") as f:
        json.dump(results, f, indent=0, sort_keys=True)
        f.write("\n")


def pick_ci(per_file, max_s):
    """Writes CI_IDS: up to per_file tests of each file that passed in
    docs/pytorch_suite.json within max_s seconds, chosen at random (seeded
    by the file's name, so the same run gives the same list) so that every
    kind of test in the file has a chance."""
    with open(JSON_OUT) as f:
        results = json.load(f)
    lines = []
    for path in sorted(results["files"]):
        recs = results["files"][path]
        if "error" in recs:
            continue
        ok = sorted(t for t, r in recs.items()
                    if r.get("outcome") == "passed" and r.get("s", max_s + 1) <= max_s)
        rng = random.Random(f"ci:{path}")
        lines += sorted(rng.sample(ok, min(per_file, len(ok))))
    with open(CI_IDS, "w") as f:
        f.write("# PyTorch's own tests that CI runs on tpu (tests/conformance/test_pytorch_suite.py);\n"
                "# chosen by `run.py --pick-ci` from tests that passed in docs/pytorch_suite.json\n")
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(CI_IDS, ROOT)}: {len(lines)} tests")


def read_ids(path):
    """{test file: [test id]} from a file of ids (one per line, # comments)."""
    by_file = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                by_file.setdefault(line.split("::", 1)[0], []).append(line)
    return by_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", "--src", dest="source", metavar="PATH",
                    help="a PyTorch source tree (its root or its test/ folder) or a source "
                         "archive (.tar.xz, .tar.gz, .tar.bz2)")
    ap.add_argument("--download", action="store_true",
                    help=f"fetch and use Debian's PyTorch source package ({SOURCE_PACKAGE} "
                         f"{SOURCE_VERSION}) with apt-get source")
    ap.add_argument("--files", help="comma-separated test files, relative to test/")
    ap.add_argument("--ids", help="a file of test ids (file::Class::test, one per line): "
                                  "run only those; exit status 1 unless each passes or skips")
    ap.add_argument("--one-worker", action="store_true",
                    help="with --ids: run the tests of every file in one pytest worker")
    ap.add_argument("-k", help="pytest -k expression within each file")
    ap.add_argument("--sample", type=int, default=0, help="at most N tests per file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    ap.add_argument("--out", help="the results' JSON file (the report goes beside it, .md); "
                                  "default docs/pytorch_suite.json")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--pick-ci", type=int, metavar="N",
                    help=f"write {os.path.relpath(CI_IDS, ROOT)}: N quick passing tests per file "
                         "of docs/pytorch_suite.json")
    ap.add_argument("--cpu-check-only", action="store_true",
                    help="run the CPU instances of docs/pytorch_suite.json's failures, "
                         "then the report (needs --source or --download)")
    args = ap.parse_args()
    json_out = os.path.abspath(args.out) if args.out else JSON_OUT
    md_out = os.path.splitext(json_out)[0] + ".md"

    if args.pick_ci:
        pick_ci(args.pick_ci, max_s=1.0)
        return
    if args.report_only:
        with open(json_out) as f:
            write_report(json.load(f), json_out, md_out)
        return
    if args.source:
        test_dir, source = from_source(args.source)
    elif args.download:
        try:
            test_dir = download()
        except FetchError as e:
            raise SystemExit(f"--download: {e}") from None
        source = f"Debian's PyTorch source package ({SOURCE_FILE})"
    else:
        ap.error("give --source PATH or --download")
    log_path = os.path.join(tempfile.gettempdir(), "torchtpu-pytorch-suite.log")
    if args.cpu_check_only:
        with open(json_out) as f:
            results = json.load(f)
        with open(log_path, "a") as log:
            for path, recs in results["files"].items():
                if "error" not in recs:
                    check_on_cpu(test_dir, path, recs, args, log)
        write_report(results, json_out, md_out)
        return
    import torch
    chosen = read_ids(args.ids) if args.ids else {}
    files = list(chosen) if chosen else args.files.split(",") if args.files else DEFAULT_FILES
    results = {"meta": {}, "files": {}}
    if args.files and os.path.exists(json_out):
        with open(json_out) as f:
            results = json.load(f)
    whole = set(results["meta"].get("whole", []))
    if args.files and not args.sample and results["meta"].get("sample"):
        # every test of these files, merged into a sample of the others
        whole |= set(files)
        results["meta"].update(source=source, torch=torch.__version__, timeout=args.timeout,
                               date=time.strftime("%Y-%m-%d"), whole=sorted(whole))
    else:
        whole -= set(files) if args.sample else set()
        results["meta"].update(source=source, torch=torch.__version__, timeout=args.timeout,
                               sample=args.sample, seed=args.seed, date=time.strftime("%Y-%m-%d"),
                               whole=sorted(whole))
    if chosen:
        results["meta"]["ids"] = os.path.relpath(os.path.abspath(args.ids), ROOT)
    bad = []
    together = {}
    if chosen and args.one_worker:
        # every chosen test in one worker: one start-up (torch, PyTorch's
        # testing package) instead of one per file
        with open(log_path, "a") as log:
            recs, _ = run_file(test_dir, "all", args, log, [t for p in files for t in chosen[p]])
        for tid, rec in recs.items():
            together.setdefault(tid.split("::", 1)[0], {})[tid] = rec
    with open(log_path, "a") as log:
        for path in files:
            t0 = time.monotonic()
            if path in together:
                recs, n = together[path], len(together[path])
            else:
                recs, n = run_file(test_dir, path, args, log, chosen.get(path))
            if "error" not in recs and not chosen:
                check_on_cpu(test_dir, path, recs, args, log)
            results["files"][path] = recs
            c = summarize({"files": {path: recs}})[path]
            print(f"{path}: {n} tests, {time.monotonic() - t0:.0f} s: " +
                  (f"not collected: {c['error'].splitlines()[-1] if c['error'] else ''}"
                   if "error" in c else
                   f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, "
                   f"{c['time-out']} timed out, {c['crash']} crashed"), flush=True)
            if "error" in recs:
                bad.append(f"{path}: not collected: {recs['error']}")
            else:
                bad += [f"{tid}: {r.get('outcome')} {r.get('type') or ''} "
                        f"{(r.get('msg') or '').splitlines()[0][:300] if r.get('msg') else ''}"
                        for tid, r in sorted(recs.items())
                        if r.get("outcome") not in ("passed", "skipped", "xfail")]
            write_report(results, json_out, md_out)
    print(f"wrote {os.path.relpath(md_out, ROOT)} (worker output: {log_path})")
    if chosen and bad:
        print("not passed:\n  " + "\n  ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
