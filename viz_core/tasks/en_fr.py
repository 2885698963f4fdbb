"""A toy English -> French translation task, from a small grammar written here.

The grammar is small (about 110 nouns, 50 adjectives, 60 verbs) but has what makes
cross-attention worth looking at:

- gender and number agreement: le/la/les, un/une/des, mon/ma/mes, adjective endings;
- most adjectives after the noun ("the red car" -> "la voiture rouge"), a few before it
  (petit, grand, beau, jeune, vieux, bon, mauvais, joli, long, nouveau, gros), and "de"
  instead of "des" before a plural adjective ("some small cats" -> "de petits chats");
- verbs conjugated by person (regular -er/-ir/-re verbs and irregular ones, present tense);
- object pronouns before the verb ("I see it" -> "je le vois");
- negation around the verb ("I do not see the cat" -> "je ne vois pas le chat"), with "de"
  for an indefinite object ("I do not see a cat" -> "je ne vois pas de chat").

Translation is a function: every English sentence has exactly one French output.
Conventions that make it so: "you" is "tu" (object "te"), "you all" is "vous"; "they" is
"ils" (English does not mark the gender, so "elles" is never produced from a pronoun);
"him" -> "le", "her" -> "la", "them" -> "les", and "it" -> "le" ("it" stands for a
masculine thing). French words never start with a vowel or mute h where elision would
apply, so there are no apostrophes. Everything is lowercase, word-level tokens.

One more construction, the textbook sentence of self-attention (Winograd's schema, as in
Google's 2017 example): "the X did not (didn't) VERB the Y because it was too ADJ" ->
"le/la/l'X n'a pas VERB-é le/la/l'Y parce qu'il/elle était trop ADJ". X is animate, Y a
thing, their French genders differ, and the adjective decides what "it" is: tired, afraid,
weak, ... -> X; wide, heavy, hot, ... -> Y. So the French pronoun (il/elle) and the
adjective's ending (fatigué/fatiguée) show which noun the model read "it" as. Here French
elides (l'animal, n'a, qu'il): the tokenizer makes "l'" and "n'" tokens of their own, and
"didn't" is the tokens "didn'" and "t". Noun pairs and a few adjectives are held out of
this construction's training data (because_dataset). Every adjective, held-out ones included,
also comes in "the N was too ADJ" and in "the X saw the Y and it was too ADJ" -> "le/la X a vu
le/la Y et il/elle était trop ADJ", where its class shows: the held-out adjectives' class is
learnt there and applied in the because-construction. The everyday grammar above is unchanged
(EVERYDAY_VERSION): lm and induction, which read it, keep their data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..model.choices import Split
from ..model.tokenizer import WORD_RE, Vocab
from .common import Pair, make_split, normalise

NAME = "en-fr"
KIND = "encoder-decoder"
EVERYDAY_VERSION = "en-fr-1"  # the everyday grammar (dataset(), sample()): lm and induction
GENERATOR_VERSION = "en-fr-3"  # en-fr-1 + the "because it was too ADJ" construction
# (en-fr-3: + "the X saw the Y and it was too ADJ", where the held-out adjectives show their class)
DESCRIPTION = ("Toy English -> French translation (agreement, adjective order, pronouns, "
               "ne...pas; 'it' follows the adjective: il/elle)")
EXAMPLES = ["the red car", "I see it", "I do not see the cat", "the small black cats eat the cake",
            "the animal didn't cross the street because it was too tired",
            "the animal didn't cross the street because it was too wide"]
DEFAULTS = dict(d_model=128, n_heads=4, n_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.1,
                max_len=32, steps=4000, batch_size=64, lr=1.5e-3, warmup=300,
                n_train=300_000, n_test=1000)
BECAUSE_SHARE = 0.15  # train_dataset: because-construction pairs per everyday pair
N_BECAUSE_TEST = 600  # held-out because-sentences evaluated for the card

# ---- lexicon ------------------------------------------------------------------------------
# "english|french|gender", plurals by rule unless given as "en,en_pl|fr,fr_pl|g".
ANIMATE = """cat|chat|m dog|chien|m boy|garçon|m girl|fille|f woman,women|femme|f king|roi|m
queen|reine|f father|père|m mother|mère|f brother|frère|m sister|sœur|f doctor|médecin|m
teacher|professeur|m neighbour|voisin|m baker|boulanger|m farmer|fermier|m soldier|soldat|m
horse|cheval|m rabbit|lapin|m mouse,mice|souris|f cow|vache|f wolf,wolves|loup|m fox|renard|m
monkey|singe|m tiger|tigre|m lion|lion|m goat|chèvre|f hen|poule|f duck|canard|m
frog|grenouille|f turtle|tortue|f whale|baleine|f giraffe|girafe|f cousin|cousin|m
cook|cuisinier|m pilot|pilote|m""".split()
THINGS = """book|livre|m car|voiture|f table|table|f house|maison|f apple|pomme|f chair|chaise|f
door|porte|f window|fenêtre|f letter|lettre|f flower|fleur|f cup|tasse|f bottle|bouteille|f
dress|robe|f shirt|chemise|f lamp|lampe|f box|boîte|f key|clé|f pie|tarte|f soup|soupe|f
map|carte|f guitar|guitare|f feather|plume|f song|chanson|f candle|bougie|f spoon|cuillère|f
fork|fourchette|f skirt|jupe|f suitcase|valise|f banana|banane|f tomato,tomatoes|tomate|f
carrot|carotte|f doll|poupée|f city|ville|f street|rue|f road|route|f photo|photo|f
radio|radio|f cake|gâteau|m boat|bateau|m bike|vélo|m truck|camion|m pen|stylo|m train|train|m
garden|jardin|m bread|pain|m cheese|fromage|m hat|chapeau|m coat|manteau|m knife,knives|couteau|m
glass|verre|m bag|sac|m basket|panier|m gift|cadeau|m painting|tableau|m film|film|m
piano|piano|m ball|ballon|m desk|bureau|m hammer|marteau|m phone|téléphone|m castle|château|m
village|village|m bridge|pont|m flag|drapeau|m newspaper|journal|m chocolate|chocolat|m
sandwich|sandwich|m ticket|billet|m bowl|bol|m pencil|crayon|m wall|mur|m mirror|miroir|m
carpet|tapis|m cushion|coussin|m shoe|chaussure|f sock|chaussette|f glove|gant|m ring|bague|f
necklace|collier|m moon|lune|f sun|soleil|m cloud|nuage|m river|rivière|f lake|lac|m
mountain|montagne|f forest|forêt|f beach|plage|f field|champ|m blanket|couverture|f""".split()

# "english|m_sg,f_sg,m_pl,f_pl" (one French form = the regular -e/-s/-es pattern)
POST_ADJ = """red|rouge black|noir white|blanc,blanche,blancs,blanches green|vert blue|bleu
grey|gris,grise,gris,grises yellow|jaune pink|rose brown|marron,marron,marron,marron
orange|orange,orange,orange,orange purple|violet,violette,violets,violettes
happy|heureux,heureuse,heureux,heureuses sad|triste fast|rapide slow|lent strong|fort
tired|fatigué clean|propre dirty|sale heavy|lourd round|rond rich|riche cold|froid hot|chaud
empty|vide full|plein funny|drôle sick|malade brave|courageux,courageuse,courageux,courageuses
lazy|paresseux,paresseuse,paresseux,paresseuses famous|célèbre quiet|calme noisy|bruyant
broken|cassé wet|mouillé dry|sec,sèche,secs,sèches soft|doux,douce,doux,douces sweet|sucré
hungry|affamé angry|fâché smart|intelligent strange|bizarre modern|moderne""".split()
PRE_ADJ = """small|petit big|grand beautiful|beau,belle,beaux,belles young|jeune
old|vieux,vieille,vieux,vieilles good|bon,bonne,bons,bonnes bad|mauvais,mauvaise,mauvais,mauvaises
pretty|joli long|long,longue,longs,longues new|nouveau,nouvelle,nouveaux,nouvelles
fat|gros,grosse,gros,grosses""".split()

# French present tense: je, tu, il/elle, nous, vous, ils/elles
IRREGULAR = {
    "voir": "vois vois voit voyons voyez voient", "prendre": "prends prends prend prenons "
    "prenez prennent", "faire": "fais fais fait faisons faites font",
    "lire": "lis lis lit lisons lisez lisent", "boire": "bois bois boit buvons buvez boivent",
    "connaître": "connais connais connaît connaissons connaissez connaissent",
    "tenir": "tiens tiens tient tenons tenez tiennent",
    "conduire": "conduis conduis conduit conduisons conduisez conduisent",
    "vouloir": "veux veux veut voulons voulez veulent",
    "peindre": "peins peins peint peignons peignez peignent",
    "recevoir": "reçois reçois reçoit recevons recevez reçoivent",
    "suivre": "suis suis suit suivons suivez suivent",
    "dormir": "dors dors dort dormons dormez dorment",
    "courir": "cours cours court courons courez courent",
    "rire": "ris ris rit rions riez rient", "sourire": "souris souris sourit sourions souriez "
    "sourient",
}
# "english|french" (English base form; a two-word English verb uses "_": look_for)
TRANSITIVE = """see|voir take|prendre make|faire read|lire drink|boire know|connaître hold|tenir
drive|conduire want|vouloir paint|peindre receive|recevoir follow|suivre watch|regarder
eat|manger carry|porter find|trouver touch|toucher wash|laver keep|garder pull|tirer
push|pousser hide|cacher draw|dessiner cut|couper visit|visiter show|montrer close|fermer
break|casser throw|lancer fix|réparer look_for|chercher bite|mordre sell|vendre lose|perdre
return|rendre defend|défendre finish|finir choose|choisir fill|remplir punish|punir
grab|saisir build|bâtir feed|nourrir""".split()
INTRANSITIVE = """sleep|dormir run|courir sing|chanter dance|danser walk|marcher work|travailler
swim|nager laugh|rire cry|pleurer play|jouer jump|sauter talk|parler smile|sourire""".split()

PERSONS = ("1s", "2s", "3s", "1p", "2p", "3p")
SUBJECTS = [("i", "je", "1s"), ("you", "tu", "2s"), ("he", "il", "3s"), ("she", "elle", "3s"),
            ("we", "nous", "1p"), ("you all", "vous", "2p"), ("they", "ils", "3p")]
OBJECTS = [("me", "me", "1s"), ("you", "te", "2s"), ("him", "le", "3s"), ("her", "la", "3s"),
           ("it", "le", "3s"), ("us", "nous", "1p"), ("you all", "vous", "2p"),
           ("them", "les", "3p")]
# English determiner -> French (masc sg, fem sg, plural); None = not used in that number
DETERMINERS = {"the": ("le", "la", "les"), "a": ("un", "une", None), "some": (None, None, "des"),
               "my": ("mon", "ma", "mes"), "your": ("ton", "ta", "tes"),
               "his": ("son", "sa", "ses"), "her": ("son", "sa", "ses"),
               "our": ("notre", "notre", "nos"), "their": ("leur", "leur", "leurs"),
               "this": ("ce", "cette", None), "these": (None, None, "ces")}


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str  # "m" | "f"
    animate: bool


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str]  # masc sg, fem sg, masc pl, fem pl
    before: bool  # placed before the noun in French

    def agree(self, gender: str, plural: bool) -> str:
        return self.forms[(gender == "f") + 2 * plural]


@dataclass(frozen=True)
class Verb:
    en: str  # base form ("look for")
    en_3s: str  # third person singular ("looks for")
    fr: tuple[str, ...]  # je, tu, il, nous, vous, ils

    def conjugate(self, person: str) -> str:
        return self.fr[PERSONS.index(person)]


def en_plural(word: str) -> str:
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def fr_plural(word: str) -> str:
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith("eau"):
        return word + "x"
    if word.endswith("al"):
        return word[:-2] + "aux"
    return word + "s"


def en_third_person(base: str) -> str:
    head, _, rest = base.partition(" ")
    return " ".join([en_plural(head), *([rest] if rest else [])])


def fr_conjugate(infinitive: str) -> tuple[str, ...]:
    if infinitive in IRREGULAR:
        return tuple(IRREGULAR[infinitive].split())
    stem, group = infinitive[:-2], infinitive[-2:]
    if group == "er":
        nous = stem + ("e" if stem.endswith("g") else "") + "ons"
        if stem.endswith("c"):
            nous = stem[:-1] + "çons"
        return (stem + "e", stem + "es", stem + "e", nous, stem + "ez", stem + "ent")
    if group == "ir":  # second group: finir -> finissons
        return (stem + "is", stem + "is", stem + "it", stem + "issons", stem + "issez",
                stem + "issent")
    if group == "re":
        return (stem + "s", stem + "s", stem, stem + "ons", stem + "ez", stem + "ent")
    raise ValueError(f"cannot conjugate {infinitive!r}")


def _nouns(entries: list[str], animate: bool) -> list[Noun]:
    out = []
    for entry in entries:
        en, fr, gender = entry.split("|")
        en_sg, _, en_pl = en.partition(",")
        fr_sg, _, fr_pl = fr.partition(",")
        out.append(Noun(en_sg, en_pl or en_plural(en_sg), fr_sg, fr_pl or fr_plural(fr_sg),
                        gender, animate))
    return out


def _adjectives(entries: list[str], before: bool) -> list[Adjective]:
    out = []
    for entry in entries:
        en, fr = entry.split("|")
        forms = fr.split(",")
        if len(forms) == 1:
            base = forms[0]
            fem = base if base.endswith("e") else base + "e"
            forms = [base, fem, fr_plural(base), fem + "s"]
        out.append(Adjective(en, tuple(forms), before))
    return out


def _verbs(entries: list[str]) -> list[Verb]:
    out = []
    for entry in entries:
        en, fr = entry.split("|")
        en = en.replace("_", " ")
        out.append(Verb(en, en_third_person(en), fr_conjugate(fr)))
    return out


NOUNS_ANIMATE = _nouns(ANIMATE, True)
NOUNS_THINGS = _nouns(THINGS, False)
NOUNS = NOUNS_ANIMATE + NOUNS_THINGS
ADJECTIVES_POST = _adjectives(POST_ADJ, False)
ADJECTIVES_PRE = _adjectives(PRE_ADJ, True)
VERBS_TRANSITIVE = _verbs(TRANSITIVE)
VERBS_INTRANSITIVE = _verbs(INTRANSITIVE)


# ---- grammar ------------------------------------------------------------------------------
@dataclass
class Sentence:
    en: list[str] = field(default_factory=list)
    fr: list[str] = field(default_factory=list)
    # reordered adjective-noun pairs: (fr noun, en noun, fr adj, en adj) token positions
    reordered: list[tuple[int, int, int, int]] = field(default_factory=list)

    def add(self, en: list[str] | str, fr: list[str] | str) -> None:
        self.en += en.split() if isinstance(en, str) else en
        self.fr += fr.split() if isinstance(fr, str) else fr

    def pair(self) -> Pair:
        return Pair(" ".join(self.en), " ".join(self.fr))


def noun_phrase(s: Sentence, rng: random.Random, animate: bool = False,
                negated_object: bool = False) -> str:
    """Append a noun phrase to s; returns its person ("3s" or "3p")."""
    noun = rng.choice(NOUNS_ANIMATE if animate else NOUNS)
    plural = rng.random() < 0.4
    det = rng.choice([d for d, fr in DETERMINERS.items() if fr[2 if plural else 0]])
    r = rng.random()
    pre = rng.choice(ADJECTIVES_PRE) if r < 0.25 else None
    post = rng.choice(ADJECTIVES_POST) if 0.15 < r < 0.75 else None
    fr_det = DETERMINERS[det][2 if plural else (noun.gender == "f")]
    if negated_object and det in ("a", "some"):
        fr_det = "de"  # "je ne vois pas de chat"
        det = "any" if det == "some" else det
    elif fr_det == "des" and pre is not None:
        fr_det = "de"  # "de petits chats"
    en_noun = noun.en_pl if plural else noun.en
    en_words = [w for w in [pre and pre.en, post and post.en, en_noun] if w]
    if det == "a" and en_words[0][0] in "aeiou":
        det = "an"
    en0, fr0 = len(s.en), len(s.fr)
    s.add([det, *en_words], [fr_det])
    if pre is not None:
        s.add([], pre.agree(noun.gender, plural))
    s.add([], noun.fr_pl if plural else noun.fr)
    if post is not None:
        s.add([], post.agree(noun.gender, plural))
        en_noun_pos = en0 + len(en_words)
        s.reordered.append((len(s.fr) - 2, en_noun_pos, len(s.fr) - 1, en_noun_pos - 1))
    assert fr0 < len(s.fr)
    return "3p" if plural else "3s"


def subject(s: Sentence, rng: random.Random) -> str:
    if rng.random() < 0.5:
        en, fr, person = rng.choice(SUBJECTS)
        s.add(en, fr)
        return person
    return noun_phrase(s, rng, animate=True)


def verb_phrase(s: Sentence, rng: random.Random, person: str) -> None:
    negated = rng.random() < 0.3
    transitive = rng.random() < 0.8
    verb = rng.choice(VERBS_TRANSITIVE if transitive else VERBS_INTRANSITIVE)
    en_verb = verb.en_3s if person == "3s" else verb.en
    if negated:
        en_verb = ("does not " if person == "3s" else "do not ") + verb.en
    fr_verb = verb.conjugate(person)
    pronoun = None
    if transitive and rng.random() < 0.35:
        choices = [o for o in OBJECTS if o[2][0] not in "12" or o[2][0] != person[0]]
        pronoun = rng.choice(choices)
    if pronoun is not None:
        s.add(en_verb, (["ne"] if negated else []) + [pronoun[1], fr_verb]
              + (["pas"] if negated else []))
        s.add(pronoun[0], [])
        return
    s.add(en_verb, (["ne"] if negated else []) + [fr_verb] + (["pas"] if negated else []))
    if transitive:
        noun_phrase(s, rng, negated_object=negated)


def sentence(rng: random.Random) -> Sentence:
    """One English sentence and its French translation (a bare noun phrase 15% of the time)."""
    s = Sentence()
    if rng.random() < 0.15:
        noun_phrase(s, rng)
        return s
    person = subject(s, rng)
    verb_phrase(s, rng, person)
    return s


def sample(rng: random.Random) -> Pair:
    return sentence(rng).pair()


def dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    return make_split(sample, split, n, seed)


def aligned_examples(n: int, seed: int = 0) -> list[tuple[Pair, list[tuple[int, int, int, int]]]]:
    """Held-out sentences with at least one reordered adjective-noun pair, and the positions
    (fr noun, en noun, fr adj, en adj) of each such pair (token indices in each sentence)."""
    from .common import is_held_out

    rng = random.Random(f"{seed}:aligned")
    out, seen = [], set()
    while len(out) < n:
        s = sentence(rng)
        p = s.pair()
        if s.reordered and is_held_out(p.source) and p.source not in seen:
            seen.add(p.source)
            out.append((p, s.reordered))
    return out


def lexicon_texts() -> tuple[list[str], list[str]]:
    """Every English and French word the grammar can produce (for complete vocabularies)."""
    en = ["a an any some do does not you all", " ".join(DETERMINERS), " ".join(
        w for o in OBJECTS + SUBJECTS for w in o[0].split())]
    fr = ["de ne pas", " ".join(f for t in DETERMINERS.values() for f in t if f),
          " ".join(o[1] for o in OBJECTS + SUBJECTS)]
    for n in NOUNS:
        en.append(f"{n.en} {n.en_pl}")
        fr.append(f"{n.fr} {n.fr_pl}")
    for a in ADJECTIVES_POST + ADJECTIVES_PRE:
        en.append(a.en)
        fr.append(" ".join(a.forms))
    for v in VERBS_TRANSITIVE + VERBS_INTRANSITIVE:
        en.append(f"{v.en} {v.en_3s}")
        fr.append(" ".join(v.fr))
    return en, fr


# ---- the textbook sentence: "the X did not VERB the Y because it was too ADJ" --------------
_NOUN = {n.en: n for n in NOUNS}
_ANIMAL = _nouns(["animal|animal,animaux|m"], True)[0]
_HEIGHTS = _nouns("tree|arbre|m tower|tour|f hill|colline|f".split(), False)
_HEIGHT = {n.en: n for n in _HEIGHTS}
# X: animate nouns of both genders ("animal" elides: l'animal)
BECAUSE_ANIMATE = [_ANIMAL, *(_NOUN[w] for w in """cat dog horse rabbit wolf fox tiger lion monkey
duck boy cow goat hen mouse frog turtle giraffe girl woman""".split())]
_NEW_ADJ = {a.en: a for a in _adjectives("""wide|large busy|fréquenté crowded|bondé narrow|étroit
dangerous|dangereux,dangereuse,dangereux,dangereuses salty|salé hard|dur spicy|épicé
fragile|fragile high|haut steep|raide slippery|glissant afraid|effrayé weak|faible
sleepy|somnolent shy|timide nervous|nerveux,nerveuse,nerveux,nerveuses""".split(), False)}
_ADJ = {**{a.en: a for a in ADJECTIVES_POST + ADJECTIVES_PRE}, **_NEW_ADJ}
# adjectives that make "it" the animate X
ANIMATE_ADJ = [_ADJ[w] for w in "tired hungry afraid weak sick lazy sleepy sad shy nervous slow".split()]
# verb -> (French past participle, the things Y it takes, the adjectives that make "it" Y)
BECAUSE_VERBS = {
    "cross": ("traversé", "street road river bridge field forest garden beach lake village city",
              "wide long busy dangerous crowded narrow"),
    "eat": ("mangé", "soup cake apple pie bread cheese banana carrot sandwich chocolate",
            "hot dry salty hard spicy"),
    "carry": ("porté", "box suitcase table chair bag basket piano desk", "heavy big wide long fragile"),
    "push": ("poussé", "box suitcase table chair bag basket piano desk", "heavy big wide long"),
    "climb": ("escaladé", "wall tree mountain tower hill", "high steep slippery"),
}
_VERB_PARTS = {v: (fr, [_NOUN.get(w) or _HEIGHT[w] for w in things.split()],
                   [_ADJ[w] for w in adjs.split()])
               for v, (fr, things, adjs) in BECAUSE_VERBS.items()}
BECAUSE_THINGS = list({n.en: n for _, things, _ in _VERB_PARTS.values() for n in things}.values())
THING_ADJ = list({a.en: a for _, _, adjs in _VERB_PARTS.values() for a in adjs}.values())
_B_NOUN = {n.en: n for n in BECAUSE_ANIMATE + BECAUSE_THINGS}
_B_ADJ = {a.en: a for a in ANIMATE_ADJ + THING_ADJ}
# Held out of the construction's training data: one adjective of each class (trained only in
# "the N was too ADJ") and a fifth of the (X, Y) noun pairs (hash of the pair).
HELD_OUT_ADJ = ("shy", "narrow")
HELD_OUT_PAIR_PERCENT = 20
SIMPLE_SHARE = 0.25  # share of the construction's training pairs that are "the N was too ADJ"
# ... and that are "the X saw the Y and it was too ADJ" (every adjective, the held-out ones too:
# where they show their class, outside the because-construction)
BRIDGE_SHARE = 0.25


def held_out_pair(x: str, y: str) -> bool:
    """True for the (X, Y) noun pairs never seen together in training."""
    import hashlib

    digest = hashlib.blake2b(f"{x}|{y}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100 < HELD_OUT_PAIR_PERCENT


def _the(noun: Noun) -> str:
    return "l'" if noun.fr[0] in "aeiouéè" else ("la" if noun.gender == "f" else "le")


def because_sentence(rng: random.Random) -> Pair:
    """'the X did not (didn't) VERB the Y because it was too ADJ' and its translation; the
    adjective's class (animate X or thing Y) is drawn first, half and half."""
    verb = rng.choice(list(BECAUSE_VERBS))
    _, things, thing_adj = _VERB_PARTS[verb]
    y = rng.choice(things)
    x = rng.choice([n for n in BECAUSE_ANIMATE if n.gender != y.gender])
    adj = rng.choice(ANIMATE_ADJ if rng.random() < 0.5 else thing_adj)
    neg = rng.choice(["did not", "didn't"])
    english = f"the {x.en} {neg} {verb} the {y.en} because it was too {adj.en}"
    return Pair(english, translate(english))


