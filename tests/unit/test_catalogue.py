"""The interface's message catalogue (viz_core/i18n, locale/): every string the code marks
with _() / N_() / ngettext() has a zh translation with the same placeholders, nothing fuzzy;
no user-visible literal is left unmarked in an st.* call; every fragment sets the language.

Extraction is Babel's own (babel.cfg, as `make messages` runs it), so a string added to the
code without a translation fails here before anyone sees English on a Chinese page."""

import ast
import re
import threading
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from tests.support.language import speaking
from viz_core import i18n

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None}
PLACEHOLDER = re.compile(r"(?<!\{)\{([^{}]*)\}(?!\})")


def extracted(root: Path = ROOT) -> dict[str, str]:
    """msgid (or (singular, plural)) -> 'file:line' of every marked string under `root`."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    found = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(root), method_map, options_map, keywords=KEYWORDS):
        found.setdefault(message, f"{filename}:{lineno}")
    return found


def placeholders(text: str) -> list[str]:
    return sorted(set(PLACEHOLDER.findall(text)))


def catalogue_problems(messages: dict, po_file: Path) -> list[str]:
    """What is wrong with `po_file` for these msgids: missing, empty, fuzzy, or placeholders
    that differ between msgid and msgstr."""
    with po_file.open("rb") as f:
        catalog = read_po(f)
    problems = []
    for msgid, where in sorted(messages.items(), key=lambda kv: str(kv[0])):
        key = msgid[0] if isinstance(msgid, tuple) else msgid
        entry = catalog.get(key)
        if entry is None:
            problems.append(f"missing: {key!r} ({where}); run `make messages` and translate it")
            continue
        strings = entry.string if isinstance(entry.string, tuple) else (entry.string,)
        if entry.fuzzy or not all(s and s.strip() for s in strings):
            problems.append(f"untranslated or fuzzy: {key!r} ({where})")
            continue
        source = msgid[-1] if isinstance(msgid, tuple) else msgid
        for s in strings:
            if placeholders(s) != placeholders(source):
                problems.append(f"placeholders differ: {key!r} {placeholders(source)} -> "
                                f"{s!r} {placeholders(s)}")
    return problems


def test_every_marked_string_has_a_zh_translation():
    messages = extracted()
    assert len(messages) > 100  # the extraction found the interface
    assert catalogue_problems(messages, i18n.po_path("zh")) == []


def test_the_check_finds_a_missing_an_empty_and_a_broken_translation(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "p.py").write_text(
        'from viz_core.i18n import _\n_("Layer")\n_("Never translated")\n_("Head {head}")\n'
        '_("Empty one")\n', encoding="utf-8")
    po = tmp_path / "zh.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
                  'msgid "Layer"\nmsgstr "层"\n\nmsgid "Head {head}"\nmsgstr "注意力头 {h}"\n\n'
                  'msgid "Empty one"\nmsgstr ""\n', encoding="utf-8")
    problems = catalogue_problems(extracted(tmp_path), po)
    assert [p.split(":")[0] for p in problems] == ["untranslated or fuzzy", "placeholders differ",
                                                  "missing"]


def test_translation_is_per_context_not_global():
    seen = {}

    def other_session():
        i18n.set_language("zh")
        seen["zh"] = i18n._("Layers")

    i18n.set_language("en")
    t = threading.Thread(target=other_session)
    t.start()
    t.join()
    assert seen["zh"] == "层数"
    assert i18n._("Layers") == "Layers"  # this thread's language is untouched
    assert i18n.normalize("zh-CN") == "zh" and i18n.normalize("en-US") == "en"
    assert i18n.normalize("fr") is None


# st.* calls whose first argument (or help=/placeholder=/label=/text=) a user reads
SHOWN = {"title", "header", "subheader", "markdown", "caption", "info", "warning", "error",
         "success", "toast", "expander", "button", "checkbox", "radio", "selectbox",
         "multiselect", "slider", "number_input", "text_input", "text_area", "toggle",
         "metric", "download_button", "spinner", "select_slider", "popover", "notice",
         "url_select", "url_number", "url_text_box", "bounded_int", "pills",
         "segmented_control", "form_submit_button", "progress", "file_box"}
WORDS = re.compile(r"[A-Za-z]{3,}")


def unmarked_literals(path: Path) -> list[str]:
    """Calls that show an English literal the catalogue never sees (not wrapped in _())."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name not in SHOWN or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                                 and f.value.id in ("log", "logger", "logging")):
            continue
        args = node.args[:1] + [k.value for k in node.keywords
                                if k.arg in ("help", "placeholder", "label", "text")]
        for a in args:
            text = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else (
                "".join(v.value for v in a.values if isinstance(v, ast.Constant))
                if isinstance(a, ast.JoinedStr) else "")
            if len(WORDS.findall(text)) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{a.lineno}: {text[:50]!r}")
    return found


