"""The layering check: which part of the tree may depend on which.

    python3 tools/check_layering.py            # exit 1 and one line per violation
    python3 tools/check_layering.py --list     # csrc/core's folder graph as found
    python3 tools/check_layering.py --root DIR # check another tree (the tests do)

Run by `make layering` (which `make core` depends on) and by `./run.sh test`.
IREE's layering_check is the model: the rules are data, stated once below,
and a dependency that is not allowed there is an error, with no list of
known exceptions.

What is read: every #include "..." and #include <...> line of csrc/core and
csrc/torch (comments removed), and every import and sys.path change of the
Python under torchtpu/ and tests/, including the code that tests hand to a
subprocess as a string. Python 3 standard library only.
"""
import argparse
import ast
import os
import re
import sys

# ---------------------------------------------------------------- the rules

# csrc/core/<folder> -> what its files may include besides their own folder:
# a folder ("prog": any of its headers, unless one is private, below) or one
# header ("exec/internal.h": that header only). Every folder of csrc/core
# has an entry; a new folder fails the check until it gets one.
# coll/ stands beside exec/: it launches its programs through prog/ and
# reaches the runtime (locks, storages' versions, stats) through exec/'s
# narrow interface, exec/internal.h, and nothing else of exec/.
ALLOWED = {
    "exec":    ("prog", "ops", "hlo", "cache", "pjrt", "base", "include"),
    "coll":    ("prog", "exec/internal.h", "include"),
    "aot":     ("prog", "cache", "pjrt", "base", "include"),
    "prog":    ("ops", "hlo", "cache", "pjrt", "base", "include"),
    "ops":     ("hlo", "base", "include"),
    "cache":   ("pjrt", "base", "include"),
    "hlo":     ("base", "include"),
    "pjrt":    ("base", "include"),
    "base":    ("include",),
    "include": (),
}

# A header is private to folder X when the first comment of the file says
# so in a clause of its own: "(internal to ops/)", "; internal to ops/.",
# "(private to exec/: ...)". Only X's own files may include it. ("the
# runtime's struct stays private to exec/" describes something else and
# does not count.)
PRIVATE_MARK = re.compile(r"(?:^|[(;,:.]|\s-)\s*(?:internal|private) to (?:csrc/core/)?(\w+)/?",
                          re.IGNORECASE)

# The PyTorch glue may include, of the core, only its public headers.
GLUE_DIR = "csrc/torch"
CORE_DIR = "csrc/core"
GLUE_MAY_INCLUDE_FROM_CORE = "include"

# The C core stays C and knows nothing of PyTorch: no header from the glue,
# none of these, and no C++ header (<vector>, <cstdio>: a standard header
# without .h; or a .hpp/.hh/.hxx file).
CORE_FORBIDDEN_HEADER_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/", "pybind11/")
CXX_HEADER_SUFFIXES = (".hpp", ".hh", ".hxx", ".h++")
CORE_SOURCE_SUFFIXES = (".c", ".h")
CXX_SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++")

# Python: package -> the top-level directories of the repository it never
# imports (directly, by a module of theirs put on sys.path, or in code it
# runs in a subprocess).
PY_FORBIDDEN = {
    "torchtpu": ("tests", "benchmarks"),
    "tests": ("benchmarks",),
}

# ---------------------------------------------------------------- reading C


C_TOKENS = re.compile(r"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL)


def strip_comments(text):
    """text with every C/C++ comment blanked (newlines kept, so line
    numbers stay), string and character literals left as they are."""
    def blank(m):
        t = m.group(0)
        return re.sub(r"[^\n]", " ", t) if t[0] == "/" else t
    return C_TOKENS.sub(blank, text)


INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def includes(text):
    """(line, kind, name) of each #include; kind is '"' or '<'."""
    text = strip_comments(text)
    for m in INCLUDE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2).strip()


def top_comment(text):
    """The file's first comment, one line of words."""
    s = text.lstrip()
    if s.startswith("/*"):
        body = s[2:s.find("*/")] if "*/" in s else s[2:]
    elif s.startswith("//"):
        lines = []
        for line in s.splitlines():
            if not line.lstrip().startswith("//"):
                break
            lines.append(line.lstrip()[2:])
        body = "\n".join(lines)
    else:
        return ""
    body = re.sub(r"^[ \t]*\*", " ", body, flags=re.MULTILINE)
    return " ".join(body.split())


def is_cxx_or_torch_header(name):
    if name.startswith(CORE_FORBIDDEN_HEADER_PREFIXES):
        return "a PyTorch header"
    if name.endswith(CXX_HEADER_SUFFIXES) or "." not in name.rsplit("/", 1)[-1]:
        return "a C++ header"
    return None