def bridge_sentence(rng: random.Random) -> Pair:
    """'the X saw the Y and it was too ADJ' -> "l'X a vu la Y et il/elle était trop ADJ": the
    adjective (any of both classes, the held-out ones included) decides "it" as in the
    because-construction; noun pairs held out of that construction are never drawn."""
    while True:
        verb = rng.choice(list(BECAUSE_VERBS))
        _, things, thing_adj = _VERB_PARTS[verb]
        y = rng.choice(things)
        x = rng.choice([n for n in BECAUSE_ANIMATE if n.gender != y.gender])
        adj = rng.choice(ANIMATE_ADJ if rng.random() < 0.5 else thing_adj)
        if not held_out_pair(x.en, y.en):
            break
    english = f"the {x.en} saw the {y.en} and it was too {adj.en}"
    return Pair(english, translate(english))


def simple_sentence(rng: random.Random) -> Pair:
    """'the N was too ADJ': each adjective with nouns of its class (animate or the things of
    one of its verbs)."""
    if rng.random() < 0.5:
        noun, adj = rng.choice(BECAUSE_ANIMATE), rng.choice(ANIMATE_ADJ)
    else:
        _, things, thing_adj = _VERB_PARTS[rng.choice(list(BECAUSE_VERBS))]
        noun, adj = rng.choice(things), rng.choice(thing_adj)
    english = f"the {noun.en} was too {adj.en}"
    return Pair(english, translate(english))


