"""The folders are the layers: imports go one way, with no circles (docs/ARCHITECTURE.md).

Every import statement of every module is read, function-level ones included; imports under
``if TYPE_CHECKING:`` are type hints that never run, and are the only ones left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (importer prefix, forbidden prefixes): the direction rules of docs/ARCHITECTURE.md.
RULES = [
    ("viz_core.lessons", ("viz_core.backends", "viz_core.loading")),
    ("viz_core.analysis", ("viz_core.backends", "viz_core.loading")),
    ("viz_core.figures", ("viz_core.capture", "viz_core.backends", "viz_core.loading")),
    ("viz_core.model", ("viz_core.backends", "viz_core.loading", "viz_core.analysis",
                        "viz_core.figures")),
    ("viz_core.capture", ("viz_core.backends", "viz_core.loading")),
    ("viz_core.backends", ("viz_core.loading", "viz_core.figures")),
    ("viz_core", ("attention_lab", "ui", "streamlit", "pages")),
]
# What a page may import of the library: the public face and its namespaces.
PAGE_ALLOWED = ("viz_core", "viz_core.errors", "viz_core.figures", "viz_core.analysis",
                "viz_core.lessons", "viz_core.decoding", "viz_core.atlas", "viz_core.i18n")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, root: Path, modules: set[str]) -> set[str]:
    """Modules this file imports at run time (top level or inside functions), resolved:
    ``from pkg import name`` counts as ``pkg.name`` when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in modules else target)
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    files = [p for pkg in packages for p in (root / pkg).rglob("*.py")]
    modules = {module_name(p, root) for p in files}
    return {module_name(p, root): imports_of(p, root, modules) for p in files}


def violations(graph: dict[str, set[str]], rules=RULES) -> list[str]:
    out = []
    for importer, targets in graph.items():
        for prefix, forbidden in rules:
            if importer == prefix or importer.startswith(prefix + "."):
                out += [f"{importer} imports {t}" for t in targets
                        if any(t == f or t.startswith(f + ".") for f in forbidden)]
    return sorted(out)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT, ("viz_core", "attention_lab"))


def test_no_import_circles(graph):
    assert cycles(graph) == []


def test_imports_go_one_way(graph):
    assert violations(graph) == []


def test_viz_core_never_imports_streamlit_or_the_app(graph):
    core = {m: t for m, t in graph.items() if m.startswith("viz_core")}
    assert not [(m, t) for m, ts in core.items() for t in ts
                if t.split(".")[0] in {"streamlit", "attention_lab", "ui", "pages"}]


def test_pages_use_only_the_public_face_and_ui():
    modules = {module_name(p, ROOT) for p in (ROOT / "viz_core").rglob("*.py")}
    bad = []
    for page in sorted((ROOT / "pages").glob("*.py")):
        for target in imports_of(page, ROOT, modules):
            if target.split(".")[0] == "viz_core" and not any(
                    target == a or (a != "viz_core" and target.startswith(a + "."))
                    for a in PAGE_ALLOWED):
                bad.append(f"{page.name} imports {target}")
            if target.split(".")[0] == "ui":
                bad.append(f"{page.name} imports the old top-level ui package")
    assert bad == []


def test_public_face_exports_what_a_notebook_calls():
    import viz_core as vc

    for name in ("load", "AttentionTrace", "BlockTrace", "BeamTree", "VizError", "InputError",
                 "trace_npz", "figures", "analysis", "lessons"):
        assert name in vc.__all__ and getattr(vc, name) is not None
    assert callable(vc.figures.block_heatmap)


def test_no_module_left_at_the_root_but_the_face_and_errors():
    assert sorted(p.name for p in (ROOT / "viz_core").glob("*.py")) == ["__init__.py", "errors.py"]