class Tree:
    def __init__(self, root):
        self.root = os.path.abspath(root)

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            return f.read()

    def files(self, top, suffixes):
        base = os.path.join(self.root, top)
        found = []
        for d, dirs, names in os.walk(base):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
            for name in sorted(names):
                if name.endswith(suffixes):
                    found.append(os.path.relpath(os.path.join(d, name), self.root).replace(os.sep, "/"))
        return found


def norm(path):
    return os.path.normpath(path).replace(os.sep, "/")


def resolve(tree, src, name, search):
    """The repository path a quoted #include of `src` names: the first that
    exists of the including file's folder, then the folders in `search`, as
    the compiler looks. A header that does not exist still counts against
    the folder it names: "../exec/x.h" and "x.h" are taken from the
    including file's folder, "exec/x.h" from a folder of csrc/core that
    `search` reaches."""
    here = norm(os.path.join(os.path.dirname(src), name))
    candidates = [norm(os.path.join(d, name)) for d in search]
    for c in [here] + candidates:
        if tree.exists(c):
            return c
    if not name.startswith(".") and "/" in name:
        for c in candidates:
            if core_folder(c) not in (None, "", "include"):
                return c
    return here


def core_folder(path):
    """'prog' for csrc/core/prog/plan.h; '' for a file directly in
    csrc/core; None outside it."""
    if not path.startswith(CORE_DIR + "/"):
        return None
    parts = path[len(CORE_DIR) + 1:].split("/")
    return parts[0] if len(parts) > 1 else ""


def above(target, source):
    """Whether folder `target` may (transitively) include `source`: then it
    is a layer above it."""
    seen, todo = set(), [target]
    while todo:
        f = todo.pop()
        for dep in ALLOWED.get(f, ()):
            dep = dep.split("/")[0]
            if dep == source:
                return True
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return False


def core_rule(src_folder):
    allowed = ALLOWED[src_folder]
    names = ", ".join(a if "/" in a else a + "/" for a in allowed) or "nothing but its own files"
    return f"{src_folder}/ may include {names}"