@dataclass(frozen=True)
class BecauseParts:
    """What a because-sentence says: its nouns, adjective and the noun "it" refers to."""
    x: Noun
    y: Noun
    adj: Adjective
    referent: str  # "animate" (it = X) | "thing" (it = Y)
    held_out: str  # "" (a training combination) | "pair" | "adjective"

    @property
    def pronoun(self) -> str:
        return "il" if (self.x if self.referent == "animate" else self.y).gender == "m" else "elle"


def because_parts(english: str) -> BecauseParts:
    """Parse a because-sentence (ValueError if it is not one)."""
    w = split_words(english)
    if (len(w) != 12 or w[0] != "the" or w[5] != "the" or w[2:4] not in (["did", "not"],
                                                                           ["didn'", "t"])
            or w[7:11] != ["because", "it", "was", "too"]):
        raise ValueError(f"not a because-sentence: {english!r}")
    x, y, adj = (_B_NOUN.get(w[1]), _B_NOUN.get(w[6]), _B_ADJ.get(w[11]))
    if x not in BECAUSE_ANIMATE or y not in BECAUSE_THINGS or adj is None \
            or w[4] not in BECAUSE_VERBS:
        raise ValueError(f"not a because-sentence: {english!r}")
    held = "adjective" if adj.en in HELD_OUT_ADJ else "pair" if held_out_pair(x.en, y.en) else ""
    return BecauseParts(x, y, adj, "animate" if adj in ANIMATE_ADJ else "thing", held)


