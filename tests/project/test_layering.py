"""tools/check_layering.py: the real tree keeps its layering, and a small
tree that breaks every rule fails with each break named, so the check
cannot pass by finding nothing."""
import os
import subprocess
import sys
import textwrap

from _proc import ROOT

SCRIPT = os.path.join(ROOT, "tools", "check_layering.py")

# Spelled apart so that this file's own strings are not imports of it.
BENCH = "bench" + "marks"


def check(root, *args):
    return subprocess.run([sys.executable, SCRIPT, "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120)


def write(root, files):
    for path, text in files.items():
        full = root / path.replace("@B@", BENCH)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(textwrap.dedent(text).lstrip().replace("@B@", BENCH))


# A tree that keeps every rule.
CLEAN = {
    "csrc/core/include/ttpu.h": "/* ttpu.h - the public API. */\n",
    "csrc/core/base/status.c": '#include "ttpu.h"\n',
    "csrc/core/hlo/ttpu_hlo.h": '/* ttpu_hlo.h - the builder (internal). */\n#include "ttpu.h"\n',
    "csrc/core/ops/complex.h": """
        /* complex.h - how calls with complex operands are lowered (internal to
         * ops/). */
        #include "../hlo/ttpu_hlo.h"
    """,
    "csrc/core/ops/lower.c": '#include "complex.h"\n#include <string.h>\n',
    "csrc/core/prog/plan.h": '/* plan.h - a planned call (internal). */\n#include "../ops/ttpu_lower.h"\n',
    "csrc/core/exec/internal.h": """
        /* internal.h - the runtime's narrow interface for the layers below
         * exec/: the runtime's struct stays private to exec/ (exec/runtime.h). */
        #include "../prog/plan.h"
    """,
    "csrc/core/exec/runtime.h": '/* runtime.h - the runtime (private to exec/). */\n#include "internal.h"\n',
    "csrc/core/prog/storage.h": "/* storage.h - storages (internal to the engine: prog/ and above). */\n",
    "csrc/core/exec/run.c": """
        #include "runtime.h"
        #include "../cache/cache.h"
        #include "../prog/storage.h"
    """,
    "csrc/core/coll/coll.c": '#include "ttpu.h"\n#include "../prog/plan.h"\n#include "../exec/internal.h"\n',
    "csrc/torch/aten/kernel.cpp": '#include <torch/library.h>\n#include "ttpu.h"\n#include "aten/ops.h"\n',
    "csrc/torch/aten/ops.h": "#pragma once\n",
    "torchtpu/__init__.py": "import os\nfrom . import debug\n",
    "tests/test_a.py": "import torchtpu\nimport helper_mod\n",
    "tests/helper_mod.py": "X = 1\n",
    # a test in a layer's folder, importing a helper of tests/
    "tests/ops/test_d.py": "import torchtpu\nimport helper_mod\n",
    "@B@/soak_run.py": "import torchtpu\n",
}

# One break of each rule, added to CLEAN.
BROKEN = {
    "csrc/core/prog/plan.h": '/* plan.h (internal). */\n#include "../exec/internal.h" /* a layer up */\n',
    "csrc/core/prog/assemble.c": '// assemble.c\n#include "plan.h"\n#include "../ops/complex.h"\n',
    "csrc/core/ops/table.c": '#include "ttpu.h"\n#include "../prog/plan.h"\n',
    "csrc/core/aot/aot.c": '#include "../prog/plan.h"\n#include "../exec/internal.h"\n',
    "csrc/core/coll/send.c": '#include "../exec/runtime.h"\n',
    "csrc/core/hlo/print.c": '#include <vector>\n#include <ATen/ATen.h>\n#include "../../torch/aten/ops.h"\n',
    "csrc/core/include/ttpu_more.h": '#include "ttpu.h"\n#include "../base/env.h"\n',
    "csrc/core/fresh/new.c": '#include "ttpu.h"\n',
    "csrc/torch/aten/bad.cpp": '#include "ttpu.h"\n#include "../../core/exec/runtime.h"\n',
    "torchtpu/debug.py": "from tests import helper_mod\n",
    "torchtpu/modes.py": "import ops.test_d\n",
    "tests/ops/test_e.py": "import os\nfrom @B@ import soak_run\n",
    "tests/test_b.py": """
        import os, sys
        import @B@.soak_run
        from @B@ import soak_run
        HERE = os.path.join(os.path.dirname(__file__), "..", "@B@")
        sys.path.insert(0, HERE)
        import soak_run as s
        CODE = '''
        import sys
        sys.path.append("@B@")
        import torch, soak_run
        '''
    """,
    "tests/test_c.py": """
        from test_b import HERE
        import sys
        sys.path.append(HERE)
        # a comment: import @B@ is not an import
    """,
}

# (path:line, words the line must hold) for each break above.
EXPECTED = [
    ("csrc/core/prog/plan.h:2", ['"../exec/internal.h"', "exec/ is a layer above prog/"]),
    ("csrc/core/prog/assemble.c:3", ["ops/complex.h is private to ops/"]),
    ("csrc/core/ops/table.c:2", ['"../prog/plan.h"', "prog/ is a layer above ops/"]),
    ("csrc/core/aot/aot.c:2", ['"../exec/internal.h"', "aot/ may include prog/, cache/"]),
    ("csrc/core/coll/send.c:1", ["of exec/, coll/ may include only exec/internal.h",
                                 "exec/runtime.h is private to exec/"]),
    ("csrc/core/hlo/print.c:1", ["<vector>", "C++ header"]),
    ("csrc/core/hlo/print.c:2", ["<ATen/ATen.h>", "PyTorch header"]),
    ("csrc/core/hlo/print.c:3", ["csrc/core never includes the PyTorch glue"]),
    ("csrc/core/include/ttpu_more.h:2", ["include/ may include nothing but its own files"]),
    ("csrc/core/fresh/new.c:1", ["csrc/core/fresh/", "needs an entry in ALLOWED"]),
    ("csrc/torch/aten/bad.cpp:2", ["csrc/core/exec/runtime.h", "only its public headers"]),
    ("torchtpu/debug.py:1", ["imports tests", "torchtpu/ never imports tests/ or benchmarks/"]),
    ("torchtpu/modes.py:1", ["imports ops.test_d (tests/ops/)"]),
    ("tests/ops/test_e.py:2", [f"imports {BENCH}", f"tests/ never imports {BENCH}/"]),
    ("tests/test_b.py:2", [f"imports {BENCH}.soak_run", f"tests/ never imports {BENCH}/"]),
    ("tests/test_b.py:3", [f"imports {BENCH}"]),
    ("tests/test_b.py:5", [f"adds {BENCH}/ to sys.path"]),
    ("tests/test_b.py:6", [f"imports soak_run ({BENCH}/soak_run.py)"]),
    ("tests/test_b.py:9", [f"adds {BENCH}/ to sys.path in a string of code"]),
    ("tests/test_b.py:10", ["imports soak_run", "in a string of code"]),
    ("tests/test_c.py:3", [f"adds {BENCH}/ to sys.path"]),
]


def test_the_repository_keeps_its_layering():
    r = check(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("layering: ok"), r.stdout


def test_a_tree_that_keeps_the_rules_passes(tmp_path):
    write(tmp_path, CLEAN)
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("layering: ok"), r.stdout


def test_each_break_is_reported_once_with_its_rule(tmp_path):
    write(tmp_path, dict(CLEAN, **BROKEN))
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for where, words in EXPECTED:
        found = [line for line in lines if line.startswith(where + ":")]
        assert len(found) == 1, (where, lines)
        for w in words:
            assert w in found[0], (w, found[0])
    assert len(lines) == len(EXPECTED), "\n".join(lines)


def test_list_prints_the_folder_graph_as_found(tmp_path):
    write(tmp_path, dict(CLEAN, **BROKEN))
    r = check(tmp_path, "--list")
    assert r.returncode == 0, r.stdout + r.stderr
    edges = {tuple(line.split()[:3:2]): line.split()[3:] for line in r.stdout.splitlines()[1:]}
    assert edges[("exec", "prog")] == ["2"]
    assert edges[("prog", "exec")] == ["1", "*"]
    assert edges[("coll", "exec")] == ["2", "*"]
    assert ("ops", "ops") not in edges