class Checker:
    def __init__(self, root):
        self.tree = Tree(root)
        self.violations = []         # (path, line, message)
        self.edges = {}              # (from folder, to folder) -> [count, broken]
        self.n_c_files = 0
        self.n_includes = 0
        self.n_py_files = 0
        self._private = {}

    def report(self, path, line, what, rule):
        self.violations.append((path, line, f"{what}: {rule}"))

    def private_owner(self, header):
        """The folder a header declares itself private to, or None."""
        if header not in self._private:
            owner = None
            if header.endswith(".h") and self.tree.exists(header):
                owners = [m.group(1) for m in PRIVATE_MARK.finditer(top_comment(self.tree.read(header)))]
                owner = next((o for o in owners if o in ALLOWED), None)
            self._private[header] = owner
        return self._private[header]

    # ------------------------------------------------------------ the core

    def check_core(self):
        search = [CORE_DIR + "/include", CORE_DIR]
        unknown = set()
        cxx = CXX_SOURCE_SUFFIXES + CXX_HEADER_SUFFIXES
        for src in self.tree.files(CORE_DIR, CORE_SOURCE_SUFFIXES + cxx):
            folder = core_folder(src)
            if src.endswith(cxx):
                self.report(src, 1, "a C++ file", "csrc/core is C11, no C++")
                continue
            if folder not in ALLOWED:
                if folder not in unknown:
                    unknown.add(folder)
                    where = f"csrc/core/{folder}/" if folder else "a file directly in csrc/core/"
                    self.report(src, 1, where, "every folder of csrc/core needs an entry in "
                                "ALLOWED (tools/check_layering.py)")
                continue
            self.n_c_files += 1
            for line, kind, name in includes(self.tree.read(src)):
                self.n_includes += 1
                what = f"includes {kind}{name}{'>' if kind == '<' else kind}"
                bad = is_cxx_or_torch_header(name)
                if bad:
                    self.report(src, line, what,
                                f"csrc/core includes no C++ or PyTorch header ({name} is {bad})")
                    continue
                if kind == "<":
                    continue
                target = resolve(self.tree, src, name, search)
                self.check_core_edge(src, folder, line, what, target)

    def check_core_edge(self, src, folder, line, what, target):
        tfolder = core_folder(target)
        if tfolder is None:
            to = "csrc/torch" if target.startswith(GLUE_DIR + "/") else "outside csrc/core"
            self.edges.setdefault((folder, to), [0, True])[0] += 1
            if to == "csrc/torch":
                rule = "csrc/core never includes the PyTorch glue (csrc/torch)"
            else:
                rule = f"csrc/core includes only its own headers ({target} is outside it)"
            self.report(src, line, what, rule)
            return
        reasons = []
        if tfolder != folder:
            allowed = ALLOWED[folder]
            short = target[len(CORE_DIR) + 1:]
            if tfolder not in allowed and short not in allowed:
                narrow = [a for a in allowed if a.startswith(tfolder + "/")]
                if narrow:
                    why = f"of {tfolder}/, {folder}/ may include only {', '.join(narrow)}"
                elif above(tfolder, folder):
                    why = f"{tfolder}/ is a layer above {folder}/; {core_rule(folder)}"
                else:
                    why = core_rule(folder)
                reasons.append(why)
            owner = self.private_owner(target)
            if owner and owner != folder:
                reasons.append(f"{short} is private to {owner}/ (its first comment says so)")
        edge = self.edges.setdefault((folder, tfolder), [0, False])
        edge[0] += 1
        if reasons:
            edge[1] = True
            self.report(src, line, what + f" ({target[len(CORE_DIR) + 1:]})", "; ".join(reasons))

    # ------------------------------------------------------------ the glue

    def check_glue(self):
        search = [CORE_DIR + "/include", GLUE_DIR, "csrc", "."]
        public = f"{CORE_DIR}/{GLUE_MAY_INCLUDE_FROM_CORE}/"
        for src in self.tree.files(GLUE_DIR, (".cpp", ".cc", ".cxx", ".h", ".hpp")):
            self.n_c_files += 1
            for line, kind, name in includes(self.tree.read(src)):
                self.n_includes += 1
                if kind == "<":
                    continue
                target = resolve(self.tree, src, name, search)
                if target.startswith(CORE_DIR + "/") and not target.startswith(public):
                    self.report(src, line, f'includes "{name}" ({target})',
                                f"csrc/torch includes of the core only its public headers ({public}ttpu*.h)")

    # ------------------------------------------------------------ Python

    def check_python(self):
        # The modules a forbidden directory offers once it is on sys.path: its
        # .py files, its packages, and its folders of Python without an
        # __init__.py (namespace packages: tests/ops/, tests/runtime/, ...).
        modules = {}
        for top in sorted({d for ds in PY_FORBIDDEN.values() for d in ds}):
            names = modules[top] = {}
            full = os.path.join(self.tree.root, top)
            # As Python finds them: a package before a module of the same
            # name, a module before a namespace package.
            namespaces = {}
            for entry in sorted(os.listdir(full)) if os.path.isdir(full) else ():
                sub = os.path.join(full, entry)
                if entry.endswith(".py"):
                    names.setdefault(entry[:-3], f"{top}/{entry}")
                elif os.path.isfile(os.path.join(sub, "__init__.py")):
                    names[entry] = f"{top}/{entry}/"
                elif os.path.isdir(sub) and any(n.endswith(".py") for n in os.listdir(sub)):
                    namespaces[entry] = f"{top}/{entry}/"
            for name, where in namespaces.items():
                names.setdefault(name, where)
        stdlib = set(getattr(sys, "stdlib_module_names", ()))
        for pkg, forbidden in PY_FORBIDDEN.items():
            files = self.tree.files(pkg, (".py",))
            own = {os.path.splitext(os.path.basename(f))[0] for f in files}
            # top-level module name -> where it lives (a forbidden directory,
            # or a module of one)
            reach = {top: top + "/" for top in forbidden}
            for top in forbidden:
                for name, where in modules[top].items():
                    if name not in own | stdlib:
                        reach.setdefault(name, where)
            PyScan(self, pkg, files, forbidden, reach).run()
            self.n_py_files += len(files)

    def run(self):
        self.check_core()
        self.check_glue()
        self.check_python()
        seen, unique = set(), []
        for v in sorted(self.violations, key=lambda v: (v[0], v[1], v[2])):
            if v not in seen:
                seen.add(v)
                unique.append(v)
        self.violations = unique
        return self


IN_STRING = " in a string of code"