def because_dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    """n pairs of the construction. "train": because-sentences of training combinations and
    (SIMPLE_SHARE) "the N was too ADJ"; "test": distinct because-sentences with a held-out
    noun pair or a held-out adjective, never in training whatever the seeds."""
    rng = random.Random(f"{seed}:because:{split}")
    out: list[Pair] = []
    seen: set[str] = set()
    while len(out) < n:
        r = rng.random() if split == "train" else 1.0
        if r < SIMPLE_SHARE:
            out.append(simple_sentence(rng))
            continue
        if r < SIMPLE_SHARE + BRIDGE_SHARE:
            out.append(bridge_sentence(rng))
            continue
        p = because_sentence(rng)
        if bool(because_parts(p.source).held_out) != (split == "test") or p.source in seen:
            continue
        if split == "test":
            seen.add(p.source)
        out.append(p)
    return out


def train_dataset(n: int, seed: int = 0) -> list[Pair]:
    """The training pairs: n everyday sentences and BECAUSE_SHARE * n of the construction."""
    return dataset("train", n, seed) + because_dataset("train", round(n * BECAUSE_SHARE), seed)


def because_lexicon_texts() -> tuple[list[str], list[str]]:
    en = ["the did not didn't because it was too saw and", " ".join(BECAUSE_VERBS)]
    fr = ["l' le la n' a pas parce qu' il elle était trop vu et",
          " ".join(fr for fr, _, _ in _VERB_PARTS.values())]
    for n in BECAUSE_ANIMATE + BECAUSE_THINGS:
        en.append(n.en)
        fr.append(n.fr)
    for a in ANIMATE_ADJ + THING_ADJ:
        en.append(a.en)
        fr.append(" ".join(a.forms[:2]))
    return en, fr


