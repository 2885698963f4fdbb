"""What one student does in the load test, and what is checked after every step.

A session opens the Attention page with its own text, model and head in the URL, switches
heads (20 times in the full profile), changes its text (twice) between the switches, then
visits pages (3). After every step it checks that no error was shown, that the address and
the text box hold this session's current text, and that the heatmap's tokens are this
session's tokens: every text names an animal no other session uses, and no other session's
animal may ever reach this session (in a chart's labels, the address or the text box).

The steps go through a driver: bench/load/protocol.py (Streamlit's own protocol, no
browser) or bench/load/browser.py (a Playwright context in Chromium). Both return a Step.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import urllib.parse
from dataclasses import dataclass, field

# Subjects: words of the en-fr model's vocabulary that MiniLM's tokenizer keeps whole, and
# that no example text of either model uses (the Masks page shows those examples).
SUBJECTS = ("boy girl woman king queen father mother brother sister doctor teacher neighbour "
            "baker farmer soldier horse rabbit mouse cow wolf fox monkey tiger lion goat hen "
            "duck frog turtle whale cousin cook pilot").split()
ADJECTIVES = ("red", "black", "white", "green", "blue", "yellow", "small", "big")
VERBS = ("sees", "eats", "takes", "finds", "watches")
THINGS = ("cake", "book", "car", "house", "apple", "moon", "garden", "river")
LAYOUT = {"minilm": (6, 12), "en-fr": (2, 4)}  # layers, heads of the first block kind
PAGES = ("inside", "masks", "positional")
KINDS = ("first page", "head switch", "text change", "page visit")


def session_text(i: int, version: int) -> str:
    """Session i's text number `version`: its own subject, the rest varying."""
    return (f"the {ADJECTIVES[(i + version) % len(ADJECTIVES)]} {SUBJECTS[i % len(SUBJECTS)]} "
            f"{VERBS[(i + 2 * version) % len(VERBS)]} the "
            f"{THINGS[(3 * i + version) % len(THINGS)]}")


@dataclass
class Profile:
    sessions: int = 30
    head_switches: int = 20
    text_changes: int = 2
    pages: tuple[str, ...] = PAGES
    models: tuple[str, ...] = ("minilm", "en-fr")  # session i uses models[i % len]
    think: tuple[float, float] = (1.0, 3.0)  # seconds a student waits between two steps
    ramp: float = 30.0  # the sessions arrive spread over this many seconds
    seed: int = 0

    def describe(self) -> str:
        return (f"{self.sessions} sessions ({'/'.join(self.models)}), each: first page, "
                f"{self.head_switches} head switches, {self.text_changes} text changes, "
                f"{len(self.pages)} pages; think time {self.think[0]:g}-{self.think[1]:g} s; "
                f"arrivals over {self.ramp:g} s")


@dataclass
class Step:
    """What a driver saw after one step."""

    seconds: float
    errors: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # the charts' tick labels
    text_box: str | None = None  # the Input text box's value
    query: str = ""  # the address's query string
    bytes: int = 0


@dataclass
class Record:
    session: int
    model: str
    kind: str
    seconds: float
    bytes: int
    started: float  # seconds since the load began


@dataclass
class Outcome:
    records: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # another session's text seen
    mismatches: list[str] = field(default_factory=list)  # own text/head not shown
    finished: set[int] = field(default_factory=set)
    replicas: dict[int, str] = field(default_factory=dict)  # session -> replica (nginx)


def label_words(labels: list[str]) -> set[str]:
    """'3·fox' -> 'fox' (the app labels axes '<position>·<token>')."""
    return {re.sub(r"^\d+·", "", lab).strip().lower() for lab in labels}