def test_every_folder_states_its_contract():
    for folder in sorted(p for p in (ROOT / "viz_core").iterdir()
                         if p.is_dir() and (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{folder.name}/__init__.py has no contract docstring"


# The checks themselves can fail: a tiny package with a circle and a wrong-way import.
def test_the_checks_find_a_circle_and_a_wrong_way_import(tmp_path):
    pkg = tmp_path / "viz_core"
    for sub in ("lessons", "backends"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text('"""x"""\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "lessons" / "a.py").write_text("def f():\n    from ..backends import b\n")
    (pkg / "backends" / "b.py").write_text("from ..lessons import a\n")
    (pkg / "lessons" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..backends import b\n")
    g = import_graph(tmp_path, ("viz_core",))
    assert cycles(g) == [["viz_core.backends.b", "viz_core.lessons.a"]]
    assert violations(g) == ["viz_core.lessons.a imports viz_core.backends.b"]


# ---- no reach into private state across layers --------------------------------------------
def _private(name: str) -> bool:
    # "_" is gettext's translate function (viz_core/i18n), public by convention
    return (name.startswith("_") and name != "_"
            and not (name.startswith("__") and name.endswith("__")))


def _folder(target: str, root: Path) -> str:
    """The folder (package) a module of ours lives in: a package is its own folder."""
    is_package = (root / Path(*target.split(".")) / "__init__.py").is_file()
    return target if is_package else target.rpartition(".")[0]


def private_reaches(root: Path, packages: tuple[str, ...]) -> list[str]:
    """``getattr(x, "_name", ...)`` (or hasattr / setattr) with a private literal name on
    anything but self / cls, and ``from module import _name`` from another folder (layer)."""
    found = []
    for path in sorted(p for pkg in packages for p in (root / pkg).rglob("*.py")):
        me = module_name(path, root)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr", "setattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str) and _private(node.args[1].value)
                    and not (isinstance(node.args[0], ast.Name)
                             and node.args[0].id in ("self", "cls"))):
                found.append(f"{where}: {node.func.id}(..., {node.args[1].value!r})")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] not in packages or _folder(target, root) == package:
                    continue
                found += [f"{where}: imports {a.name} from {target}"
                          for a in node.names if _private(a.name)]
    return found


# A reach into a third party's private member, not into state of ours: allowed, with why.
ALLOWED_REACHES = {
    "viz_core/decoding/steppers.py: hasattr(..., '_reorder_cache')":
        "transformers' own cache-reordering hook on its models (older releases); not ours",
}


def test_no_reach_into_private_state_across_layers():
    found = private_reaches(ROOT, ("viz_core", "attention_lab", "pages"))
    assert [r for r in found if r not in ALLOWED_REACHES] == []
    assert set(ALLOWED_REACHES) <= set(found), "an allowed reach is gone: drop it from the list"


def test_the_check_finds_a_private_reach(tmp_path):
    pkg = tmp_path / "viz_core"
    for sub in ("analysis", "capture"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text('"""x"""\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "capture" / "trace.py").write_text("def _source(b):\n    return b\n")
    (pkg / "analysis" / "util.py").write_text("def _helper():\n    pass\n")
    (pkg / "analysis" / "qk.py").write_text(
        "from ..capture.trace import _source\n"  # another folder: a reach
        "from .util import _helper\n"  # the same folder: fine
        "from . import util\n"
        "def f(self, block):\n"
        "    getattr(self, '_cache', None)\n"  # its own state: fine
        "    getattr(block, '__dict__')\n"  # a dunder: fine
        "    return getattr(block, '_source', None)\n")  # a private literal: a reach
    assert private_reaches(tmp_path, ("viz_core",)) == [
        "viz_core/analysis/qk.py: imports _source from viz_core.capture.trace",
        "viz_core/analysis/qk.py: getattr(..., '_source')",
    ]


def ui_nodes():
    """(where, node) for every AST node of the app's UI code: app.py, pages/, attention_lab/ui
    (where: "path:line" from the repository root)."""
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
              *(ROOT / "attention_lab" / "ui").rglob("*.py")]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            yield f"{p.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}", node


def method_call(node, attr: str | None = None) -> bool:
    """Whether ``node`` calls a method (``x.attr(...)``; any method when attr is None)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        (attr is None or node.func.attr == attr)


def test_no_spinner_outlives_a_stopped_run():
    """ui.errors.reported stops the run after its message, and a stopped run sends nothing
    more: a spinner entered before it (``with st.spinner(...), reported(...)`` or a
    ``reported`` inside a spinner's block) would end unseen and spin on beside the error.
    So reported always encloses the spinner (tests/browser/test_browser.py watches one)."""
    def name(call):
        f = call.func
        return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")

    found = []
    for where, node in ui_nodes():
        if not isinstance(node, ast.With):
            continue
        calls = [i.context_expr for i in node.items if isinstance(i.context_expr, ast.Call)]
        names = [name(c) for c in calls]
        spins = [i for i, n in enumerate(names) if n in ("spinner", "model_spinner")]
        if not spins:
            continue
        inner = [name(c) for stmt in node.body for w in ast.walk(stmt)
                 if isinstance(w, ast.With) for c in (i.context_expr for i in w.items)
                 if isinstance(c, ast.Call)]
        if "reported" in names[spins[0]:] or "reported" in inner:
            found.append(where)
    assert found == []


def test_the_app_stops_through_state_stop():
    """A run's address changes are sent at its end (ui/address.send_url), and a stopped run
    sends nothing more: so the app stops with state.stop (address.stop), which sends them
    first; a bare st.stop() would lose the settings its run chose (their address keys)."""
    bare = [where for where, n in ui_nodes() if not where.startswith("attention_lab/ui/address.py")
            and method_call(n, "stop") and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "st"]
    assert bare == []


def test_shown_text_wraps():
    """st.code is how the app shows user and model text literally (never as markup): a long
    line must wrap in its box, not hide past its right edge behind a scroll bar (a beam
    search output, the unknown words of a long input)."""
    unwrapped = [where for where, n in ui_nodes() if method_call(n, "code")
                 and not any(k.arg == "wrap_lines" and isinstance(k.value, ast.Constant)
                             and k.value.value is True for k in n.keywords)]
    assert unwrapped == []


def test_empty_pickers_say_choose_in_the_readers_language():
    """An emptied st.multiselect (or a selectbox with index=None) shows its placeholder, which
    is Streamlit's English "Choose options" unless the app gives one (translated)."""
    bare = []
    for where, n in ui_nodes():
        if not method_call(n):
            continue
        keys = {k.arg: k.value for k in n.keywords}
        empty_select = n.func.attr == "selectbox" and isinstance(keys.get("index"),
                                                                 ast.Constant) \
            and keys["index"].value is None
        if (n.func.attr == "multiselect" or empty_select) and "placeholder" not in keys:
            bare.append(where)
    assert bare == []


def _binds_underscore(fn) -> bool:
    """Whether function ``fn`` binds ``_`` in its own scope (``x, _ = pair``, ``for _ in``,
    ``with ... as _``): not in a nested function or a comprehension, which have their own."""
    todo = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store):
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def gettext_shadows(paths) -> list[str]:
    """A function that binds ``_`` (``x, _ = pair``) and calls the catalogue's ``_("...")``:
    there ``_`` is a local, so the call fails with "object is not callable", and only in a
    run that reaches it (the Information flow page's MLP hovers once did, in every
    language)."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id == "_"]
            if calls and _binds_underscore(fn):
                found.append(f"{path.relative_to(ROOT).as_posix()}: {fn.name}")
    return found


def test_no_module_that_translates_rebinds_its_underscore(tmp_path):
    paths = sorted(p for pkg in ("viz_core", "attention_lab", "pages")
                   for p in (ROOT / pkg).rglob("*.py"))
    assert gettext_shadows(paths) == []
    bad = ROOT / "tests" / "artifacts" / "_shadow_probe.py"  # the check can fail
    bad.parent.mkdir(exist_ok=True)
    try:
        bad.write_text("from viz_core.i18n import _\n\ndef f(p):\n    a, _ = p\n"
                       "    return _('x') + a\n\ndef g(p):\n    return [_(a) for a, _ in p]\n")
        assert gettext_shadows([bad]) == ["tests/artifacts/_shadow_probe.py: f"]
    finally:
        bad.unlink()