def build_vocabs(pairs: list[Pair]) -> dict[str, Vocab]:
    """Word vocabularies over the whole lexicon (so no generated word is ever <unk>)."""
    en, fr = lexicon_texts()
    b_en, b_fr = because_lexicon_texts()
    return {"source": Vocab.build(en + b_en, "word"), "target": Vocab.build(fr + b_fr, "word")}


def pronoun_of(french: str) -> str | None:
    """The subject pronoun after "parce qu'" in a French output (None if there is none)."""
    w = split_words(french)
    for i in range(len(w) - 1):
        if w[i] == "qu'":
            return w[i + 1]
    return None


def because_metrics(model, vocabs, pairs: list[Pair]) -> dict:
    """Pronoun accuracy (il/elle as the adjective's referent), adjective agreement and exact
    match of greedy outputs on because-sentences, by held-out kind and by referent."""
    from .common import exact_match
    from .common import translate as greedy

    hyps = greedy(model, vocabs["source"], vocabs["target"], [p.source for p in pairs])
    rows = []
    for p, h in zip(pairs, hyps):
        parts = because_parts(p.source)
        rows.append((parts, pronoun_of(h) == parts.pronoun,
                     split_words(h)[-1:] == split_words(p.target)[-1:], normalise(h) == normalise(p.target)))

    def acc(sel, col=1):
        sel = list(sel)
        return round(sum(r[col] for r in sel) / len(sel), 4) if sel else None

    out = {"n": len(rows), "pronoun_accuracy": acc(rows),
           "adjective_agreement": acc(rows, 2), "exact_match": round(exact_match(
               hyps, [p.target for p in pairs]), 4)}
    for kind in ("pair", "adjective"):
        sel = [r for r in rows if r[0].held_out == kind]
        out[f"held_out_{kind}s"] = {"n": len(sel), "pronoun_accuracy": acc(sel), **{
            ref: acc(r for r in sel if r[0].referent == ref) for ref in ("animate", "thing")}}
    out["errors"] = [(p.source, h, p.target) for p, h in zip(pairs, hyps)
                     if normalise(h) != normalise(p.target)][:5]
    return out


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    """The everyday held-out set (exact match, BLEU) and the held-out because-sentences."""
    from .common import evaluate_translation

    metrics = evaluate_translation(model, vocabs, test, bleu=True)
    held_out = because_dataset("test", N_BECAUSE_TEST, 0)
    because = because_metrics(model, vocabs, held_out)
    metrics["errors"] += because.pop("errors")
    metrics["because"] = because
    return metrics


