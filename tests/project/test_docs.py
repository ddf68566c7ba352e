"""The code in the user guides runs: every ```python block of each page of
docs/guides/ and of README.md, in order, in one fresh interpreter per page,
as a reader pasting them one after another would run them.

A block fenced as ```python no-run is skipped (the page says why: it needs
a TPU, or several processes); every other block must run without raising.
A failure names the page, the block and its first line in the page, and
shows the traceback, whose line numbers are the page's own. Each page gets
empty compile caches (torchtpu's and PyTorch's) and an empty working
folder, and none of the TORCHTPU_* settings of the calling environment but
the plugin's location, so it sees what a first run sees.

Also checked: every relative link of README.md, docs/, docs/guides/ and
examples/README.md resolves to a file (and a #heading in a page to one of
its headings), and README.md links nothing outside the repository.
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from _proc import ROOT

GUIDES = sorted(glob.glob(os.path.join(ROOT, "docs", "guides", "*.md")))
README = os.path.join(ROOT, "README.md")
PAGES = [README] + GUIDES
LINKED_PAGES = PAGES + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + \
    [os.path.join(ROOT, "examples", "README.md")]

PAGE_TIMEOUT_S = 300
# Settings a page may rely on from the environment: where the plugins are.
KEEP_ENV = {"TORCHTPU_PLUGIN", "TORCHTPU_LIBTPU"}

FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)\s*(.*)$")


def code_blocks(path):
    """Every fenced block of a Markdown page: (language, options, first line
    of its code (1-based), code)."""
    blocks, fence, lang, opts, start, body = [], None, "", "", 0, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if fence is None:
                m = FENCE.match(line)
                if m:
                    fence, lang, opts, start, body = m.group(1), m.group(2), m.group(3), n + 1, []
            elif line.strip() == fence or (line.startswith(fence[0] * len(fence))
                                           and not line.strip(fence[0]).strip()):
                blocks.append((lang, opts.split(), start, "\n".join(body) + "\n"))
                fence = None
            else:
                body.append(line)
    assert fence is None, f"{path}: a code block opened at line {start - 1} is never closed"
    return blocks


def python_blocks(path):
    """(first line, code, runs) of each ```python block."""
    return [(start, code, "no-run" not in opts)
            for lang, opts, start, code in code_blocks(path) if lang == "python"]


# Runs a page's blocks in one namespace, a module named __main__ (so what
# the blocks define pickles as a script's functions do). Compiled with the
# page's path and padded to the block's line, so a traceback points into
# the page.
DRIVER = r'''
import faulthandler, json, sys, traceback, types
faulthandler.dump_traceback_later(int(sys.argv[2]), exit=True)
page, blocks = json.load(open(sys.argv[1]))
main = types.ModuleType("__main__")
main.__file__ = page
sys.modules["__main__"] = main
for i, (line, code) in enumerate(blocks, 1):
    print(f"=== block {i} (line {line})", flush=True)
    try:
        exec(compile("\n" * (line - 1) + code, page, "exec"), main.__dict__)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        print(f"=== FAILED block {i} (line {line})", flush=True)
        sys.exit(3)
print("=== all blocks ran", flush=True)
'''


def page_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TORCHTPU_") or k in KEEP_ENV}
    env.update(TORCHTPU_CACHE_DIR=str(tmp_path / "torchtpu-cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"),
               PYTHONUNBUFFERED="1")
    return env


def page_id(path):
    return os.path.relpath(path, ROOT)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_page_code_runs(page, tmp_path):
    blocks = python_blocks(page)
    runnable = [(line, code) for line, code, runs in blocks if runs]
    if not runnable:
        if page == README:
            pytest.fail("README.md has no python block to run")
        pytest.fail(f"{page_id(page)}: no runnable ```python block")
    rel = page_id(page)
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([page, runnable]))   # the full path: tracebacks quote the page
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(spec), str(PAGE_TIMEOUT_S - 15)],
        cwd=work, env=page_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{rel}: still running after {PAGE_TIMEOUT_S} s\n{out[-6000:]}")
    if proc.returncode != 0:
        m = re.findall(r"^=== (?:FAILED )?block (\d+) \(line (\d+)\)", out, re.M)
        where = f"block {m[-1][0]} (line {m[-1][1]})" if m else "before the first block"
        code = dict(runnable).get(int(m[-1][1]), "") if m else ""
        pytest.fail(f"{rel}: {where} failed (status {proc.returncode})\n"
                    f"--- the block:\n{code}--- output:\n{out[-8000:]}")
    assert "=== all blocks ran" in out, out[-4000:]


def test_guides_exist():
    names = {os.path.basename(p) for p in GUIDES}
    assert len(names) >= 10, names


# ------------------------------------------------------------------ links

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _slug(heading):
    """GitHub's anchor for a heading: lower case, link targets and
    punctuation dropped (word characters, hyphens and spaces stay), spaces
    to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path):
    anchors, seen = set(), {}
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line.rstrip("\n")):
                in_code = not in_code
                continue
            m = None if in_code else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                slug = _slug(m.group(1))
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(path):
    """(line, target) of every Markdown link outside code blocks and code spans."""
    out, in_code = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line.rstrip("\n")):
                in_code = not in_code
                continue
            if in_code:
                continue
            line = re.sub(r"`[^`]*`", "", line)
            out += [(n, m.group(1)) for m in LINK.finditer(line)]
    return out


@pytest.mark.parametrize("page", LINKED_PAGES, ids=page_id)
def test_relative_links_resolve(page):
    bad = []
    for n, target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # another site (or mailto:)
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            bad.append(f"line {n}: {target} (no {os.path.relpath(dest, ROOT)})")
        elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
            bad.append(f"line {n}: {target} (no heading #{anchor} in "
                       f"{os.path.relpath(dest, ROOT)})")
    assert not bad, f"{page_id(page)}:\n  " + "\n  ".join(bad)


def _outside(target):
    """Whether a link leaves the repository: another site, an absolute
    path, or a relative one climbing out of the tree."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return True
    dest = os.path.normpath(os.path.join(ROOT, target.partition("#")[0]))
    return os.path.relpath(dest, ROOT).startswith("..")


def test_readme_is_a_front_page():
    """README.md links only into the repository, names no other site, and
    stays short (the rest lives in docs/)."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    outside = [t for _, t in _links(README) if _outside(t)]
    assert not outside, outside
    assert "://" not in text, "README.md names an address outside the repository"
    size = len(text.encode())
    assert size < 8192, f"README.md is {size} bytes (a front page: under 8 KB)"