def check(i: int, kind: str, step: Step, text: str, head: int | None, out: Outcome,
          others: set[str]) -> None:
    where = f"session {i} {kind}"
    out.errors += [f"{where}: {e}" for e in step.errors]
    query = urllib.parse.parse_qs(step.query)
    if query.get("text", [None])[0] != text:
        out.mismatches.append(f"{where}: address text {query.get('text')} != {text!r}")
    if step.text_box is not None and step.text_box != text:
        out.mismatches.append(f"{where}: text box {step.text_box!r} != {text!r}")
    # head 0, the picker's default, leaves the address (ui/state.to_url)
    if head is not None and query.get("head", ["0"])[0] != str(head):
        out.mismatches.append(f"{where}: address head {query.get('head')} != {head}")
    words = label_words(step.labels)
    own = SUBJECTS[i % len(SUBJECTS)]
    if kind != "page visit" and own not in words:
        out.mismatches.append(f"{where}: its subject {own!r} is not in the charts' labels")
    seen = (words | set(re.findall(r"[a-z]+", (step.text_box or "").lower()))
            | set(re.findall(r"[a-z]+", " ".join(query.get("text", [])).lower())))
    if seen & others:
        out.foreign.append(f"{where}: saw {sorted(seen & others)}")


async def one_session(driver, i: int, profile: Profile, out: Outcome, t0: float,
                      rng: random.Random) -> None:
    model = profile.models[i % len(profile.models)]
    layers, heads = LAYOUT.get(model, (1, 1))
    others = {SUBJECTS[j % len(SUBJECTS)] for j in range(profile.sessions)} - \
        {SUBJECTS[i % len(SUBJECTS)]}
    version, text = 0, session_text(i, 0)
    head = i % heads
    query = {"model": model, "text": text, "layer": str(i % layers), "head": str(head)}

    def record(kind: str, step: Step, started: float) -> None:
        out.records.append(Record(i, model, kind, step.seconds, step.bytes, started - t0))

    started = time.monotonic()
    step = await driver.open("attention", query)
    record("first page", step, started)
    check(i, "first page", step, text, head, out, others)
    # the text changes fall evenly between the head switches
    change_after = {round((k + 1) * profile.head_switches / (profile.text_changes + 1))
                    for k in range(profile.text_changes)}
    for k in range(1, profile.head_switches + 1):
        await asyncio.sleep(rng.uniform(*profile.think))
        head = (head + 1 + k % 3) % heads if heads > 1 else 0
        started = time.monotonic()
        step = await driver.set_head(head)
        record("head switch", step, started)
        check(i, "head switch", step, text, head, out, others)
        if k in change_after:
            await asyncio.sleep(rng.uniform(*profile.think))
            version += 1
            text = session_text(i, version)
            started = time.monotonic()
            step = await driver.set_text(text)
            record("text change", step, started)
            check(i, "text change", step, text, head, out, others)
    for page in profile.pages:
        await asyncio.sleep(rng.uniform(*profile.think))
        started = time.monotonic()
        step = await driver.page(page)
        record("page visit", step, started)
        check(i, "page visit", step, text, None, out, others)
    out.finished.add(i)


async def run_sessions(make_driver, profile: Profile, out: Outcome) -> float:
    """Every session, arriving spread over profile.ramp; -> wall seconds. make_driver(i) is
    an async context manager giving session i's driver."""
    rng = random.Random(profile.seed)
    t0 = time.monotonic()

    async def session(i: int, delay: float, seed: int):
        await asyncio.sleep(delay)
        try:
            async with make_driver(i) as driver:
                await one_session(driver, i, profile, out, t0, random.Random(seed))
                out.replicas[i] = getattr(driver, "replica", "")
        except Exception as err:  # noqa: BLE001 - a failed session is an error, not a crash
            out.errors.append(f"session {i}: {type(err).__name__}: {err}"[:400])

    delays = sorted(rng.uniform(0, profile.ramp) for _ in range(profile.sessions))
    await asyncio.gather(*(session(i, d, rng.randrange(2**31)) for i, d in enumerate(delays)))
    return time.monotonic() - t0