# ---- reference translation of any sentence of the grammar ---------------------------------
_EN_NOUNS = {**{n.en: (n, False) for n in NOUNS}, **{n.en_pl: (n, True) for n in NOUNS}}
_EN_ADJ = {a.en: a for a in ADJECTIVES_POST + ADJECTIVES_PRE}
_EN_VERBS = {**{v.en: (v, False) for v in VERBS_TRANSITIVE + VERBS_INTRANSITIVE},
             **{v.en_3s: (v, True) for v in VERBS_TRANSITIVE + VERBS_INTRANSITIVE}}
_EN_DETS = {**{d: d for d in DETERMINERS}, "an": "a", "any": "some"}


Links = list[tuple[int, int]]  # (French word index, English word index)


def _parse_np(words: list[str], i: int, negated_object: bool) -> tuple[list[str], str, int]:
    fr, person, i, _ = _parse_np_aligned(words, i, negated_object)
    return fr, person, i


def _parse_np_aligned(words: list[str], i: int, negated_object: bool,
                      ) -> tuple[list[str], str, int, Links]:
    """A noun phrase from words[i]: its French words, person, the next index, and links
    (French index within the phrase, English word index in words)."""
    if i >= len(words) or words[i] not in _EN_DETS:
        raise ValueError(f"expected a determiner at {words[i:]!r}")
    det, at_det = _EN_DETS[words[i]], i
    i += 1
    adjs = []  # (adjective, English index)
    while i < len(words) and words[i] in _EN_ADJ and words[i] not in _EN_NOUNS:
        adjs.append((_EN_ADJ[words[i]], i))
        i += 1
    if i >= len(words) or words[i] not in _EN_NOUNS:
        raise ValueError(f"expected a noun at {words[i:]!r}")
    noun, plural = _EN_NOUNS[words[i]]
    pre = [(a, k) for a, k in adjs if a.before]
    post = [(a, k) for a, k in adjs if not a.before]
    fr_det = DETERMINERS[det][2 if plural else (noun.gender == "f")]
    if fr_det is None:
        raise ValueError(f"{words[i - len(adjs) - 1]!r} does not go with {words[i]!r}")
    if negated_object and det in ("a", "some"):
        fr_det = "de"  # "de" stands for the English determiner it replaces (a/an/any)
    elif fr_det == "des" and pre:
        fr_det = "de"  # ... or "some" before a plural adjective
    # every French word of the phrase comes with the English word it translates
    built = [(fr_det, at_det), *((a.agree(noun.gender, plural), k) for a, k in pre),
             (noun.fr_pl if plural else noun.fr, i),
             *((a.agree(noun.gender, plural), k) for a, k in post)]
    fr = [w for w, _ in built]
    return fr, "3p" if plural else "3s", i + 1, [(j, k) for j, (_, k) in enumerate(built)]


