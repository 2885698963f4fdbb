"""A toy Chinese -> English translation task, from en-fr's lexicon and grammar (issue 31).

The English side is en-fr's English (its nouns, adjectives and verbs); the Chinese side has
what a Chinese reader expects of the same sentences:

- Chinese word order: [determiner] [number + measure word] [adjective 的] noun, subject verb
  object; negation before the verb: 不 (present: "do not" / "does not") or 没有 (past:
  "did not");
- measure words that agree with the noun: 一只猫 (a cat), 两本书 (two books), 三个老师
  (three teachers), 这辆车 (this car); the measure word is part of the grammar, so 两本猫 is
  not a sentence of it;
- number marked so that every Chinese sentence has exactly one English translation: a bare
  noun is definite and singular (猫 -> "the cat"), 一 + measure word is "a"/"an", 两 .. 五 +
  measure word give plurals, 一些 is "some" (plural), 这/那 + measure word "this"/"that",
  这些/那些 "these"/"those", 我的/你的/他的 ... "my"/"your"/"his" ... (singular, or plural
  with a number: 我的两只猫 -> "my two cats");
- the textbook sentence of self-attention: "X 没有 VERB Y，因为它太 ADJ 了" -> "the X did not
  VERB the Y because it was too ADJ" (English form: "did not", never "didn't"), and "N 太 ADJ
  了" -> "the N was too ADJ". Chinese 它 is as ambiguous as English "it", so the translation
  does not decide the referent; the encoder's self-attention on 它 is where to look.

Chinese has no spaces. The source is segmented into the lexicon's words by forward maximum
matching (tokenizer.max_match, the source Vocab's ``segment``): the heatmap labels are
words (动物 · 没有 · 过 · 马路), which align 1:1 with English words far better than
characters would. The lexicon is chosen so that maximum matching gives back the generator's
own words for every sentence (马 "horse" and 马路 "street" never meet as 马|路 ...), which the
tests check. "，" and "。" are optional words of the grammar (no English counterpart); a
character the lexicon has no word for is <unk>.

Translation is a function: translate_aligned parses the Chinese words and builds the English
with its word alignment; the generator draws Chinese and asks it for the English.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..model.choices import Split
from ..model.tokenizer import CJK_RE, CJK_RUN_RE, WORD_RE, Vocab, max_match
from . import en_fr
from .common import Pair, make_split

NAME = "zh-en"
KIND = "encoder-decoder"
GENERATOR_VERSION = "zh-en-1"
DESCRIPTION = ("Toy Chinese -> English translation (measure words, number, 不/没有; the "
               "source segmented into the lexicon's words; 'because it was too ADJ')")
EXAMPLES = ["动物没有过马路，因为它太累了", "动物没有过马路，因为它太宽了", "两只黑色的猫",
            "我不认识这个老师", "她的三本书", "这只狗没有吃一块蛋糕"]
DEFAULTS = dict(d_model=128, n_heads=4, n_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.1,
                max_len=32, steps=4000, batch_size=64, lr=1.5e-3, warmup=300,
                n_train=300_000, n_test=1000)
# the card's word on how the source is cut, and the sentences whose outputs it records
SEGMENTATION = ("word level: the Chinese source is cut into the lexicon's words by forward "
                "maximum matching (tokenizer.max_match), so heatmap labels are words "
                "(动物 · 没有 · 过 · 马路) that align 1:1 with English words; a character no "
                "word of the lexicon starts with is <unk>")
SEED_SENTENCES = ["动物没有过马路，因为它太累了", "动物没有过马路因为它太累了。",
                  "动物没有过马路，因为它太宽了", "动物没有过马路因为它太宽了。"]
BECAUSE_SHARE = 0.15  # share of sentences that are the textbook construction (both splits)
SIMPLE_SHARE = 0.05  # ... and "N 太 ADJ 了"
N_BECAUSE_TEST = 400  # held-out because-sentences evaluated for the card
# the "done when" for the card and the tests: held-out exact match, BLEU, and the best
# cross-attention head's alignment score against the reference (the Attention page's)
TARGETS = {"exact_match": 0.9, "bleu": 90.0, "alignment": 0.9}
COMMA, STOP = "，", "。"

# ---- lexicon ------------------------------------------------------------------------------
# "english|中文|measure word" (English names and plurals as in en-fr's lexicon)
ANIMATE = """animal|动物|只 cat|猫|只 dog|狗|只 boy|男孩|个 girl|女孩|个 woman|女人|个 king|国王|个
queen|王后|个 father|父亲|个 mother|母亲|个 brother|兄弟|个 sister|姐妹|个 doctor|医生|个
teacher|老师|个 neighbour|邻居|个 baker|面包师|个 farmer|农民|个 soldier|士兵|个 horse|马|匹
rabbit|兔子|只 mouse|老鼠|只 cow|牛|头 wolf|狼|只 fox|狐狸|只 monkey|猴子|只 tiger|老虎|只
lion|狮子|只 goat|山羊|只 hen|母鸡|只 duck|鸭子|只 frog|青蛙|只 turtle|乌龟|只 whale|鲸鱼|头
giraffe|长颈鹿|只 cook|厨师|个 pilot|飞行员|个""".split()
THINGS = """book|书|本 car|车|辆 table|桌子|张 house|房子|座 apple|苹果|个 chair|椅子|把
door|门|扇 window|窗户|扇 letter|信|封 flower|花|朵 cup|杯子|个 bottle|瓶子|个 dress|连衣裙|条
shirt|衬衫|件 lamp|灯|盏 box|盒子|个 key|钥匙|把 pie|馅饼|个 soup|汤|碗 map|地图|张
guitar|吉他|把 feather|羽毛|根 song|歌|首 candle|蜡烛|根 spoon|勺子|把 fork|叉子|把
skirt|裙子|条 suitcase|行李箱|个 banana|香蕉|根 tomato|西红柿|个 carrot|胡萝卜|根 doll|娃娃|个
city|城市|座 street|马路|条 road|公路|条 photo|照片|张 radio|收音机|台 cake|蛋糕|块 boat|船|条
bike|自行车|辆 truck|卡车|辆 pen|笔|支 train|火车|列 garden|花园|个 bread|面包|块
cheese|奶酪|块 hat|帽子|顶 coat|外套|件 knife|刀|把 glass|玻璃杯|个 bag|包|个 basket|篮子|个
gift|礼物|件 painting|油画|幅 film|电影|部 piano|钢琴|架 ball|球|个 desk|书桌|张 hammer|锤子|把
phone|电话|部 castle|城堡|座 village|村庄|座 bridge|桥|座 flag|旗子|面 newspaper|报纸|份
chocolate|巧克力|块 sandwich|三明治|个 ticket|票|张 pencil|铅笔|支 wall|墙|面 mirror|镜子|面
carpet|地毯|块 cushion|靠垫|个 shoe|鞋|只 sock|袜子|只 glove|手套|只 ring|戒指|枚
necklace|项链|条 moon|月亮|个 sun|太阳|个 cloud|云|朵 river|河|条 lake|湖|个 mountain|山|座
forest|森林|片 beach|海滩|片 field|田野|片 blanket|毯子|条 tree|树|棵 tower|塔|座
hill|山丘|座""".split()
# "english|中文": before a noun with 的 (红色的车), after 太 .. 了 (太累了)
ADJECTIVES = """red|红色 black|黑色 white|白色 green|绿色 blue|蓝色 grey|灰色 yellow|黄色
pink|粉色 brown|棕色 orange|橙色 purple|紫色 happy|快乐 sad|伤心 fast|快 slow|慢 strong|强壮
tired|累 clean|干净 dirty|脏 heavy|重 round|圆 rich|富有 cold|冷 hot|热 empty|空 full|满
funny|有趣 sick|生病 brave|勇敢 lazy|懒 famous|有名 quiet|安静 noisy|吵 broken|破 wet|湿
dry|干 soft|软 sweet|甜 hungry|饿 angry|生气 smart|聪明 strange|奇怪 modern|现代 small|小
big|大 beautiful|美丽 young|年轻 old|老 good|好 bad|坏 pretty|漂亮 long|长 new|新 fat|胖
wide|宽 busy|繁忙 crowded|拥挤 narrow|窄 dangerous|危险 salty|咸 hard|硬 spicy|辣
fragile|易碎 high|高 steep|陡 slippery|滑 afraid|害怕 weak|虚弱 sleepy|困 shy|害羞
nervous|紧张""".split()
# "english|中文" (English base form; "_" joins a two-word verb: look_for)
TRANSITIVE = """see|看见 take|拿 make|做 read|读 drink|喝 know|认识 hold|抱 drive|开 want|要
paint|画 receive|收到 follow|跟着 watch|看 eat|吃 carry|搬 find|找到 touch|摸 wash|洗 keep|留
pull|拉 push|推 hide|藏 cut|切 visit|拜访 show|展示 close|关 break|打破 throw|扔 fix|修
look_for|找 bite|咬 sell|卖 lose|丢 return|还 defend|保护 finish|完成 choose|选 fill|装满
punish|惩罚 grab|抓 build|建 feed|喂 climb|爬 cross|过""".split()
INTRANSITIVE = """sleep|睡觉 run|跑 sing|唱歌 dance|跳舞 walk|走路 work|工作 swim|游泳 laugh|笑
cry|哭 play|玩 jump|跳 talk|说话 smile|微笑""".split()
# (中文, English subject, English object, English possessive, person)
PRONOUNS = [("我", "i", "me", "my", "1s"), ("你", "you", "you", "your", "2s"),
            ("他", "he", "him", "his", "3s"), ("她", "she", "her", "her", "3s"),
            ("它", "it", "it", None, "3s"), ("我们", "we", "us", "our", "1p"),
            ("你们", "you all", "you all", "your", "2p"), ("他们", "they", "them", "their", "3p")]
NUMBERS = {"一": "a", "两": "two", "三": "three", "四": "four", "五": "five"}
DEMONSTRATIVES = {"这": ("this", "these"), "那": ("that", "those")}
PLURAL_DETS = {"这些": "these", "那些": "those", "一些": "some"}
# the textbook construction: verb -> (things it takes, adjectives that make "it" the thing)
BECAUSE_VERBS = {
    "cross": ("street road river bridge field forest garden beach lake village city",
              "wide long busy dangerous crowded narrow"),
    "eat": ("soup cake apple pie bread cheese banana carrot sandwich chocolate",
            "hot dry salty hard spicy"),
    "carry": ("box suitcase table chair bag basket piano desk", "heavy big wide long fragile"),
    "push": ("box suitcase table chair bag basket piano desk", "heavy big wide long"),
    "climb": ("wall tree mountain tower hill", "high steep slippery"),
}
ANIMATE_ADJ = "tired hungry afraid weak sick lazy sleepy sad shy nervous slow".split()
BECAUSE_ANIMALS = """animal cat dog horse rabbit wolf fox tiger lion monkey duck cow goat hen
mouse frog turtle giraffe""".split()


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    zh: str
    measure: str  # 只, 本, 个 ...
    animate: bool


@dataclass(frozen=True)
class Word:
    en: str  # English (base form for verbs)
    zh: str


def _nouns(entries: list[str], animate: bool) -> list[Noun]:
    plurals = {n.en: n.en_pl for n in en_fr.NOUNS}
    out = []
    for entry in entries:
        en, zh, measure = entry.split("|")
        out.append(Noun(en, plurals.get(en) or en_fr.en_plural(en), zh, measure, animate))
    return out


def _words(entries: list[str]) -> list[Word]:
    return [Word(en.replace("_", " "), zh) for en, zh in (e.split("|") for e in entries)]


NOUNS_ANIMATE = _nouns(ANIMATE, True)
NOUNS_THINGS = _nouns(THINGS, False)
NOUNS = NOUNS_ANIMATE + NOUNS_THINGS
ADJS = _words(ADJECTIVES)
VERBS_TRANSITIVE = _words(TRANSITIVE)
VERBS_INTRANSITIVE = _words(INTRANSITIVE)
EVERYDAY_TRANSITIVE = [v for v in VERBS_TRANSITIVE if v.en != "cross"]  # cross: textbook only
_ZH_NOUN = {n.zh: n for n in NOUNS}
_EN_NOUN = {n.en: n for n in NOUNS}
_ZH_ADJ = {a.zh: a for a in ADJS}
_EN_ADJ = {a.en: a for a in ADJS}
_ZH_VERB = {v.zh: (v, v in VERBS_TRANSITIVE) for v in VERBS_TRANSITIVE + VERBS_INTRANSITIVE}
_EN_VERB = {v.en: v for v in VERBS_TRANSITIVE}
_ZH_PRONOUN = {p[0]: p for p in PRONOUNS}
MEASURES = sorted({n.measure for n in NOUNS})
FUNCTION_WORDS = ["的", "不", "没有", "因为", "太", "了", COMMA, STOP]


def lexicon() -> list[str]:
    """Every Chinese word of the grammar (the source vocabulary and the segmenter's words)."""
    words = [*FUNCTION_WORDS, *NUMBERS, *DEMONSTRATIVES, *PLURAL_DETS, *MEASURES,
             *(p[0] for p in PRONOUNS), *(n.zh for n in NOUNS), *(a.zh for a in ADJS),
             *(v.zh for v in VERBS_TRANSITIVE + VERBS_INTRANSITIVE)]
    return list(dict.fromkeys(words))


_LEXICON = frozenset(lexicon())
_LONGEST = max(len(w) for w in _LEXICON)


def split_words(text: str) -> list[str]:
    """The model's source tokens of a text: the source Vocab's split (lowercase, words and
    punctuation apart, runs of Chinese characters cut into the lexicon's words by forward
    maximum matching; an unknown character alone)."""
    out: list[str] = []
    for word in WORD_RE.findall(text.lower()):
        for run in CJK_RUN_RE.findall(word):
            out += max_match(run, _LEXICON, _LONGEST) if CJK_RE.match(run) else [run]
    return out


# ---- the generator: Chinese words ---------------------------------------------------------
def noun_phrase(rng: random.Random, animate: bool = False, nouns: list[Noun] | None = None,
                singular: bool = False) -> list[str]:
    """The Chinese words of a noun phrase."""
    noun = rng.choice(nouns or (NOUNS_ANIMATE if animate else NOUNS))
    r = rng.random()
    words: list[str] = []
    if singular:
        r = rng.choice([0.0, 0.0, 0.0, 0.3, 0.6, 0.9])  # bare (the), 一, 这/那, possessive
    if r < 0.25:
        pass  # bare: "the N"
    elif r < 0.4:
        words += ["一", noun.measure]
    elif r < 0.55:
        words += [rng.choice(["两", "三", "四", "五"]), noun.measure]
    elif r < 0.7:
        words.append(rng.choice(list(DEMONSTRATIVES)))
        words += ([noun.measure] if singular or rng.random() < 0.8
                  else [rng.choice(["两", "三"]), noun.measure])
    elif r < 0.8:
        words.append(rng.choice(list(PLURAL_DETS)))
    else:
        words += [rng.choice([p for p in PRONOUNS if p[3]])[0], "的"]
        if not singular and rng.random() < 0.3:
            words += [rng.choice(["两", "三", "四", "五"]), noun.measure]
    if rng.random() < 0.4:
        words += [rng.choice(ADJS).zh, "的"]
    return [*words, noun.zh]


def _subject(rng: random.Random) -> list[str]:
    if rng.random() < 0.5:
        return [rng.choice([p for p in PRONOUNS if p[0] != "它"])[0]]
    return noun_phrase(rng, animate=True)


def everyday_words(rng: random.Random) -> list[str]:
    """One sentence of the everyday grammar (a bare noun phrase 15% of the time)."""
    if rng.random() < 0.15:
        return noun_phrase(rng)
    words = _subject(rng)
    r = rng.random()
    if r < 0.2:
        words.append("不")
    elif r < 0.35:
        words.append("没有")
    if rng.random() < 0.8:
        words.append(rng.choice(EVERYDAY_TRANSITIVE).zh)
        if rng.random() < 0.3:
            words.append(rng.choice([p for p in PRONOUNS if p[0] != words[0]])[0])
        else:
            words += noun_phrase(rng)
    else:
        words.append(rng.choice(VERBS_INTRANSITIVE).zh)
    return words


def because_words(rng: random.Random) -> list[str]:
    """'X 没有 VERB Y，因为它太 ADJ 了': the adjective from the animate X's class or from the
    verb's things' class (half and half), as in en-fr's construction."""
    verb = rng.choice(list(BECAUSE_VERBS))
    things, thing_adj = (s.split() for s in BECAUSE_VERBS[verb])
    adj = rng.choice(ANIMATE_ADJ if rng.random() < 0.5 else thing_adj)
    x = noun_phrase(rng, nouns=[_EN_NOUN[w] for w in BECAUSE_ANIMALS], singular=True)
    y = noun_phrase(rng, nouns=[_EN_NOUN[w] for w in things], singular=True)
    return [*x, "没有", _EN_VERB[verb].zh, *y, *([COMMA] if rng.random() < 0.7 else []), "因为",
            "它", "太", _EN_ADJ[adj].zh, "了"]


def simple_words(rng: random.Random) -> list[str]:
    """'N 太 ADJ 了' ("the N was too ADJ"), each adjective with nouns of its class."""
    if rng.random() < 0.5:
        nouns, adjs = [_EN_NOUN[w] for w in BECAUSE_ANIMALS], ANIMATE_ADJ
    else:
        things, thing_adj = (s.split() for s in BECAUSE_VERBS[rng.choice(list(BECAUSE_VERBS))])
        nouns, adjs = [_EN_NOUN[w] for w in things], thing_adj
    return [*noun_phrase(rng, nouns=nouns, singular=True), "太", _EN_ADJ[rng.choice(adjs)].zh,
            "了"]


def sentence_words(rng: random.Random) -> list[str]:
    """One Chinese sentence of the grammar, as its words (a final 。 half of the time)."""
    r = rng.random()
    words = (because_words(rng) if r < BECAUSE_SHARE else simple_words(rng)
             if r < BECAUSE_SHARE + SIMPLE_SHARE else everyday_words(rng))
    return words + ([STOP] if rng.random() < 0.5 else [])


def sample(rng: random.Random) -> Pair:
    words = sentence_words(rng)
    return Pair("".join(words), " ".join(translate_aligned(words)[0]))


def split_key(pair: Pair) -> str:
    """What the held-out split hashes: the source without "，" and "。" (a sentence and its
    punctuated twin are on the same side)."""
    return pair.source.replace(COMMA, "").replace(STOP, "")


def dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    return make_split(sample, split, n, seed, key=split_key)


def because_dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    """n pairs of the textbook construction only, of one split (the same hash split)."""
    def one(rng: random.Random) -> Pair:
        words = because_words(rng) + ([STOP] if rng.random() < 0.5 else [])
        return Pair("".join(words), " ".join(translate_aligned(words)[0]))

    return make_split(one, split, n, seed, key=split_key)


# ---- translation with its word alignment --------------------------------------------------
Links = list[tuple[int, int]]  # (English word index, Chinese word index)


def _noun_phrase(w: list[str], i: int) -> tuple[list[tuple[str, list[int]]], bool, int]:
    """A noun phrase from w[i]: its English words each with the Chinese word indices it
    translates, whether it is plural, and the next index."""
    det: tuple[str, list[int]] | None = None
    number: tuple[str, list[int]] | None = None
    plural = False

    def numeral(j: int) -> int:
        nonlocal number, plural
        if j + 1 < len(w) and w[j] in NUMBERS and w[j + 1] in MEASURES:
            number, plural = (NUMBERS[w[j]], [j, j + 1]), w[j] != "一"
            return j + 2
        return j

    at = i
    if i < len(w) and w[i] in DEMONSTRATIVES:
        if i + 1 < len(w) and w[i + 1] in MEASURES:
            det, i = (DEMONSTRATIVES[w[i]][0], [i, i + 1]), i + 2
        else:
            j = numeral(i + 1)
            if j == i + 1 or not plural:
                raise ValueError(f"{w[i]!r} needs a measure word or a number: {w[i:]!r}")
            det, i = (DEMONSTRATIVES[w[i]][1], [at]), j
    elif i < len(w) and w[i] in PLURAL_DETS:
        det, plural, i = (PLURAL_DETS[w[i]], [i]), True, i + 1
    elif i + 1 < len(w) and w[i] in _ZH_PRONOUN and w[i + 1] == "的" and _ZH_PRONOUN[w[i]][3]:
        det, i = (_ZH_PRONOUN[w[i]][3], [i, i + 1]), numeral(i + 2)
        if number is not None and not plural:
            raise ValueError(f"'一' after {w[at]!r}的: {w[at:]!r}")
    else:
        j = numeral(i)
        if j > i and not plural:
            det, number = number, None
        i = j
    adj = None
    if i + 1 < len(w) and w[i] in _ZH_ADJ and w[i + 1] == "的":
        adj, i = (_ZH_ADJ[w[i]].en, [i, i + 1]), i + 2
    if i >= len(w) or w[i] not in _ZH_NOUN:
        raise ValueError(f"expected a noun at {w[i:]!r}")
    noun = _ZH_NOUN[w[i]]
    measures = [w[k] for k in (number or det or ("", []))[1] if w[k] in MEASURES]
    if measures and measures[0] != noun.measure:
        raise ValueError(f"{noun.zh} takes the measure word {noun.measure}, not {measures[0]}")
    if det is None and number is None:
        det = ("the", [i])
    words = [x for x in (det, number, adj) if x is not None]
    words.append((noun.en_pl if plural else noun.en, [i]))
    if words[0][0] == "a" and words[1][0][0] in "aeiou":
        words[0] = ("an", words[0][1])
    return words, plural, i + 1


def _verb(en: str, person: str, negation: str | None) -> list[str]:
    if negation == "没有":
        return ["did", "not", *en.split()]
    if negation == "不":
        return ["does" if person == "3s" else "do", "not", *en.split()]
    return (en_fr.en_third_person(en) if person == "3s" else en).split()


def translate_aligned(text: str | list[str]) -> tuple[list[str], Links]:
    """The English translation of a Chinese sentence of the grammar (a text, or its words),
    word by word: (English words, links), links being (English word index, Chinese word
    index) pairs over the source tokens (split_words), sorted. ValueError if the text is not
    a sentence of the grammar. Every English word has at least one link:

    - nouns: their noun; "the" of a bare noun: the noun; "a"/"an"/numbers: the number and
      the measure word; "this"/"that": 这/那 and the measure word; "these"/"those" with a
      number: 这/那; "these"/"those"/"some" alone: 这些/那些/一些; "my", "your" ...: the
      pronoun and 的; an adjective: the adjective and 的;
    - pronouns: the pronoun; the verb: the verb; "do"/"does" + "not": 不; "did" + "not": 没有;
    - "because": 因为, "it": 它, "was"/"were": 了, "too": 太, the adjective: the adjective.
    "，" and "。" link nothing.
    """
    w = split_words(text) if isinstance(text, str) else list(text)
    end = len(w) - (1 if w and w[-1] == STOP else 0)
    if end == 0:
        raise ValueError("empty sentence")
    w = w[:end]
    out: list[tuple[str, list[int]]] = []
    i = 0
    if w[0] in _ZH_PRONOUN and not (len(w) > 1 and w[1] == "的"):
        _, en, _, _, person = _ZH_PRONOUN[w[0]]
        if w[0] == "它":
            raise ValueError("它 is only the 'it' of '因为它太 ADJ 了'")
        out += [(e, [0]) for e in en.split()]
        i = 1
    else:
        np_words, plural, i = _noun_phrase(w, 0)
        out += np_words
        person = "3p" if plural else "3s"
        if i == len(w):  # a noun phrase alone
            return _finish(out)
        if w[i] == "太":  # "N 太 ADJ 了": "the N was too ADJ"
            if w[i + 1:] and len(w) == i + 3 and w[i + 1] in _ZH_ADJ and w[i + 2] == "了":
                out += [("were" if plural else "was", [i + 2]), ("too", [i]),
                        (_ZH_ADJ[w[i + 1]].en, [i + 1])]
                return _finish(out)
            raise ValueError(f"expected 太 ADJ 了 at {w[i:]!r}")
    negation = w[i] if i < len(w) and w[i] in ("不", "没有") else None
    at_neg = i
    i += negation is not None
    if i >= len(w) or w[i] not in _ZH_VERB:
        raise ValueError(f"expected a verb at {w[i:]!r}")
    verb, transitive = _ZH_VERB[w[i]]
    verb_en = _verb(verb.en, person, negation)
    n_aux = 2 if negation else 0
    out += [(e, [at_neg] if k < n_aux else [i]) for k, e in enumerate(verb_en)]
    i += 1
    because = "因为" in w
    if verb.en == "cross" and not because:
        raise ValueError("过 (cross) is only in '... 没有过 Y，因为它太 ADJ 了'")
    if i < len(w) and transitive:
        if w[i] in _ZH_PRONOUN and not (i + 1 < len(w) and w[i + 1] == "的"):
            if w[i] == "它" and because:
                raise ValueError("expected an object noun before 因为")
            out += [(e, [i]) for e in _ZH_PRONOUN[w[i]][2].split()]
            i += 1
        else:
            np_words, _, i = _noun_phrase(w, i)
            out += np_words
    elif transitive:
        raise ValueError(f"{verb.zh} takes an object")
    if because:
        if negation != "没有" or person not in ("3s",):
            raise ValueError("the because-sentence is 'X 没有 VERB Y，因为它太 ADJ 了'")
        if i < len(w) and w[i] == COMMA:
            i += 1
        rest = w[i:]
        if len(rest) != 5 or rest[:3] != ["因为", "它", "太"] or rest[3] not in _ZH_ADJ \
                or rest[4] != "了":
            raise ValueError(f"expected 因为它太 ADJ 了 at {rest!r}")
        out += [("because", [i]), ("it", [i + 1]), ("was", [i + 4]), ("too", [i + 2]),
                (_ZH_ADJ[rest[3]].en, [i + 3])]
        i += 5
    if i != len(w):
        raise ValueError(f"unexpected words at the end: {w[i:]!r}")
    return _finish(out)


def _finish(out: list[tuple[str, list[int]]]) -> tuple[list[str], Links]:
    words: list[str] = []
    links: Links = []
    for en, ks in out:
        links += [(len(words), k) for k in ks]
        words.append(en)
    return words, sorted(links)


def translate(chinese: str) -> str:
    """The English the grammar gives a Chinese sentence: translate("两只黑色的猫") ==
    "two black cats" (ValueError if it is not a sentence of the grammar)."""
    return " ".join(translate_aligned(chinese)[0])


def word_alignment(pair: Pair) -> Links:
    """(English word index, Chinese word index) links of a pair whose target is the
    grammar's translation of its source; ValueError when the source is not a sentence of
    the grammar or the target is not its translation (a model's mistake)."""
    en, links = translate_aligned(pair.source)
    if pair.target.lower().split() != en:
        raise ValueError(f"{pair.target!r} is not the translation of {pair.source!r}: "
                         f"{' '.join(en)!r}")
    return links


# ---- vocabularies and evaluation ----------------------------------------------------------
def english_words() -> list[str]:
    """Every English word the grammar can produce."""
    words = ["the a an some this that these those two three four five did do does not "
             "because it was were too", *(p[1] for p in PRONOUNS), *(p[2] for p in PRONOUNS),
             *(p[3] for p in PRONOUNS if p[3])]
    words += [f"{n.en} {n.en_pl}" for n in NOUNS] + [a.en for a in ADJS]
    words += [f"{v.en} {en_fr.en_third_person(v.en)}" for v in VERBS_TRANSITIVE +
              VERBS_INTRANSITIVE]
    return words


def build_vocabs(pairs: list[Pair]) -> dict[str, Vocab]:
    """Word vocabularies over the whole lexicon (so no generated word is ever <unk>); the
    source one segments Chinese by maximum matching over its words."""
    return {"source": Vocab.build([" ".join(lexicon())], "word", segment=True),
            "target": Vocab.build(english_words(), "word")}


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    """The held-out set (exact match, BLEU) and held-out textbook sentences (exact match)."""
    from .common import evaluate_translation

    metrics = evaluate_translation(model, vocabs, test, bleu=True)
    because = evaluate_translation(model, vocabs, because_dataset("test", N_BECAUSE_TEST, 0))
    metrics["errors"] += because.pop("errors")
    metrics["because"] = because
    return metrics