# Files whose strings are not yet wrapped: this list only shrinks.
NOT_YET: set[str] = set()


def ui_files() -> list[Path]:
    return sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
                   *(ROOT / "attention_lab" / "ui").rglob("*.py")])


def test_no_user_visible_literal_is_left_unmarked():
    found = [f for p in ui_files() if str(p.relative_to(ROOT)) not in NOT_YET
             for f in unmarked_literals(p)]
    assert found == []
    still = [p for p in NOT_YET if unmarked_literals(ROOT / p)]
    assert sorted(still) == sorted(NOT_YET), "a file is done: drop it from NOT_YET"


def _literal_text(node: ast.AST) -> str:
    """The string literals of an expression in source order; a call (such as _()) reads as
    "#", so the text it returns is not the literal's."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else "#"
    if isinstance(node, ast.BinOp):
        return _literal_text(node.left) + _literal_text(node.right)
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal_text(v) for v in node.values)
    return "#"


def english_in_latex(source: str) -> list[str]:
    """The English words in each st.latex formula's \\text{...} parts, where a formula has two
    or more (one, such as \\text{base}, is a symbol's name): those go through _() too."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "latex" and node.args):
            formula = _literal_text(node.args[0])
            words = WORDS.findall(" ".join(re.findall(r"\\text\{([^}]*)\}", formula)))
            if len(words) >= 2:
                found.append(f"{node.lineno}: {words}")
    return found


def test_no_english_words_in_formulas():
    found = [f"{p.relative_to(ROOT)}:{f}" for p in ui_files()
             for f in english_in_latex(p.read_text(encoding="utf-8"))]
    assert found == []
    # the Inside a head formula as it was, and as it is
    assert english_in_latex('st.latex(r"M_j = \\begin{cases}-\\infty & \\text{key } j '
                            '\\text{ blocked}" r"\\\\ 0 & \\text{otherwise}\\end{cases}")')
    assert not english_in_latex('st.latex(r"-\\infty & \\text{" + _("key j blocked") + r"}'
                                '\\\\ 0 & \\text{" + _("otherwise") + r"}")')


def test_every_fragment_sets_the_language():
    """A fragment rerun skips the page's top code, so each uses ui.lang.fragment, which
    sets the session's language first; a bare @st.fragment would speak English."""
    bare = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in ui_files()
            if p.name != "lang.py" for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.Attribute) and n.attr == "fragment"
            and isinstance(n.value, ast.Name) and n.value.id == "st"]
    assert bare == []