def _pronoun(words: list[str], i: int, table) -> tuple[tuple[str, str, str], int] | None:
    for en, fr, person in table:
        n = len(en.split())
        if words[i:i + n] == en.split() and (n == 2 or words[i:i + 2] != ["you", "all"]):
            return (en, fr, person), i + n
    return None


def translate(english: str) -> str:
    """The French translation the grammar gives an English sentence (ValueError if it is
    not a sentence of the grammar). translate("I see it") == "je le vois"."""
    return " ".join(translate_aligned(english)[0]).replace("' ", "'")


def split_words(text: str) -> list[str]:
    """The model's tokens of a text (tokenizer.Vocab's word split): lowercase words, an
    apostrophe kept on the word before it ("didn't" -> "didn'", "t"; "l'animal" -> "l'",
    "animal"). A sentence of the everyday grammar is its whitespace-split words."""
    return WORD_RE.findall(text.lower())


def _because_aligned(words: list[str]) -> tuple[list[str], Links]:
    """'the N was too ADJ' and 'the X did not VERB the Y because it was too ADJ'."""
    def np_at(i: int) -> tuple[Noun, list[tuple[str, int]]]:
        noun = _B_NOUN.get(words[i + 1]) if words[i] == "the" else None
        if noun is None:
            raise ValueError(f"expected 'the' and a noun at {words[i:]!r}")
        return noun, [(_the(noun), i), (noun.fr, i + 1)]

    if len(words) == 5 and words[2:4] == ["was", "too"] and words[4] in _B_ADJ:
        noun, built = np_at(0)
        built += [("était", 2), ("trop", 3), (_B_ADJ[words[4]].agree(noun.gender, False), 4)]
    elif len(words) == 10 and words[2] == "saw" and words[5:9] == ["and", "it", "was", "too"]:
        (x, x_np), (y, y_np) = np_at(0), np_at(3)
        adj = _B_ADJ.get(words[9])
        if not x.animate or y.animate or x.gender == y.gender or adj is None:
            raise ValueError(f"not a sentence of the grammar: {' '.join(words)!r}")
        referent = x if adj in ANIMATE_ADJ else y
        built = [*x_np, ("a", 2), ("vu", 2), *y_np, ("et", 5),
                 ("il" if referent.gender == "m" else "elle", 6), ("était", 7), ("trop", 8),
                 (adj.agree(referent.gender, False), 9)]
    else:
        parts = because_parts(" ".join(words))
        referent = parts.x if parts.referent == "animate" else parts.y
        built = [*np_at(0)[1], ("n'", 3), ("a", 2), ("pas", 3), (_VERB_PARTS[words[4]][0], 4),
                 *np_at(5)[1], ("parce", 7), ("qu'", 7), (parts.pronoun, 8), ("était", 9),
                 ("trop", 10), (parts.adj.agree(referent.gender, False), 11)]
    return [w for w, _ in built], sorted((j, k) for j, (_, k) in enumerate(built))


