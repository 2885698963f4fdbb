"""Date normalisation: dates written in many human ways (English, French, German) -> ISO.

    "Saturday, May 9th, 2015" / "9/5/15" / "le 9 mai 2015" / "Samstag, 9. Mai 2015"
        -> "2015-05-09"

Conventions (documented, and what the model learns):
- Every date is a real calendar date between 1900-01-01 and 2099-12-31, drawn with
  datetime; weekday names are the true weekday of that date.
- Numeric dates are day-first (European): "9/5/18" is 9 May 2018, never 5 September.
  Only year-first forms ("2018.05.09", "2018/05/09") put the year in front.
- Two-digit years use a fixed pivot: 00-49 -> 2000-2049, 50-99 -> 1950-1999; they are only
  generated for dates in 1950-2049.
- Inputs keep their case; the model's vocabulary lowercases them (Vocab lowercase=True),
  character level. Outputs are "YYYY-MM-DD".
"""

from __future__ import annotations

import datetime as dt
import random

from ..model.choices import Split, YearDigits
from ..model.tokenizer import Vocab
from .common import Pair, make_split

NAME = "dates"
KIND = "encoder-decoder"
GENERATOR_VERSION = "dates-1"
DESCRIPTION = "Date normalisation: English/French/German dates -> ISO 2018-05-09 (characters)"
EXAMPLES = ["saturday 9 may 2015", "9/5/18", "May 9th, 2018", "le 9 mai 2018",
            "Samstag, 9. Mai 2015", "2018.05.09"]
# Model and training defaults of `python -m viz_core.training.train --task dates`.
DEFAULTS = dict(d_model=64, n_heads=4, n_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.05,
                max_len=64, steps=3500, batch_size=64, lr=2e-3, warmup=200,
                n_train=200_000, n_test=1000)

FIRST, LAST = dt.date(1900, 1, 1), dt.date(2099, 12, 31)
PIVOT = 50  # two-digit year yy: 2000 + yy if yy < PIVOT else 1900 + yy

MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
           "septembre", "octobre", "novembre", "décembre"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
           "September", "Oktober", "November", "Dezember"],
}
MONTH_ABBR = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
              "Dec"]
WEEKDAYS = {  # Monday first, as date.weekday()
    "en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "fr": ["lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"],
    "de": ["Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"],
}
WEEKDAY_ABBR = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

# Each format is a template over these fields (see _fields). Formats with {yy} need a date
# in 1950-2049 (the pivot window).
FORMATS = [
    # English
    "{wd}, {mon} {dth}, {y}", "{wd} {d} {mon} {y}", "{wd}, {d} {mon} {y}",
    "{wda} {d} {mona} {y}", "{mon} {dth}, {y}", "{mon} {d}, {y}", "{mon} {d} {y}",
    "{d} {mon} {y}", "{dd} {mon} {y}", "{d} {mon} {yy}", "{dth} {mon} {y}",
    "the {dth} of {mon} {y}", "{dth} of {mon}, {y}", "{d} {mona} {y}", "{mona} {d}, {y}",
    "{d}-{mona}-{y}", "{dd}-{mona}-{yy}", "{mona} {dth} {y}",
    # numeric, day-first or year-first
    "{d}/{m}/{yy}", "{dd}/{mm}/{y}", "{d}/{m}/{y}", "{dd}/{mm}/{yy}", "{d}-{m}-{y}",
    "{dd}-{mm}-{y}", "{dd}.{mm}.{y}", "{d}.{m}.{yy}", "{d}.{m}.{y}", "{y}.{mm}.{dd}",
    "{y}/{mm}/{dd}", "{y}-{mm}-{dd}", "{y}{mm}{dd}",
    # French
    "le {fd} {fmon} {y}", "{fd} {fmon} {y}", "{fwd} {fd} {fmon} {y}", "le {fwd} {fd} {fmon} {y}",
    "{fd} {fmon} {yy}", "{fwd} {fd} {fmon} {yy}",
    # German
    "{d}. {gmon} {y}", "{gwd}, {d}. {gmon} {y}", "{gwd}, den {d}. {gmon} {y}",
    "am {d}. {gmon} {y}", "{d}. {gmon} {yy}", "{dd}. {gmon} {y}",
]


def ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    return f"{day}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th') }"


def _case(word: str, rng: random.Random) -> str:
    r = rng.random()
    return word.lower() if r < 0.4 else word.upper() if r < 0.5 else word


def _fields(d: dt.date, rng: random.Random) -> dict[str, str]:
    wd, m = d.weekday(), d.month - 1
    fr_day = "1er" if d.day == 1 and rng.random() < 0.5 else str(d.day)
    return {
        "d": str(d.day), "dd": f"{d.day:02d}", "dth": ordinal(d.day),
        "m": str(d.month), "mm": f"{d.month:02d}", "y": str(d.year), "yy": f"{d.year % 100:02d}",
        "mon": _case(MONTHS["en"][m], rng), "mona": _case(MONTH_ABBR[m], rng),
        "wd": _case(WEEKDAYS["en"][wd], rng), "wda": _case(WEEKDAY_ABBR[wd], rng),
        "fd": fr_day, "fmon": MONTHS["fr"][m], "fwd": WEEKDAYS["fr"][wd],
        "gmon": _case(MONTHS["de"][m], rng), "gwd": _case(WEEKDAYS["de"][wd], rng),
    }


def two_digit_year(yy: int) -> int:
    """The documented pivot: 00-49 -> 2000-2049, 50-99 -> 1950-1999."""
    return 2000 + yy if yy < PIVOT else 1900 + yy


def render(d: dt.date, fmt: str, rng: random.Random) -> str:
    if "{yy}" in fmt and two_digit_year(d.year % 100) != d.year:
        raise ValueError(f"{d} cannot be written with a two-digit year")
    return fmt.format(**_fields(d, rng))


def sample(rng: random.Random) -> Pair:
    span = (LAST - FIRST).days
    d = FIRST + dt.timedelta(days=rng.randrange(span + 1))
    fmt = rng.choice(FORMATS)
    while "{yy}" in fmt and two_digit_year(d.year % 100) != d.year:
        fmt = rng.choice(FORMATS)
    return Pair(render(d, fmt, rng), d.isoformat())


def dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    return make_split(sample, split, n, seed)


def build_vocabs(pairs: list[Pair]) -> dict[str, Vocab]:
    """Character vocabularies; the source one also holds every character of the catalogue."""
    catalogue = [*sum(MONTHS.values(), []), *sum(WEEKDAYS.values(), []), *MONTH_ABBR,
                 *WEEKDAY_ABBR, "0123456789 ,./-", "the of le er den am st nd rd th"]
    source = Vocab.build([*catalogue, *(p.source for p in pairs)], level="char", lowercase=True)
    target = Vocab.build(["0123456789-"], level="char", lowercase=True)
    return {"source": source, "target": target}


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    from .common import evaluate_translation

    return evaluate_translation(model, vocabs, test)


def year_alignment(pair: Pair, digits: YearDigits = "decade") -> list[tuple[int, int]]:
    """(output position, input character position) pairs of year digits.

    digits="decade": the last two year digits, which every input writes and whose value can
    only be read from it (the century of a two-digit year is inferred from the pivot, and in
    a four-digit year its second digit follows from the first: 19.. or 20..).
    digits="all": every year digit the input writes (four, or two for a two-digit year).
    """
    import re

    text = " ".join(pair.source.lower().split())
    year = pair.target[:4]
    if re.fullmatch(r"\d{8}", text):
        found = [(k, k) for k in range(4)]
    elif hits := list(re.finditer(rf"(?<!\d){year}(?!\d)", text)):
        found = [(k, hits[-1].start() + k) for k in range(4)]
    elif hits := list(re.finditer(rf"(?<!\d){year[2:]}(?!\d)", text)):
        found = [(2 + k, hits[-1].start() + k) for k in range(2)]
    else:
        raise ValueError(f"no year in {pair.source!r}")
    return found if digits == "all" else found[-2:]