class PyScan:
    """What of one package's Python reaches a forbidden directory:
    `import benchmarks`, `from benchmarks.x import y`, a module of
    benchmarks/ imported by its own name, a path to benchmarks/ added to
    sys.path (also through a variable, or one imported from a sibling
    module), a call of a function of the package that adds one, and the
    same forms in code held in a string (a script run in a subprocess)."""

    IMPORT_LINE = re.compile(r"^[ \t]*(?:import[ \t]+([\w. \t,]*\w)|from[ \t]+(\w[\w.]*)[ \t]+import\b)",
                             re.MULTILINE)
    SYS_PATH_LINE = re.compile(r"sys\.path\.(?:insert|append|extend)[ \t]*\(([^\n]*)\)|"
                               r"sys\.path[ \t]*(?:\+=|\[[^\n\]]*\][ \t]*=)([^\n]*)")

    def __init__(self, checker, pkg, files, forbidden, reach):
        self.c, self.pkg, self.files = checker, pkg, files
        self.forbidden, self.reach = forbidden, reach
        word = "|".join(map(re.escape, forbidden))
        self.path_text = re.compile(rf"(?:^|[/\\]){word}(?:[/\\]|$)")
        self.path_word = re.compile(rf"\b(?:{word})\b", re.IGNORECASE)
        self.dirs = " or ".join(d + "/" for d in forbidden)
        self.tainted = {}            # file -> names bound to a forbidden path
        self.helpers = {}            # function adding a forbidden path -> "file:line"

    def run(self):
        """Parses only the files that can matter (the text names a forbidden
        directory or one of its modules, touches sys.path, or imports from
        such a file), which keeps the check fast enough for every build."""
        texts = {f: self.c.tree.read(f) for f in self.files}
        by_module = {os.path.splitext(os.path.basename(f))[0]: f for f in self.files}
        names = "|".join(map(re.escape, sorted(set(self.forbidden) | set(self.reach))))
        trigger = re.compile(rf"(?i:\b(?:{'|'.join(map(re.escape, self.forbidden))})\b)|sys\.path|"
                             rf"addsitedir|import_module|__import__|"
                             rf"^[ \t]*(?:import|from)[ \t][^\n]*\b(?:{names})\b", re.MULTILINE)
        wanted = {f for f, text in texts.items() if trigger.search(text)}
        changed = True
        while changed:
            changed = False
            for f, text in texts.items():
                if f not in wanted and any(by_module.get(a or b) in wanted
                                           for a, b in MODULE_IMPORT.findall(text)):
                    wanted.add(f)
                    changed = True
        index = {}
        for f in sorted(wanted):
            self.parse(f, texts[f], index)
        self.taint(index)
        for f, nodes in index.items():
            self.scan(f, nodes)
        if self.helpers:
            calls = re.compile(rf"\b(?:{'|'.join(map(re.escape, self.helpers))})[ \t]*\(")
            for f, text in texts.items():
                if f not in wanted and calls.search(text):
                    self.parse(f, text, index)
        for f, nodes in index.items():
            self.scan_helper_calls(f, nodes)

    def parse(self, f, text, index):
        try:
            index[f] = nodes_of(ast.parse(text, filename=f))
        except SyntaxError:
            self.scan_text(f, text, 1, 1)

    def taint(self, index):
        """Names bound to a path of a forbidden directory, across the
        package's modules (`from _proc import BENCHMARKS`), to a fixpoint."""
        by_module = {os.path.splitext(os.path.basename(f))[0]: f for f in index}
        changed = True
        while changed:
            changed = False
            for f, nodes in index.items():
                names = self.tainted.setdefault(f, set())
                for node, _ in nodes[ast.Assign] + nodes[ast.AnnAssign]:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    new = {n.id for n in targets if isinstance(n, ast.Name)} - names
                    if new and node.value is not None and self.is_path(f, node.value):
                        names |= new
                        changed = True
                for node, _ in nodes[ast.ImportFrom]:
                    if not node.level and node.module in by_module:
                        theirs = self.tainted.get(by_module[node.module], set())
                        new = {a.asname or a.name for a in node.names if a.name in theirs} - names
                        if new:
                            names |= new
                            changed = True

    def is_path(self, f, node):
        """Whether expression `node` is (or contains) a path of a forbidden
        directory; os.path.dirname(...) of one is its parent, not it."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return bool(self.path_text.search(node.value))
        if isinstance(node, ast.Name):
            return node.id in self.tainted.get(f, ())
        if isinstance(node, ast.Attribute) and any(node.attr in n for n in self.tainted.values()):
            return True
        if isinstance(node, ast.Call) and call_name(node) == "dirname":
            return False
        return any(self.is_path(f, child) for child in ast.iter_child_nodes(node))

    def hit(self, f, line, what):
        self.c.report(f, line, what, f"{self.pkg}/ never imports {self.dirs}")

    def check_module(self, f, line, name, note=""):
        top = name.split(".")[0]
        if top in self.reach:
            where = self.reach[top]
            self.hit(f, line, f"imports {name}" + ("" if where == top + "/" else f" ({where})") + note)

    def adds_to_sys_path(self, f, node):
        """Whether statement or call `node` puts a forbidden path on sys.path."""
        if isinstance(node, ast.Call):
            fn = node.func
            name = call_name(node)
            if (name in ("insert", "append", "extend") and is_sys_path(getattr(fn, "value", None))) or \
                    name == "addsitedir":
                return any(self.is_path(f, a) for a in node.args)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return any(is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in targets) \
                and self.is_path(f, node.value)
        return False

    def scan(self, f, nodes):
        for node, _ in nodes[ast.Import]:
            for a in node.names:
                self.check_module(f, node.lineno, a.name)
        for node, _ in nodes[ast.ImportFrom]:
            if not node.level and node.module:
                self.check_module(f, node.lineno, node.module)
        for node, _ in nodes[ast.Constant]:
            if isinstance(node.value, str):
                self.scan_text(f, node.value, node.lineno, getattr(node, "end_lineno", node.lineno))
        for node, _ in nodes[ast.Call]:
            if call_name(node) in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                self.check_module(f, node.lineno, node.args[0].value)
        for node, function in nodes[ast.Call] + nodes[ast.Assign] + nodes[ast.AugAssign]:
            if self.adds_to_sys_path(f, node):
                self.hit(f, node.lineno, f"adds {self.dirs} to sys.path")
                if function:
                    self.helpers.setdefault(function, f"{f}:{node.lineno}")

    def scan_helper_calls(self, f, nodes):
        for node, _ in nodes[ast.Call]:
            where = self.helpers.get(call_name(node))
            if where and not where.startswith(f + ":"):
                self.hit(f, node.lineno, f"calls {call_name(node)}(), which adds {self.dirs} "
                         f"to sys.path ({where})")

    def scan_text(self, f, text, first_line, last_line):
        """The same forms in code held in a string (or in a file that does
        not parse), found by their text. A line is counted back from the
        string's end, which a leading backslash-newline does not move."""
        def line_of(pos):
            return max(first_line, last_line - text.count("\n", pos))
        for m in self.IMPORT_LINE.finditer(text):
            if m.group(1):
                for part in m.group(1).split(","):
                    if part.split():
                        self.check_module(f, line_of(m.start()), part.split()[0], IN_STRING)
            else:
                self.check_module(f, line_of(m.start()), m.group(2), IN_STRING)
        for m in self.SYS_PATH_LINE.finditer(text):
            if self.path_word.search(m.group(1) or m.group(2) or ""):
                self.hit(f, line_of(m.start()), f"adds {self.dirs} to sys.path" + IN_STRING)