def translate_aligned(english: str) -> tuple[list[str], Links]:
    """translate(), word by word: (French words, links), links being (French word index,
    English word index) pairs over the tokens of both (split_words: english.lower().split() for
    the everyday grammar; "didn't" and "l'animal" are two tokens), sorted. Every French word
    has at least one link: what it translates.

    - nouns, adjectives (before or after the noun), determiners and possessives: their
      English word ("la voiture rouge" <- "the red car": la-the, voiture-car, rouge-red);
      "de" for the determiner it replaces: "a"/"an"/"any" under negation ("je ne vois pas
      de chat"), "some" before a plural adjective ("de petits chats");
    - subject and object pronouns: the English pronoun, also when French moves the object
      before the verb ("je le vois" <- "I see it": le-it); "vous" links both "you" and "all";
    - the verb: its English word(s) ("cherche" <- "look for"); under negation also the
      auxiliary "do"/"does", which is where English marks the person that French marks on
      the verb's ending ("vois" <- "do", "see");
    - "ne" and "pas" both link "not";
    - because-sentences: "n'" and "pas" link "not" (or the "t" of "didn't"), "a" links
      "did", the participle its verb, "parce" and "qu'" link "because", il/elle "it".
    """
    words = split_words(english)
    if not words:
        raise ValueError("empty sentence")
    if "too" in words:  # the textbook sentence (see because_sentence)
        return _because_aligned(words)
    links: Links = []
    if words[0] in _EN_DETS:
        fr, person, i, links = _parse_np_aligned(words, 0, False)
        if i == len(words):
            return fr, sorted(links)
    else:
        found = _pronoun(words, 0, SUBJECTS)
        if found is None:
            raise ValueError(f"unknown subject {words[0]!r}")
        (_, fr_subject, person), i = found
        fr = [fr_subject]
        links = [(0, k) for k in range(i)]
    negated = words[i:i + 2] in (["do", "not"], ["does", "not"])
    at_aux = i
    if negated:
        if (words[i] == "does") != (person == "3s"):
            raise ValueError(f"{words[i]!r} does not agree with the subject")
        i += 2
    for n in (2, 1):
        key = " ".join(words[i:i + n])
        if key in _EN_VERBS and len(words[i:i + n]) == n:
            verb, third = _EN_VERBS[key]
            break
    else:
        raise ValueError(f"expected a verb at {words[i:]!r}")
    if not negated and third != (person == "3s") and verb.en != verb.en_3s:
        raise ValueError(f"{key!r} does not agree with the subject")
    verb_en = list(range(i, i + n)) + ([at_aux] if negated else [])
    i += n
    verb_group = [(verb.conjugate(person), verb_en)]  # French words with their English words
    obj: list[str] = []
    obj_links: Links = []
    if i < len(words):
        if verb not in VERBS_TRANSITIVE:
            raise ValueError(f"{verb.en!r} takes no object")
        found = _pronoun(words, i, OBJECTS) if words[i] in ("me", "you", "him", "her", "it",
                                                            "us", "them") else None
        if found is not None and found[1] == len(words):
            verb_group.insert(0, (found[0][1], list(range(i, found[1]))))
            i = found[1]
        else:
            obj, _, i, obj_links = _parse_np_aligned(words, i, negated)
        if i != len(words):
            raise ValueError(f"unexpected words at the end: {words[i:]!r}")
    if negated:
        verb_group = [("ne", [at_aux + 1]), *verb_group, ("pas", [at_aux + 1])]
    for word, ks in verb_group:
        links += [(len(fr), k) for k in ks]
        fr.append(word)
    links += [(len(fr) + j, k) for j, k in obj_links]
    return fr + obj, sorted(links)


def word_alignment(pair: Pair) -> Links:
    """(French word index, English word index) links of a pair whose target is the
    grammar's translation of its source (both in tokens, lowercased: split_words); ValueError
    when the source is not a sentence of the grammar or the target is not its translation
    (a model's mistake), so no reference alignment is known."""
    fr, links = translate_aligned(pair.source)
    if split_words(pair.target) != fr:
        raise ValueError(f"{pair.target!r} is not the translation of {pair.source!r}: "
                         f"{' '.join(fr)!r}")
    return links