def _binds_and_calls_underscore(tree) -> list[int]:
    """Lines of functions that both assign ``_`` (``_, n = shape``, ``for _ in``) and call
    ``_()``: the assignment makes ``_`` local, so the translate call breaks at run time.
    Comprehension variables live in their own scope and do not count."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        comprehension_names = {id(n) for c in ast.walk(fn)
                               if isinstance(c, (ast.ListComp, ast.SetComp, ast.DictComp,
                                                 ast.GeneratorExp))
                               for gen in c.generators for n in ast.walk(gen.target)}
        nodes = list(ast.walk(fn))
        binds = any(isinstance(n, ast.Name) and n.id == "_" and isinstance(n.ctx, ast.Store)
                    and id(n) not in comprehension_names for n in nodes)
        calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id == "_" for n in nodes)
        if binds and calls:
            found.append(fn.lineno)
    return found


def test_no_function_shadows_the_translate_function():
    found = [f"{p.relative_to(ROOT)}:{line}"
             for p in sorted([*ROOT.glob("*.py"), *(ROOT / "pages").glob("*.py"),
                              *(ROOT / "attention_lab").rglob("*.py"),
                              *(ROOT / "viz_core").rglob("*.py")])
             for line in _binds_and_calls_underscore(ast.parse(p.read_text(encoding="utf-8")))]
    assert found == []
    bad = ast.parse("def f(shape):\n    _, n = shape\n    return _('x')\n")
    assert _binds_and_calls_underscore(bad) == [1]  # the check can fail


def test_table_headers_are_shown_in_the_sessions_language():
    """ui.charts.table: a known column's header goes through the catalogue as a column_config
    label (the data keep their names: row clicks and downloads read them); a caller's own
    label wins; unknown columns are left alone."""
    import pandas as pd

    from attention_lab.ui.charts import COLUMN_LABELS, table

    seen = {}

    class Container:
        def dataframe(self, data, **kwargs):
            seen.update(kwargs, data=data)

    frame = pd.DataFrame({"layer": [0], "entropy": [1.0], "mystery": [2]})
    token = i18n._language.set("zh")
    try:
        table(frame, container=Container(), column_config={"layer": "L"}, hide_index=True)
        entropy = i18n._(COLUMN_LABELS["entropy"])
    finally:
        i18n._language.reset(token)
    assert seen["column_config"] == {"layer": "L", "entropy": entropy} and entropy == "熵"
    assert list(seen["data"].columns) == ["layer", "entropy", "mystery"]
    assert seen["hide_index"] is True


def test_a_message_inside_a_message_is_translated_too():
    """A patching result's metric name is an i18n.Message (English as data), and so is the
    warning that names it: both read in the session's language where shown."""
    from attention_lab.ui.errors import translated
    from viz_core.analysis.patching import METRIC_LOGIT, SMALL_GAP_WARNING

    name = i18n.Message(METRIC_LOGIT, token="'king'", position=9)
    warning = i18n.Message(SMALL_GAP_WARNING, name=name, clean=1.0, corrupted=0.99)
    assert str(name) == "logit 'king' at 9" and "logit 'king' at 9" in warning
    with speaking("zh"):
        assert translated(name) == "位置 9 处的 logit 'king'"
        shown = translated(warning)
        assert "位置 9 处的 logit 'king'" in shown and "at 9" not in shown
    assert translated(warning) == str(warning)


def test_the_word_a_message_names_is_translated_too():
    """The text a cut or empty input names ("prompt", "input", "target") is a catalogue
    entry: a cut prompt of the decoder-only lm read "prompt有 90 个词元" in zh."""
    import viz_core as vc
    from attention_lab.ui.errors import translated

    trace = vc.load("lm").trace(" ".join(["the cat sat"] * 30), max_new=0)
    with speaking("zh"):
        shown = [translated(w) for w in trace.warnings]
    assert shown and all("prompt" not in w for w in shown), shown
    assert any("提示词" in w for w in shown), shown
    # a token box's name: patching's "target token" read "target token 'the cat' 对这个模型…"
    lm = vc.load("lm")
    for kwargs, word in (({"token": "the cat"}, "目标词元"),
                         ({"token": "cats", "against": "zzzxqj"}, "对比词元")):
        for run in (lambda kwargs=kwargs: lm.patch("the small black cats", "the big black cats", **kwargs),
                    lambda kwargs=kwargs: lm.logit_attribution("the small black cats", **kwargs)):
            with pytest.raises(vc.InputError) as err:
                run()
            with speaking("zh"):
                said = translated(err.value)
            assert word in said and "token" not in said, said


def test_an_error_retold_with_a_hint_and_a_cut_pair_read_in_chinese():
    """Circuits in zh showed 'The clean and corrupted inputs give the same logit … (有 2 个词
    不在这个模型的词表中…)': the retold error was filled in as English text; and a long pair's
    cut notice read 'clean text有 400 个词元'."""
    import viz_core as vc
    from attention_lab.ui.errors import translated

    lm = vc.load("lm")
    with pytest.raises(vc.InputError) as err:
        lm.edge_attribution("the 猫 sat", "the 狗 sat")
    with speaking("zh"):
        said = translated(err.value)
    assert "clean" not in said and "词表" in said and "干净" in said, said
    long = " ".join(["the cat sat"] * 30)
    result = lm.edge_attribution(long, long.replace("cat", "dog", 1))
    with speaking("zh"):
        cut = [translated(w) for w in result.warnings]
    assert cut and not any("text" in w for w in cut) and any("干净文本" in w for w in cut), cut