MODULE_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\w+)[ \t]+import|import[ \t]+(\w+))", re.MULTILINE)
INDEXED = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Call, ast.Constant)


def nodes_of(tree):
    """One walk of a module: {node type: [(node, name of the function it is
    in, or None)]} for the types the scan looks at."""
    found = {kind: [] for kind in INDEXED}
    stack = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        kind = type(node)
        if kind in found:
            found[kind].append((node, function))
        stack.extend((child, function) for child in ast.iter_child_nodes(node))
    for nodes in found.values():
        nodes.sort(key=lambda n: (getattr(n[0], "lineno", 0), getattr(n[0], "col_offset", 0)))
    return found


def call_name(call):
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")


def is_sys_path(node):
    return isinstance(node, ast.Attribute) and node.attr == "path" and \
        isinstance(node.value, ast.Name) and node.value.id == "sys"


# ---------------------------------------------------------------- main


def list_graph(checker):
    print("csrc/core folders: who includes whom (include lines; * = breaks the layering)")
    width = max((len(a) for a, _ in checker.edges), default=4)
    for (a, b), (count, broken) in sorted(checker.edges.items()):
        if a == b:
            continue
        print(f"  {a:<{width}} -> {b:<10} {count:4d}{'  *' if broken else ''}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository to check (default: the one this script is in)")
    ap.add_argument("--list", action="store_true",
                    help="print the dependency graph between csrc/core's folders, as found")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.root, CORE_DIR)):
        print(f"check_layering: {args.root} has no {CORE_DIR}/", file=sys.stderr)
        return 2
    checker = Checker(args.root).run()
    if args.list:
        list_graph(checker)
        return 0
    for path, line, message in checker.violations:
        print(f"{path}:{line}: {message}")
    if checker.violations:
        print(f"layering: {len(checker.violations)} violation(s) (rules: tools/check_layering.py)",
              file=sys.stderr)
        return 1
    print(f"layering: ok ({checker.n_c_files} C/C++ files, {checker.n_includes} includes, "
          f"{checker.n_py_files} Python files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
