"""Hostile inputs for the app and the models: (category, text) pairs.

Every page must answer each of these with its normal view or a clear message (st.error /
st.warning / st.info), never an exception. `SCRIPTS` are the ones the browser test types to
check that markup never executes and is shown literally.
"""

from __future__ import annotations

LONG_TEXT = ("the cat sat on the mat and the dog saw a red house . " * 1_900)[:100_000]

CORPUS: list[tuple[str, str]] = [
    # empty and whitespace-only
    ("empty", ""),
    ("empty", " "),
    ("empty", "\t\n\r\n  \t"),
    ("empty", "\u00a0\u2003\u3000"),  # no-break, em and ideographic spaces
    # size
    ("huge", LONG_TEXT),
    ("huge", "x" * 10_000),  # one 10 000-character word
    ("huge", "a " * 5_000),  # 5 000 one-letter words
    # emoji, zero-width joiners, combining marks
    ("emoji", "👩‍👩‍👧‍👦 family 🏳️‍🌈 flag"),
    ("emoji", "the cat 🐈 sat on the mat 🧶"),
    ("emoji", "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom"),
    ("emoji", "Z̴̧̛a̷̡͝l̸̨̛g̵̢͠o̶̡͘ text"),
    # right-to-left and bidi controls
    ("rtl", "مرحبا بالعالم"),
    ("rtl", "שלום עולם the cat"),
    ("rtl", "abc\u202edcba\u202c and \u2066isolate\u2069"),
    # NUL and other control characters
    ("control", "the\x00cat\x00sat"),
    ("control", "\x00"),
    ("control", "bell\x07 backspace\x08 escape\x1b[31mred\x1b[0m"),
    ("control", "form\x0cfeed\x0bvtab\x7fdel\x85nel"),
    # invalid surrogates (cannot be UTF-8 encoded as they are)
    ("surrogate", "lone \ud800 high surrogate"),
    ("surrogate", "\udfff"),
    ("surrogate", "the cat \udc80\udcff sat"),
    # HTML, script tags and event handlers
    ("html", "<b>bold</b> <i>italic</i> <h1>heading</h1>"),
    ("script", "<script>window.__pwned=1;alert(1)</script>"),
    ("script", '<img src=x onerror="window.__pwned=2;alert(2)">'),
    ("script", '<svg onload="window.__pwned=3">'),
    ("script", '"><iframe src="javascript:window.__pwned=4"></iframe>'),
    ("script", "<a href=\"javascript:alert(5)\">click</a> <div onmouseover=\"alert(6)\">x</div>"),
    # Markdown and LaTeX that Streamlit would render
    ("markdown", "# Heading\n**bold** _italic_ `code` [link](http://evil.example)"),
    ("markdown", "![img](http://evil.example/x.png) :red[red] :material/home: ~~strike~~"),
    ("markdown", "| a | b |\n|---|---|\n| 1 | 2 |"),
    ("latex", "$x^2 + \\frac{1}{2}$ and $$\\int_0^1 f$$"),
    ("latex", "\\begin{equation} E = mc^2 \\end{equation} $\\$"),
    # SQL and shell metacharacters
    ("sql", "'; DROP TABLE users; --"),
    ("sql", "1' OR '1'='1' /*"),
    ("shell", "$(rm -rf /) `reboot` | cat /etc/passwd && echo $HOME > /dev/null; ls *"),
    ("shell", "../../../../etc/passwd %s %n {0} {{7*7}} ${7*7}"),
    # URLs
    ("url", "https://example.com/a?b=c&d=e#f"),
    ("url", "javascript:alert(document.cookie)"),
    ("url", "?text=evil&model=../../etc&device=cuda%00"),
    # numbers only
    ("numbers", "1234567890"),
    ("numbers", "3.14159 -2e10 0x1F 1,000,000"),
    # words outside every vocabulary
    ("oov", "qzxwvj plmkjnb vrrzzkt xyzzy"),
    ("oov", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
    ("oov", "中文字符 日本語の文 한국어 문장"),
]

CATEGORIES = sorted({c for c, _ in CORPUS})
# The first entry of each category and every length ("huge"): 17 of the 44. A second box on
# a page (an order, a pair's second sentence, a token) takes these; the whole corpus goes
# through the main text box (tests/app/test_hostile.py) and ui.errors.literal.
ONE_OF_EACH = [(c, t) for i, (c, t) in enumerate(CORPUS)
               if c == "huge" or c not in {c2 for c2, _ in CORPUS[:i]}]
SCRIPTS = [t for c, t in CORPUS if c in ("script", "html")]


def sendable(text: str) -> str:
    """What a browser or a URL can actually deliver: lone surrogates become U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