# Functions that fill a word naming what they read into their messages ("The {what} is
# empty", "The query position 9 is out of range"): ui.errors.translated translates it by
# the catalogue, so a word passed as a plain literal must be a catalogue entry.
NAMING = {"check_position", "whole", "normalise_position", "encode_text", "token_id",
          "typed_text", "check_same_length"}


def unlisted_words(path: Path, known: set[str], root: Path = ROOT) -> list[str]:
    """Plain string literals passed to a NAMING function that have no catalogue entry."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) not in NAMING:
            continue
        for a in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value not in known:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {a.value!r}")
    return found


def test_every_word_a_message_names_is_in_the_catalogue(tmp_path):
    """Attention flow's "output position" and the logit lens's "number of top tokens k" were
    passed unmarked: English inside a Chinese message, as patching's "target token" was."""
    with (ROOT / "locale/zh_CN/LC_MESSAGES/attention_lab.po").open("rb") as f:
        known = {m.id for m in read_po(f) if m.id and m.string}
    files = [*sorted((ROOT / "viz_core").rglob("*.py")), *ui_files()]
    assert [w for p in files for w in unlisted_words(p, known)] == []
    bad = tmp_path / "bad.py"
    bad.write_text('check_position(p, n, "query position")\nm.encode_text(t, N_("input"))\n'
                   'whole(k, what="the count")\nm.token_id(x, "target token")\n')
    assert [w.split(":")[1] for w in unlisted_words(bad, {"target token"}, tmp_path)] == \
        ["1", "3"]


def untranslatable_errors(path: Path, root: Path = ROOT) -> list[str]:
    """Raises of the app's own errors whose message cannot be translated where shown: an
    f-string, a .format() call, a + or a bare literal in place of an N_() template with its
    values as keywords (viz_core/errors.py)."""
    from viz_core import errors as E

    names = {n for n, c in vars(E).items() if isinstance(c, type) and issubclass(c, E.VizError)}
    names |= {"AtlasError", "AtlasInputError"}  # the atlas's own, raised the same way
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) not in names:
            continue
        a = node.args[0]
        if (isinstance(a, (ast.JoinedStr, ast.BinOp)) or
                (isinstance(a, ast.Constant) and isinstance(a.value, str)) or
                (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
                 and a.func.attr == "format")):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(a)[:60]}")
    return found


def test_every_error_the_user_reads_can_be_translated():
    files = [*sorted((ROOT / "viz_core").rglob("*.py")), *ui_files(),
             *sorted((ROOT / "attention_lab").glob("*.py"))]
    assert [f for p in files for f in untranslatable_errors(p)] == []


def test_the_error_check_finds_each_untranslatable_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('raise InputError(f"no {x}")\nraise CheckpointError("plain")\n'
                   'raise InputError("a {x}".format(x=1))\nraise ModelLoadError("a" + b)\n'
                   'raise InputError(N_("fine {x}"), x=1)\nraise InputError(CONSTANT, x=1)\n')
    assert [f.split(":")[1] for f in untranslatable_errors(bad, tmp_path)] == ["1", "2", "3",
                                                                               "4"]


def test_plotlys_own_words_are_the_keys_of_the_bundled_plotly():
    """The chart config's dictionary (attention_lab.ui.charts.PLOTLY_WORDS) translates Plotly's
    toolbar and notices only if its keys are the very strings the Plotly that Streamlit ships
    looks up; each is in that bundle, and each has its zh translation."""
    from pathlib import Path

    import streamlit

    from attention_lab.ui.charts import PLOTLY_WORDS
    from tests.support.language import in_chinese

    bundles = list((Path(streamlit.__file__).parent / "static").rglob("PlotlyChart*.js"))
    assert bundles, "Streamlit's Plotly bundle not found"
    source = "".join(b.read_text(encoding="utf-8", errors="replace") for b in bundles)
    for word in PLOTLY_WORDS:
        assert f"`{word}`" in source or f'"{word}"' in source or f"'{word}'" in source, word
        assert in_chinese(word) != word, word
