"""Generate the synthetic English→Chinese demo corpus with gold word alignments.

Sentences come from a small hand-written grammar. Every production emits its English words,
its Chinese words and the links between them, so each pair carries a word alignment that is
known by construction. The grammar covers what attention has to learn: reordering (time and
place before the verb, relative clauses and place phrases before the noun, question words left
in place, clause-final 以后 / 的时候), one-to-many and many-to-one words (measure words,
negation, aspect, multiword names and idioms) and English words with no Chinese counterpart.

    python data/generate_demo.py --out data/demo --seed 1234

writes {train,dev,test}.{en,zh,align}; the alignment files are in Pharaoh format (0-based
``i-j``, i an English word index, j a Chinese word index, sure links only).
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DEFAULT_SEED = 1234
SPLIT_SIZES = {"dev": 500, "test": 500, "train": 10_000}  # generated in this order
MAX_DEPTH = 2  # noun phrases nest relative clauses at most this deep

# Words that the grammar leaves unaligned by design: articles and auxiliaries that Chinese
# does not express, 的 after adjectives and place phrases, and the Chinese comma that a
# clause-final English "because", "after", ... leaves without an English comma.
UNALIGNED_EN = ("the", "a", "an", "do", "does", "am", "is", "are", "was", "were", "to")
UNALIGNED_ZH = ("的", "，")


# --- Aligned phrases -------------------------------------------------------------------------


class Link:
    """One alignment group: every English word and every Chinese word holding it are linked."""

    __slots__ = ()


Token = tuple[str, Link | None]


@dataclass(frozen=True)
class Phrase:
    """Aligned English and Chinese words; words that share a `Link` are aligned."""

    en: tuple[Token, ...] = ()
    zh: tuple[Token, ...] = ()

    def __add__(self, other: Phrase) -> Phrase:
        """Concatenates two phrases in the same order on both sides."""
        return Phrase(self.en + other.en, self.zh + other.zh)


EMPTY = Phrase()


def words(text: str, link: Link | None = None) -> tuple[Token, ...]:
    """Splits `text` on whitespace, giving every word the same link."""
    return tuple((word, link) for word in text.split())


def lex(en: str, zh: str) -> Phrase:
    """Links every English word of `en` to every Chinese word of `zh`."""
    link = Link()
    return Phrase(words(en, link), words(zh, link))


def aligned(en: str, zh: str) -> Phrase:
    """Builds a phrase from words tagged `word:k`: equal tags are linked, untagged words are not."""
    groups: dict[str, Link] = {}

    def side(text: str) -> tuple[Token, ...]:
        tokens = []
        for item in text.split():
            word, _, tag = item.partition(":")
            tokens.append((word, groups.setdefault(tag, Link()) if tag else None))
        return tuple(tokens)

    return Phrase(side(en), side(zh))


def tagged(text: str, tag: int) -> str:
    """Tags every word of `text` for `aligned`."""
    return " ".join(f"{word}:{tag}" for word in text.split())


def frame(en: str, zh: str, inner: Phrase) -> Phrase:
    """Puts `inner` after the English words and at `{}` in the Chinese words linked to them."""
    before, _, after = zh.partition("{}")
    link = Link()
    return Phrase(words(en, link) + inner.en, words(before, link) + inner.zh + words(after, link))


def reorder(en_order: Sequence[Phrase], zh_order: Sequence[Phrase]) -> Phrase:
    """Joins phrases in English order on the English side and in Chinese order on the other."""
    return Phrase(
        tuple(token for part in en_order for token in part.en),
        tuple(token for part in zh_order for token in part.zh),
    )


# --- Lexicon ---------------------------------------------------------------------------------


def _rows(table: str) -> list[list[str]]:
    """Splits a table of `|`-separated cells into rows, skipping blank and `#` lines."""
    lines = (line.strip() for line in table.splitlines())
    return [[cell.strip() for cell in line.split("|")] for line in lines if line and line[0] != "#"]


@dataclass(frozen=True)
class Noun:
    """A noun: English forms, Chinese word, how it is counted, and what it can stand for."""

    singular: str
    plural: str  # "" for nouns that are not counted
    zh: str
    measure: str  # a classifier (个, 本, ...), a container (cup, ...), "bare" or "the"
    kinds: tuple[str, ...]


NOUNS = [
    Noun(sg, "" if pl == "-" else pl, zh, measure, tuple(kinds.split()))
    for sg, pl, zh, measure, kinds in _rows("""
    # singular | plural | 中文 | classifier, container, bare or the | kinds
    apple | apples | 苹果 | 个 | food fruit
    orange | oranges | 桔子 | 个 | food fruit
    banana | bananas | 香蕉 | 根 | food fruit
    egg | eggs | 鸡蛋 | 个 | food
    cake | cakes | 蛋糕 | 块 | food dish
    dumpling | dumplings | 饺子 | 个 | food dish
    fish | fish | 鱼 | 条 | food animal
    rice | - | 米饭 | bowl | food
    bread | - | 面包 | piece | food dish
    meat | - | 肉 | piece | food
    ice cream | - | 冰淇淋 | bowl | food
    soup | - | 汤 | bowl | food dish
    tea | - | 茶 | cup | drink
    coffee | - | 咖啡 | cup | drink
    water | - | 水 | bottle | drink
    milk | - | 牛奶 | cup | drink
    juice | - | 果汁 | cup | drink
    breakfast | - | 早饭 | bare | meal
    lunch | - | 午饭 | bare | meal
    dinner | - | 晚饭 | bare | meal
    book | books | 书 | 本 | book
    novel | novels | 小说 | 本 | book
    newspaper | newspapers | 报纸 | 份 | book
    letter | letters | 信 | 封 | text
    story | stories | 故事 | 个 | text
    pen | pens | 笔 | 支 | thing
    bag | bags | 包 | 个 | thing container
    box | boxes | 盒子 | 个 | thing container
    cup | cups | 杯子 | 个 | thing
    computer | computers | 电脑 | 台 | thing
    phone | phones | 手机 | 部 | thing
    flower | flowers | 花 | 朵 | thing
    shirt | shirts | 衬衫 | 件 | clothes
    coat | coats | 外套 | 件 | clothes
    car | cars | 汽车 | 辆 | vehicle
    bicycle | bicycles | 自行车 | 辆 | vehicle
    bus | buses | 公共汽车 | 辆 | vehicle
    taxi | taxis | 出租车 | 辆 | vehicle
    table | tables | 桌子 | 张 | furniture
    chair | chairs | 椅子 | 把 | furniture
    bed | beds | 床 | 张 | furniture
    desk | desks | 书桌 | 张 | furniture
    cat | cats | 猫 | 只 | animal
    dog | dogs | 狗 | 只 | animal
    bird | birds | 鸟 | 只 | animal
    rabbit | rabbits | 兔子 | 只 | animal
    panda | pandas | 熊猫 | 只 | animal
    person | people | 人 | 个 | person
    student | students | 学生 | 个 | person job
    teacher | teachers | 老师 | 位 | person job
    doctor | doctors | 医生 | 位 | person job
    driver | drivers | 司机 | 个 | person job
    writer | writers | 作家 | 个 | person job
    police officer | police officers | 警察 | 个 | person job
    child | children | 孩子 | 个 | person
    man | men | 男人 | 个 | person
    woman | women | 女人 | 个 | person
    boy | boys | 男孩 | 个 | person
    girl | girls | 女孩 | 个 | person
    park | parks | 公园 | 个 | place
    school | schools | 学校 | 所 | place
    library | libraries | 图书馆 | 个 | place
    hospital | hospitals | 医院 | 家 | place
    bank | banks | 银行 | 家 | place
    restaurant | restaurants | 饭馆 | 家 | place
    train station | train stations | 火车站 | 个 | place
    shop | shops | 商店 | 家 | place
    zoo | zoos | 动物园 | 个 | place
    garden | gardens | 花园 | 个 | place
    house | houses | 房子 | 座 | place
    kitchen | kitchens | 厨房 | 个 | room
    classroom | classrooms | 教室 | 间 | room
    office | offices | 办公室 | 个 | room
    tree | trees | 树 | 棵 | landmark
    bridge | bridges | 桥 | 座 | landmark
    home | - | 家 | bare | home
    Beijing | - | 北京 | bare | city
    Shanghai | - | 上海 | bare | city
    London | - | 伦敦 | bare | city
    Paris | - | 巴黎 | bare | city
    New York | - | 纽约 | bare | city
    Hong Kong | - | 香港 | bare | city
    Tokyo | - | 东京 | bare | city
    Chinese | - | 中文 | bare | language subject
    English | - | 英语 | bare | language subject
    French | - | 法语 | bare | language subject
    Japanese | - | 日语 | bare | language subject
    math | - | 数学 | bare | subject
    history | - | 历史 | bare | subject
    art | - | 美术 | bare | subject
    music | - | 音乐 | bare | music
    song | songs | 歌 | 首 | song
    TV | - | 电视 | bare | media
    movie | movies | 电影 | 部 | media
    game | games | 游戏 | 个 | game
    football | - | 足球 | bare | foot sport
    basketball | - | 篮球 | bare | ball sport
    tennis | - | 网球 | bare | ball sport
    table tennis | - | 乒乓球 | bare | ball sport
    volleyball | - | 排球 | bare | ball sport
    chess | - | 象棋 | bare | board
    piano | - | 钢琴 | the | keys
    guitar | - | 吉他 | the | keys
    violin | - | 小提琴 | the | bow
    homework | - | 作业 | bare | homework
    weather | - | 天气 | the | weather
    """)
]
NOUNS_BY_KIND: dict[str, list[Noun]] = {}
for _noun in NOUNS:
    for _kind in _noun.kinds:
        NOUNS_BY_KIND.setdefault(_kind, []).append(_noun)

CONTAINERS = {
    singular: (plural, zh)
    for singular, plural, zh in _rows("""
    cup | cups | 杯
    bottle | bottles | 瓶
    bowl | bowls | 碗
    piece | pieces | 块
    """)
}
NUMBERS = dict(
    _rows("""
    two | 两
    three | 三
    four | 四
    five | 五
    six | 六
    seven | 七
    eight | 八
    nine | 九
    ten | 十
    """)
)
# Kinds whose nouns name a location: one of each, with "the", not a number of them.
LOCATION_KINDS = ("place", "room", "landmark", "furniture", "home", "city")


@dataclass(frozen=True)
class Pronoun:
    """A personal pronoun in its three English cases, with its Chinese word and agreement."""

    subject: str
    object: str
    possessive: str
    zh: str
    agr: str  # "1sg" (I), "3sg" or "pl"


PRONOUNS = [
    Pronoun(*row)
    for row in _rows("""
    I | me | my | 我 | 1sg
    you | you | your | 你 | pl
    he | him | his | 他 | 3sg
    she | her | her | 她 | 3sg
    we | us | our | 我们 | pl
    they | them | their | 他们 | pl
    """)
]
FAMILY = _rows("""
    # singular | plural | 中文 (always after a possessive: "my mother" 我 的 妈妈)
    mother | - | 妈妈
    father | - | 爸爸
    older brother | older brothers | 哥哥
    younger brother | younger brothers | 弟弟
    older sister | older sisters | 姐姐
    younger sister | younger sisters | 妹妹
    grandmother | - | 奶奶
    grandfather | - | 爷爷
    uncle | - | 叔叔
    aunt | - | 阿姨
    son | sons | 儿子
    daughter | daughters | 女儿
    - | parents | 父母
    friend | friends | 朋友
    neighbor | neighbors | 邻居
    """)
NAMES = _rows("""
    # tagged for `aligned`: titles follow the surname in Chinese
    Tom:1 | 汤姆:1
    Mary:1 | 玛丽:1
    Jack:1 | 杰克:1
    Lucy:1 | 露西:1
    Li:1 Lei:1 | 李雷:1
    Han:1 Meimei:1 | 韩梅梅:1
    Xiao:1 Ming:1 | 小明:1
    Wang:1 Fang:1 | 王芳:1
    Mr:1 Wang:2 | 王:2 先生:1
    Ms:1 Li:2 | 李:2 女士:1
    Dr:1 Zhang:2 | 张:2 医生:1
    Mrs:1 Smith:2 | 史密斯:2 太太:1
    """)


@dataclass(frozen=True)
class Verb:
    """A verb: its English forms, its Chinese word for each object kind, and its flags."""

    forms: tuple[str, str, str, str]  # base, third person singular, past, -ing
    zh: dict[str, str]  # object kind ("" if intransitive) -> Chinese, `{}` marking the object
    flags: frozenset[str]  # act, animal, motion, travel, noprog, mei (negated with 没)

    def present(self, agr: str) -> str:
        """The present tense form that agrees with `agr`."""
        return self.forms[1] if agr == "3sg" else self.forms[0]


def _verb(base: str, third: str, past: str, ing: str, zh: str, kinds: str, flags: str) -> Verb:
    """Builds a verb from a table row; `kind=中文` overrides the Chinese for one kind."""
    by_kind = {}
    for item in kinds.split():
        kind, _, own = item.partition("=")
        by_kind["" if kind == "-" else kind] = own or zh
    return Verb((base, third, past, ing), by_kind, frozenset(flags.split()))


VERBS = [
    _verb(*row)
    for row in _rows("""
    # base | 3sg | past | -ing | 中文 | object kinds (- if none) | flags
    eat | eats | ate | eating | 吃 | food | act animal
    drink | drinks | drank | drinking | 喝 | drink | act animal
    have | has | had | having | 吃 | meal | act
    read | reads | read | reading | 看 | book text | act
    write | writes | wrote | writing | 写 | text | act
    buy | buys | bought | buying | 买 | food drink book thing clothes vehicle animal | act
    make | makes | made | making | 做 | dish | act
    cook | cooks | cooked | cooking | 做 | meal dish | act
    clean | cleans | cleaned | cleaning | 打扫 | room | act
    look for | looks for | looked for | looking for | 找 | thing animal person | act
    see | sees | saw | seeing | 看见 | animal person vehicle | act noprog
    watch | watches | watched | watching | 看 | media | act
    listen to | listens to | listened to | listening to | 听 | music song | act
    sing | sings | sang | singing | 唱 | song | act
    play | plays | played | playing | 玩 | game foot=踢 ball=打 keys=弹 bow=拉 board=下 | act
    learn | learns | learned | learning | 学 | subject | act
    study | studies | studied | studying | 学习 | subject | act
    teach | teaches | taught | teaching | 教 | subject | act
    speak | speaks | spoke | speaking | 说 | language | act
    do | does | did | doing | 做 | homework | act
    meet | meets | met | meeting | 见 | person | act
    help | helps | helped | helping | 帮助 | person | act
    visit | visits | visited | visiting | 看望 | person place=参观 city=参观 | act
    call | calls | called | calling | 给 {} 打电话 | person | act
    talk to | talks to | talked to | talking to | 和 {} 说话 | person | act
    write to | writes to | wrote to | writing to | 给 {} 写信 | person | act
    wait for | waits for | waited for | waiting for | 等 | person vehicle | act
    take care of | takes care of | took care of | taking care of | 照顾 | person animal | act
    go to | goes to | went to | going to | 去 | place city | act motion travel
    come to | comes to | came to | coming to | 来 | place city | act motion travel
    go home | goes home | went home | going home | 回家 | - | act travel
    go shopping | goes shopping | went shopping | going shopping | 购物 | - | act
    swim | swims | swam | swimming | 游泳 | - | act animal
    run | runs | ran | running | 跑步 | - | act animal
    sleep | sleeps | slept | sleeping | 睡觉 | - | act animal
    work | works | worked | working | 工作 | - | act
    dance | dances | danced | dancing | 跳舞 | - | act
    sing | sings | sang | singing | 唱歌 | - | act
    cook | cooks | cooked | cooking | 做饭 | - | act
    take a walk | takes a walk | took a walk | taking a walk | 散步 | - | act
    get up | gets up | got up | getting up | 起床 | - | act
    like | likes | liked | liking | 喜欢 | food drink music subject sport city person | animal
    love | loves | loved | loving | 爱 | food drink animal book music city person | -
    know | knows | knew | knowing | 认识 | person | -
    want | wants | wanted | wanting | 想要 | food drink book thing clothes vehicle animal | -
    need | needs | needed | needing | 需要 | food drink book thing clothes | -
    have | has | had | having | 有 | thing clothes vehicle animal book | mei
    """)
]


@dataclass(frozen=True)
class Adjective:
    """An adjective with its Chinese word, how it is used, and the nouns it describes."""

    en: str
    zh: str
    use: str  # "plain": before a noun as it is; "de": before a noun with 的; "pred": after "be"
    comparative: str  # "" when the grammar does not compare with it
    kinds: tuple[str, ...]


ADJECTIVES = [
    Adjective(en, zh, use, "" if comparative == "-" else comparative, tuple(kinds.split()))
    for en, zh, use, comparative, kinds in _rows("""
    # English | 中文 | use | comparative | kinds
    big | 大 | plain | bigger | fruit thing animal place room city clothes vehicle furniture
    small | 小 | plain | smaller | fruit thing animal place room city clothes vehicle furniture
    new | 新 | plain | newer | thing clothes vehicle book place room furniture
    old | 旧 | plain | older | thing clothes vehicle book furniture
    old | 老 | plain | older | person animal
    red | 红 | plain | - | fruit thing clothes vehicle
    white | 白 | plain | - | thing clothes vehicle animal
    black | 黑 | plain | - | thing clothes vehicle animal
    good | 好 | plain | better | book media person song
    long | 长 | plain | longer | book text song media
    fresh | 新鲜 | de | fresher | food
    sweet | 甜 | de | sweeter | fruit dish
    delicious | 好吃 | de | - | food
    delicious | 好喝 | de | - | drink
    hot | 热 | de | hotter | drink weather
    cold | 冷 | de | colder | drink weather
    cheap | 便宜 | de | cheaper | food drink thing clothes book vehicle
    expensive | 贵 | de | more expensive | food drink thing clothes book vehicle city
    interesting | 有意思 | de | more interesting | book text media subject
    beautiful | 漂亮 | de | more beautiful | clothes person place city room thing
    young | 年轻 | de | younger | person
    tall | 高 | pred | taller | person
    smart | 聪明 | de | smarter | person animal
    busy | 忙 | pred | busier | person
    tired | 累 | pred | - | person
    happy | 高兴 | pred | happier | person
    hungry | 饿 | pred | hungrier | person animal
    quiet | 安静 | de | quieter | place room city
    clean | 干净 | de | cleaner | place room clothes city
    famous | 有名 | de | more famous | person place city book
    difficult | 难 | pred | more difficult | subject
    easy | 容易 | pred | easier | subject
    important | 重要 | de | more important | subject
    nice | 好 | pred | better | weather
    far | 远 | pred | farther | place city
    fast | 快 | pred | faster | vehicle animal
    """)
]


@dataclass(frozen=True)
class Preposition:
    """A place preposition and the Chinese frame around its noun, `{}` marking the noun."""

    en: str
    locative: str  # where something happens: "in the park" 在 公园 (before the verb)
    existential: str  # where something is: "there is … in the box" 盒子 里 ("-": not used)
    kinds: tuple[str, ...]


PREPOSITIONS = [
    Preposition(en, locative, existential, tuple(kinds.split()))
    for en, locative, existential, kinds in _rows("""
    # English | where something happens | where something is | nouns
    in | 在 {} | {} 里 | place room
    in | 在 {} | - | city
    in | 在 {} 里 | {} 里 | container
    at | 在 {} | - | place home
    on | 在 {} 上 | {} 上 | furniture
    under | 在 {} 下面 | {} 下面 | furniture landmark
    near | 在 {} 附近 | {} 附近 | place city landmark
    next to | 在 {} 旁边 | {} 旁边 | place furniture landmark
    behind | 在 {} 后面 | {} 后面 | place furniture landmark
    in front of | 在 {} 前面 | {} 前面 | place landmark
    """)
]
ACTIVITY_PLACES = ("place", "room", "city", "home", "landmark")  # where one eats, reads, ...
THING_PLACES = ("place", "room", "furniture", "container", "landmark")  # where things are


@dataclass(frozen=True)
class Day:
    """A time expression in `aligned` notation, with the tenses it goes with."""

    en: str
    en_before_part: str  # its form before "morning", "afternoon", "evening" ("" if none)
    zh: str
    tense: str  # past, future, habit (present habits), any, now


WEEKDAYS = _rows("""
    Monday | 星期一
    Friday | 星期五
    Saturday | 星期六
    Sunday | 星期天
    """)
DAYS = [
    Day(en, "" if before == "-" else before, zh, tense)
    for en, before, zh, tense in _rows("""
    # alone | before a part of the day | 中文 | tense
    yesterday:1 | yesterday:1 | 昨天:1 | past
    today:1 | this:1 | 今天:1 | any
    tomorrow:1 | tomorrow:1 | 明天:1 | future
    every:1 day:1 | every:1 | 每天:1 | habit
    last:1 night:1 | - | 昨天:1 晚上:1 | past
    tonight:1 | - | 今天:1 晚上:1 | future
    last:1 week:2 | - | 上:1 周:2 | past
    next:1 week:2 | - | 下:1 周:2 | future
    every:1 week:2 | - | 每:1 周:2 | habit
    last:1 year:1 | - | 去年:1 | past
    next:1 year:1 | - | 明年:1 | future
    the day:1 after:1 tomorrow:1 | - | 后天:1 | future
    the day:1 before:1 yesterday:1 | - | 前天:1 | past
    two:1 days:2 ago:3 | - | 两:1 天:2 前:3 | past
    three:1 years:2 ago:3 | - | 三:1 年:2 前:3 | past
    on:1 the weekend:1 | - | 周末:1 | any
    in:1 summer:1 | - | 夏天:1 | habit
    in:1 winter:1 | - | 冬天:1 | habit
    now:1 | - | 现在:1 | now
    right:1 now:1 | - | 现在:1 | now
    """)
] + [
    Day(en, en, zh, tense)
    for name, day in WEEKDAYS
    for en, zh, tense in (
        (f"on:1 {name}:1", f"{day}:1", "any"),
        (f"every:1 {name}:2", f"每:1 个:1 {day}:2", "habit"),
        (f"last:1 {name}:2", f"上:1 个:1 {day}:2", "past"),
        (f"next:1 {name}:2", f"下:1 个:1 {day}:2", "future"),
    )
]
PARTS_OF_DAY = _rows("""
    # English | 中文 | hours on the clock
    morning | 早上 | six seven eight nine ten
    afternoon | 下午 | two three four five
    evening | 晚上 | six seven eight nine ten
    """)
# Which time expressions each verb form takes.
TIME_TENSES = {
    "present": ("habit", "any"),
    "past": ("past", "any"),
    "future": ("future", "any"),
    "progressive": ("now",),
    "can": ("future", "habit", "any"),
    "want": ("future", "any"),
    "like": ("habit",),
    "must": ("future", "any"),
}
FREQUENCIES = _rows("""
    often | 经常
    usually | 通常
    sometimes | 有时候
    always | 总是
    never | 从来 不
    """)
MANNERS = _rows("""
    slowly | 慢慢 地
    quickly | 很快 地
    quietly | 安静 地
    happily | 高兴 地
    carefully | 认真 地
    loudly | 大声 地
    """)
VEHICLES = _rows("""
    by:1 bus:2 | 坐:1 公共汽车:2
    by:1 train:2 | 坐:1 火车:2
    by:1 taxi:2 | 坐:1 出租车:2
    by:1 plane:2 | 坐:1 飞机:2
    by:1 subway:2 | 坐:1 地铁:2
    by:1 bike:2 | 骑:1 自行车:2
    on:1 foot:1 | 走路:1
    """)

# Auxiliaries of each verb form in `aligned` notation ("English | 中文"): declarative,
# negative, and the part moved before the subject in questions ("" when not used).
AUXILIARIES = {
    "present": ("", "{do}:1 not:1 | {neg}:1", "{do} |"),
    "past": ("", "did:1 not:1 | 没:1", "did:1 |"),  # the question's did is linked to 了
    "future": ("will:1 | 会:1", "will:1 not:2 | 不:2 会:1", "will:1 | 会:1"),
    "progressive": ("{be}:1 | 正在:1", "", "{be}:1 | 正在:1"),
    "can": ("can:1 | 能:1", "cannot:1 | 不:1 能:1", "can:1 | 能:1"),
    "want": ("want{s}:1 to | 想:1", "{do}:1 not:1 want:2 to | 不:1 想:2", "{do} |"),
    "like": ("like{s}:1 | 喜欢:1", "{do}:1 not:1 like:2 | 不:1 喜欢:2", "{do} |"),
    "must": ("{have}:1 to:1 | 必须:1", "", ""),
}
# "Do you want to …?" and "Do you like …?" keep their own verb after the moved do.
QUESTION_REST = {"want": "want:1 to | 想:1", "like": "like:1 | 喜欢:1"}
DO = {"1sg": "do", "3sg": "does", "pl": "do"}
BE = {"1sg": "am", "3sg": "is", "pl": "are"}
BE_PAST = {"1sg": "was", "3sg": "was", "pl": "were"}
HAVE = {"1sg": "have", "3sg": "has", "pl": "have"}
FORMS = (("present", 6), ("past", 5), ("future", 2), ("progressive", 1.5), ("can", 1.5))
FORMS += (("want", 1.5), ("like", 1), ("must", 1))
DEGREES = (
    ("{be} very:1 {adj}", "很:1 {adj}"),
    ("{be} really:1 {adj}", "真:1 {adj}"),
    ("{be} too:1 {adj}", "太:1 {adj} 了:1"),
    ("{be}:1 not:1 {adj}", "不:1 {adj}"),
    ("{be}:1 not:1 very:2 {adj}", "不:1 太:2 {adj}"),
)
# Subordinators: the Chinese before the clause, after it, and before the main clause.
SUBORDINATORS = {
    "because": ("因为", "", "所以"),
    "if": ("如果", "", ""),
    "after": ("", "以后", ""),
    "before": ("", "以前", ""),
    "when": ("", "的 时候", ""),
}
COORDINATORS = {
    "and": "and:1 | ，:1",
    "but": ",:1 but:2 | ，:1 但是:2",
    "so": ",:1 so:2 | ，:1 所以:2",
}


# --- Sampling --------------------------------------------------------------------------------


def chance(rng: random.Random, p: float) -> bool:
    """True with probability `p`."""
    return rng.random() < p


def weighted(rng: random.Random, options: Sequence[tuple[T, float]]) -> T:
    """Picks one option with probability proportional to its weight."""
    return rng.choices([option for option, _ in options], [weight for _, weight in options])[0]


# --- Noun phrases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NounPhrase:
    """A noun phrase with the agreement its verb needs."""

    phrase: Phrase
    agr: str  # "1sg" (I), "3sg" or "pl": picks am/is/are, do/does, eat/eats


COUNT_DETERMINERS = (("bare", 3), ("the", 4), ("a", 3), ("number", 3), ("this", 1))
COUNT_DETERMINERS += (("these", 1), ("some", 1), ("many", 1), ("my", 2))
MASS_DETERMINERS = (("bare", 4), ("the", 2), ("a", 2), ("number", 1), ("some", 1))
MASS_DETERMINERS += (("many", 1), ("my", 1))
LOCATION_DETERMINERS = (("the", 6), ("my", 1))
SINGULAR_DETERMINERS = ("a", "this")
PLURAL_DETERMINERS = ("bare", "number", "these", "some", "many")


def article(following: str) -> str:
    """The indefinite article before `following`."""
    return "an" if following[0] in "aeiou" else "a"


def possessive(rng: random.Random) -> Phrase:
    """A possessive determiner such as "my" → 我 的."""
    pronoun = rng.choice(PRONOUNS)
    return lex(pronoun.possessive, f"{pronoun.zh} 的")


def determiner(rng: random.Random, noun: Noun, det: str, following: str) -> Phrase:
    """The determiner and its Chinese, with the measure word that counting needs."""
    if noun.measure in CONTAINERS:
        return mass_determiner(rng, noun, det)
    if det == "a":
        return lex(article(following), f"一 {noun.measure}")
    if det == "number":
        number, zh = rng.choice(list(NUMBERS.items()))
        return lex(number, f"{zh} {noun.measure}")
    if det == "this":
        return rng.choice((lex("this", f"这 {noun.measure}"), lex("that", f"那 {noun.measure}")))
    return shared_determiner(rng, det)


def mass_determiner(rng: random.Random, noun: Noun, det: str) -> Phrase:
    """A determiner of a mass noun: containers count it ("two cups of" → 两 杯)."""
    plural, zh = CONTAINERS[noun.measure]
    if det == "a":
        return aligned(f"{article(noun.measure)}:1 {noun.measure}:2 of:2", f"一:1 {zh}:2")
    if det == "number":
        number, number_zh = rng.choice(list(NUMBERS.items()))
        return aligned(f"{number}:1 {plural}:2 of:2", f"{number_zh}:1 {zh}:2")
    if det == "many":
        return lex("a lot of", "很多")
    if det in ("this", "these"):
        return rng.choice((lex("this", "这"), lex("that", "那")))
    return shared_determiner(rng, det)


def shared_determiner(rng: random.Random, det: str) -> Phrase:
    """A determiner that count and mass nouns share."""
    if det == "the":
        return Phrase(words("the"))
    if det == "my":
        return possessive(rng)
    if det == "these":
        return rng.choice((lex("these", "这些"), lex("those", "那些")))
    if det == "some":
        return lex("some", "一些")
    if det == "many":
        return lex("many", "很多")
    return EMPTY


def attributive(rng: random.Random, noun: Noun, det: str) -> Phrase:
    """An adjective before the noun, or nothing; 的 follows longer adjectives unaligned."""
    options = [a for a in ADJECTIVES if a.use != "pred" and set(a.kinds) & set(noun.kinds)]
    if det == "my":  # "我 的 新鲜 的 苹果" stacks two 的: keep the plain adjectives only
        options = [a for a in options if a.use == "plain"]
    if not options or not chance(rng, 0.2):
        return EMPTY
    adjective = rng.choice(options)
    en, zh = tagged(adjective.en, 2), tagged(adjective.zh, 2)
    if chance(rng, 0.15):
        return aligned(f"very:1 {en}", f"很:1 {zh} 的")
    return aligned(en, zh + (" 的" if adjective.use == "de" else ""))


def common_phrase(
    rng: random.Random, noun: Noun, depth: int, dets: Sequence[tuple[str, float]] | None = None
) -> NounPhrase:
    """A noun with determiner, adjective and (after "the") a relative clause or place phrase."""
    if noun.measure in ("bare", "the"):
        the = Phrase(words("the")) if noun.measure == "the" else EMPTY
        return NounPhrase(the + lex(noun.singular, noun.zh), "3sg")
    if dets is None:
        locative = set(noun.kinds) & set(LOCATION_KINDS)
        mass = noun.measure in CONTAINERS
        dets = LOCATION_DETERMINERS if locative else MASS_DETERMINERS if mass else COUNT_DETERMINERS
    det = weighted(rng, dets)
    plural = noun_is_plural(rng, noun, det)
    adjective = attributive(rng, noun, det)
    head = lex(noun.plural if plural else noun.singular, noun.zh)
    following = (adjective.en + head.en)[0][0]
    base = determiner(rng, noun, det, following) + adjective + head
    modifier = noun_modifier(rng, noun, plural, depth) if det == "the" else EMPTY
    container_plural = det == "number" and noun.measure in CONTAINERS
    return NounPhrase(
        reorder([base, modifier], [modifier, base]), agreement(plural or container_plural)
    )


def noun_is_plural(rng: random.Random, noun: Noun, det: str) -> bool:
    """Whether a count noun takes its plural form after `det`."""
    if not noun.plural or det in SINGULAR_DETERMINERS:
        return False
    if det in PLURAL_DETERMINERS:
        return True
    return not set(noun.kinds) & set(LOCATION_KINDS) and chance(rng, 0.35)


def agreement(plural: bool) -> str:
    """The agreement of a third person noun phrase."""
    return "pl" if plural else "3sg"


def person_phrase(rng: random.Random, depth: int, case: str = "object") -> NounPhrase:
    """A person: pronoun (in `case`), name, family member or common noun."""
    source = weighted(rng, (("pronoun", 4), ("name", 2), ("family", 3), ("common", 2)))
    if source == "pronoun" and case != "none":
        pronoun = rng.choice(PRONOUNS)
        english = pronoun.subject if case == "subject" else pronoun.object
        return NounPhrase(lex(english, pronoun.zh), pronoun.agr)
    if source == "name":
        return NounPhrase(aligned(*rng.choice(NAMES)), "3sg")
    if source == "family":
        return family_phrase(rng)
    return common_phrase(rng, rng.choice(NOUNS_BY_KIND["person"]), depth)


def family_phrase(rng: random.Random) -> NounPhrase:
    """A family member or friend after a possessive, as in "my older brother" → 我 的 哥哥."""
    singular, plural, zh = rng.choice(FAMILY)
    use_plural = singular == "-" or (plural != "-" and chance(rng, 0.25))
    member = lex(plural if use_plural else singular, zh)
    return NounPhrase(possessive(rng) + member, agreement(use_plural))


def noun_phrase(
    rng: random.Random,
    kind: str,
    depth: int,
    case: str = "object",
    dets: Sequence[tuple[str, float]] | None = None,
) -> NounPhrase:
    """A noun phrase of `kind`, sometimes two of them joined by "and" (和)."""
    if depth < MAX_DEPTH and kind != "home" and chance(rng, 0.05):
        first, second = (single_phrase(rng, kind, depth + 1, dets=dets) for _ in range(2))
        if chinese(first.phrase) != chinese(second.phrase):
            return NounPhrase(first.phrase + lex("and", "和") + second.phrase, "pl")
    return single_phrase(rng, kind, depth, case, dets)


def single_phrase(
    rng: random.Random,
    kind: str,
    depth: int,
    case: str = "none",
    dets: Sequence[tuple[str, float]] | None = None,
) -> NounPhrase:
    """One noun phrase of `kind`; `case` "none" keeps pronouns out (they do not coordinate)."""
    if kind == "person":
        return person_phrase(rng, depth, case)
    return common_phrase(rng, rng.choice(NOUNS_BY_KIND[kind]), depth, dets)


def chinese(phrase: Phrase) -> list[str]:
    """The Chinese words of a phrase."""
    return [word for word, _ in phrase.zh]


def noun_modifier(rng: random.Random, noun: Noun, plural: bool, depth: int) -> Phrase:
    """A relative clause or place phrase after "the …", which Chinese puts before the noun."""
    if depth >= MAX_DEPTH:
        return EMPTY
    roll = rng.random() * (1 if depth == 0 else 4)  # nested modifiers are four times rarer
    if roll < 0.15:
        return relative_clause(rng, noun, plural, depth)
    if roll < 0.2 and set(noun.kinds) & {"person", "animal", "thing", "book", "food"}:
        return thing_place(rng, depth + 1) + Phrase(zh=words("的"))
    return EMPTY


def relative_clause(rng: random.Random, noun: Noun, plural: bool, depth: int) -> Phrase:
    """A relative clause: "the man who reads books" → 看 书 的 男人."""
    agent = "person" if "person" in noun.kinds else "animal" if "animal" in noun.kinds else ""
    if agent and (agent == "animal" or chance(rng, 0.6)):
        return subject_relative(rng, agent, agreement(plural), depth)
    return object_relative(rng, noun, depth)


def subject_relative(rng: random.Random, agent: str, agr: str, depth: int) -> Phrase:
    """A relative clause whose gap is the subject; who/that is linked to 的."""
    form = weighted(rng, (("present", 3), ("past", 2), ("progressive", 1)))
    verb, kind = choose_verb(rng, form, agent)
    gap = NounPhrase(EMPTY, agr)
    en, zh = clause_parts(plan_clause(rng, depth + 1, form, verb, kind, subject=gap, agent=agent))
    marker = lex("who" if agent == "person" else "that", "的")
    return reorder([marker, *en], [*zh, marker])


def object_relative(rng: random.Random, noun: Noun, depth: int) -> Phrase:
    """A relative clause whose gap is the object: "the book that I read" → 我 看 的 书."""
    options = [
        (verb, kind)
        for verb in VERBS
        for kind, zh in verb.zh.items()
        if kind in noun.kinds and "{}" not in zh
    ]
    if not options:
        return EMPTY
    verb, kind = rng.choice(options)
    form = "past" if "act" in verb.flags and chance(rng, 0.6) else "present"
    clause = plan_clause(rng, depth + 1, form, verb, kind, obj=EMPTY)
    en, zh = clause_parts(clause, perfective=False)  # 了 does not go inside 的 clauses
    marker = lex("that", "的")
    return reorder([marker, *en], [*zh, marker])


# --- Adverbials ------------------------------------------------------------------------------


def time_phrase(rng: random.Random, tenses: Sequence[str]) -> Phrase:
    """A time phrase; with a clock time Chinese goes from the larger unit to the smaller."""
    day = rng.choice([day for day in DAYS if day.tense in tenses])
    part, part_zh, hours = rng.choice(PARTS_OF_DAY)
    roll = rng.random()
    if roll < 0.25 and day.en_before_part:
        when = aligned(day.en_before_part, day.zh) + lex(part, part_zh)
    elif roll < 0.35 and "any" in tenses:
        when = aligned(f"in:1 the {part}:1", f"{part_zh}:1")
    else:
        return aligned(day.en, day.zh)
    if not chance(rng, 0.3):
        return when
    number = rng.choice(hours.split())
    clock = aligned(f"at:1 {number}:2 o'clock:1", f"{NUMBERS[number]}:2 点:1")
    return reorder([clock, when], [when, clock])


def place_phrase(rng: random.Random, depth: int) -> Phrase:
    """Where something happens, which Chinese says before the verb: "in the park" → 在 公园."""
    preposition = rng.choice([p for p in PREPOSITIONS if set(p.kinds) & set(ACTIVITY_PLACES)])
    kind = rng.choice([kind for kind in preposition.kinds if kind in ACTIVITY_PLACES])
    return frame(preposition.en, preposition.locative, noun_phrase(rng, kind, depth).phrase)


def thing_place(rng: random.Random, depth: int) -> Phrase:
    """Where something is, without 在: "under the table" → 桌子 下面."""
    preposition = rng.choice([p for p in PREPOSITIONS if p.existential != "-"])
    kind = rng.choice([kind for kind in preposition.kinds if kind in THING_PLACES])
    return frame(preposition.en, preposition.existential, single_phrase(rng, kind, depth).phrase)


def adverbials(
    rng: random.Random, verb: Verb, form: str, negative: bool, agent: str, depth: int
) -> dict[str, Phrase]:
    """Optional time, frequency, company, vehicle, place and manner phrases for a clause."""
    scale = 1.0 if depth == 0 else 0.4  # keep relative clauses shorter than main clauses
    act = "act" in verb.flags
    parts = {}
    if chance(rng, 0.45 * scale):
        parts["time"] = time_phrase(rng, TIME_TENSES[form])
    if form == "present" and not negative and "time" not in parts and chance(rng, 0.25 * scale):
        parts["frequency"] = lex(*rng.choice(FREQUENCIES))
    if act and agent == "person" and chance(rng, 0.15 * scale):
        parts["companion"] = frame("with", "和 {} 一起", person_phrase(rng, depth + 1).phrase)
    if "travel" in verb.flags and chance(rng, 0.4 * scale):
        parts["vehicle"] = aligned(*rng.choice(VEHICLES))
    if takes_place(verb, form) and chance(rng, 0.35 * scale):
        parts["place"] = place_phrase(rng, depth + 1)
    if act and chance(rng, 0.1 * scale):
        parts["manner"] = lex(*rng.choice(MANNERS))
    return parts


def takes_place(verb: Verb, form: str) -> bool:
    """Whether a clause can say where it happens (not with a destination or with 正在)."""
    return "act" in verb.flags and not verb.flags & {"motion", "travel"} and form != "progressive"


# --- Clauses ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """A clause before word order: its parts as aligned phrases, its verb and verb form."""

    subject: NounPhrase
    verb: Verb
    kind: str  # the object's kind ("" if intransitive)
    form: str  # a key of AUXILIARIES
    negative: bool = False
    obj: Phrase = EMPTY
    time: Phrase = EMPTY
    frequency: Phrase = EMPTY
    companion: Phrase = EMPTY
    vehicle: Phrase = EMPTY
    place: Phrase = EMPTY
    manner: Phrase = EMPTY
    reason: Phrase = EMPTY  # only "why" in questions


def verb_allows(verb: Verb, form: str, agent: str) -> bool:
    """Whether `verb` goes with the verb form and the kind of subject."""
    if agent == "animal" and "animal" not in verb.flags:
        return False
    if "act" not in verb.flags:  # states ("like", "know") stay in the simple present
        return form == "present"
    return not (form == "progressive" and "noprog" in verb.flags)


def choose_verb(rng: random.Random, form: str, agent: str = "person") -> tuple[Verb, str]:
    """A verb that goes with `form` and `agent`, and one of its object kinds."""
    verb = rng.choice([verb for verb in VERBS if verb_allows(verb, form, agent)])
    return verb, rng.choice(list(verb.zh))


def plan_clause(
    rng: random.Random,
    depth: int,
    form: str,
    verb: Verb,
    kind: str,
    *,
    subject: NounPhrase | None = None,
    obj: Phrase | None = None,
    negative: bool = False,
    agent: str = "person",
) -> Clause:
    """Chooses the subject, object and adverbials that the clause does not get given."""
    if subject is None:
        agent = "animal" if "animal" in verb.flags and chance(rng, 0.15) else "person"
        subject = noun_phrase(rng, agent, depth, case="subject")
    if obj is None:
        obj = object_phrase(rng, kind, subject, depth)
    parts = adverbials(rng, verb, form, negative, agent, depth)
    return Clause(subject, verb, kind, form, negative, obj, **parts)


def object_phrase(rng: random.Random, kind: str, subject: NounPhrase, depth: int) -> Phrase:
    """The object of `kind`, never the subject itself ("I help me")."""
    while kind:
        obj = noun_phrase(rng, kind, depth).phrase
        if chinese(obj) != chinese(subject.phrase):
            return obj
    return EMPTY


@dataclass(frozen=True)
class VerbGroup:
    """The verb and its auxiliaries, split where word order puts them apart."""

    front: Phrase  # the auxiliary that a question moves before the subject
    aux: Phrase  # auxiliaries and negation between subject and verb
    verb: Phrase  # the main verb, with the Chinese before its object
    tail: Phrase  # the Chinese after the object (给 … 打电话)


def parse(entry: str) -> Phrase:
    """Parses an "English | 中文" entry in `aligned` notation ("" gives an empty phrase)."""
    if not entry:
        return EMPTY
    en, zh = entry.split("|")
    return aligned(en, zh)


def verb_group(c: Clause, question: bool = False, perfective: bool = True) -> VerbGroup:
    """The auxiliaries and verb of a clause; the past adds 了, linked to the verb or to did."""
    agr = c.subject.agr
    fill = {"do": DO[agr], "be": BE[agr], "have": HAVE[agr], "s": "s" if agr == "3sg" else ""}
    fill["neg"] = "没" if "mei" in c.verb.flags else "不"
    declarative, negative, moved = AUXILIARIES[c.form]
    if question:
        front, aux = parse(moved.format(**fill)), parse(QUESTION_REST.get(c.form, ""))
    else:
        front, aux = EMPTY, parse((negative if c.negative else declarative).format(**fill))
    link = Link()
    before, _, after = c.verb.zh[c.kind].partition("{}")
    zh_before, zh_after = words(before, link), words(after, link)
    if c.form == "past" and not c.negative and perfective:
        le = (("了", front.en[0][1] if question else link),)
        zh_before, zh_after = (zh_before, zh_after + le) if zh_after else (zh_before + le, ())
    verb = Phrase(words(english_verb(c, question), link), zh_before)
    return VerbGroup(front, aux, verb, Phrase(zh=zh_after))


def english_verb(c: Clause, question: bool) -> str:
    """The English form of the main verb."""
    base, _, past, ing = c.verb.forms
    if c.form in ("progressive", "like"):
        return ing
    if question or c.negative:
        return base
    if c.form == "present":
        return c.verb.present(c.subject.agr)
    return past if c.form == "past" else base


def clause_parts(
    c: Clause, question: bool = False, perfective: bool = True
) -> tuple[list[Phrase], list[Phrase]]:
    """The parts of a clause in English order and in Chinese order."""
    g = verb_group(c, question, perfective)
    subject = c.subject.phrase
    en = [c.reason, g.front, subject, g.aux, c.frequency, g.verb, c.obj]
    en += [c.manner, c.companion, c.vehicle, c.place, c.time]
    zh = [subject, c.time, c.reason, c.frequency, g.front, g.aux]
    zh += [c.companion, c.vehicle, c.place, c.manner, g.verb, c.obj, g.tail]
    return en, zh


def declarative(rng: random.Random, form: str | None = None, negation: float = 0.2) -> Phrase:
    """A declarative clause, negated with probability `negation` where the form allows it."""
    form = form or weighted(rng, FORMS)
    verb, kind = choose_verb(rng, form)
    negative = bool(AUXILIARIES[form][1]) and chance(rng, negation)
    return reorder(*clause_parts(plan_clause(rng, 0, form, verb, kind, negative=negative)))


# --- Questions -------------------------------------------------------------------------------

QUESTION_FORMS = (("present", 5), ("past", 4), ("future", 2), ("progressive", 1), ("can", 1.5))
QUESTION_FORMS += (("want", 1), ("like", 0.5))
WH_WORDS = {
    "place": ("where", "在 哪里"),
    "time": ("when", "什么 时候"),
    "reason": ("why", "为什么"),
    "vehicle": ("how", "怎么"),
}


def question(rng: random.Random) -> Phrase:
    """A question about an action, a description or what someone is."""
    kind = weighted(rng, (("clause", 8), ("description", 1), ("identity", 1)))
    if kind == "description":
        return description(rng, question=True)
    return identity(rng, question=True) if kind == "identity" else clause_question(rng)


def clause_question(rng: random.Random) -> Phrase:
    """A yes/no question (吗) or a question word left in place in Chinese."""
    form = weighted(rng, QUESTION_FORMS)
    verb, kind = choose_verb(rng, form)
    # Questions ask "you" more often than statements talk about "you".
    you = NounPhrase(lex("you", "你"), "pl") if chance(rng, 0.4) else None
    clause = plan_clause(rng, 0, form, verb, kind, subject=you)
    if chance(rng, 0.45):
        en, zh = clause_parts(clause, question=True)
        mark = lex("?", "吗 ？")
        return reorder([*en, mark], [*zh, mark])
    return wh_question(clause, rng.choice(wh_slots(clause)))


def wh_slots(c: Clause) -> list[str]:
    """The parts of a clause that a question word can ask for."""
    slots = ["subject", "reason"]
    one_verb = len(set(c.verb.zh.values())) == 1  # "what do you play" has no single 玩/打/弹
    if c.kind and c.kind != "meal" and "motion" not in c.verb.flags and one_verb:
        slots.append("obj")
    if c.form != "progressive" and not c.frequency.en:  # not "when do you often …"
        slots.append("time")
    if takes_place(c.verb, c.form):
        slots.append("place")
    if "travel" in c.verb.flags:
        slots.append("vehicle")
    return slots


def wh_question(c: Clause, slot: str) -> Phrase:
    """A question word in place of `slot`: first in English, where the part was in Chinese."""
    mark = lex("?", "？")
    if slot == "subject":
        en, zh = clause_parts(replace(c, subject=NounPhrase(lex("who", "谁"), "3sg")))
        return reorder([*en, mark], [*zh, mark])
    if slot == "obj":
        wh = lex("who", "谁") if c.kind == "person" else lex("what", "什么")
    else:
        wh = lex(*WH_WORDS[slot])
    en, zh = clause_parts(replace(c, **{slot: wh}), question=True)
    return reorder([wh, *(part for part in en if part is not wh), mark], [*zh, mark])


# --- Sentences about a noun ------------------------------------------------------------------

DEFINITE_DETERMINERS = (("the", 4), ("this", 2), ("these", 1), ("my", 2))
INDEFINITE_DETERMINERS = (("a", 3), ("number", 3), ("some", 1), ("many", 1))


def description(rng: random.Random, question: bool = False) -> Phrase:
    """An adjective after "be", which Chinese says without a verb: "the tea is hot" → 茶 很 热."""
    adjective = rng.choice(ADJECTIVES)
    kind = rng.choice(adjective.kinds)
    subject = noun_phrase(rng, kind, 1, case="subject", dets=DEFINITE_DETERMINERS)
    past = chance(rng, 0.3)
    be = (BE_PAST if past else BE)[subject.agr]
    degree_en, degree_zh = rng.choice(DEGREES[:3] if question else DEGREES)
    en = degree_en.format(be="" if question else be, adj=tagged(adjective.en, 9))
    predicate = aligned(en, degree_zh.format(adj=tagged(adjective.zh, 9)))
    time = time_phrase(rng, ("past",) if past else ("habit", "any")) if chance(rng, 0.3) else EMPTY
    if not question:
        return reorder([subject.phrase, predicate, time], [subject.phrase, time, predicate])
    moved, mark = Phrase(words(be)), lex("?", "吗 ？")
    en = [moved, subject.phrase, predicate, time, mark]
    return reorder(en, [subject.phrase, time, predicate, mark])


# Adjectives with the kinds of noun they compare: kinds with two nouns at least to compare.
COMPARABLE = [
    (adjective, kind)
    for adjective in ADJECTIVES
    if adjective.comparative
    for kind in adjective.kinds
    if kind == "person" or len(NOUNS_BY_KIND[kind]) > 1
]


def comparison(rng: random.Random) -> Phrase:
    """A comparison, with 比 before the adjective: "Tom is taller than Mary" → 汤姆 比 玛丽 高."""
    adjective, kind = rng.choice(COMPARABLE)
    first = noun_phrase(rng, kind, 1, "subject", DEFINITE_DETERMINERS)
    second = first
    while chinese(second.phrase) == chinese(first.phrase):  # not "the song is longer than the song"
        second = noun_phrase(rng, kind, 1, "object", DEFINITE_DETERMINERS)
    be = (BE_PAST if chance(rng, 0.2) else BE)[first.agr]
    predicate = aligned(f"{be} {tagged(adjective.comparative, 1)}", tagged(adjective.zh, 1))
    than = frame("than", "比 {}", second.phrase)
    return reorder([first.phrase, predicate, than], [first.phrase, than, predicate])


def identity(rng: random.Random, question: bool = False) -> Phrase:
    """What someone is: "my mother is a doctor" → 我 的 妈妈 是 医生."""
    subject = person_phrase(rng, 1, "subject")
    job = rng.choice(NOUNS_BY_KIND["job"])
    plural = subject.agr == "pl"
    be_word = BE[subject.agr]
    negative = not question and chance(rng, 0.25)
    be = aligned(f"{be_word}:1 not:2", "不:2 是:1") if negative else lex(be_word, "是")
    adjective = attributive(rng, job, "the")
    head = lex(job.plural if plural else job.singular, job.zh)
    following = (adjective.en + head.en)[0][0]
    noun = (EMPTY if plural else Phrase(words(article(following)))) + adjective + head
    if not question:
        return subject.phrase + be + noun
    mark = lex("?", "吗 ？")
    return reorder([be, subject.phrase, noun, mark], [subject.phrase, be, noun, mark])


def existence(rng: random.Random) -> Phrase:
    """What there is somewhere, with the place first in Chinese: 桌子 下面 有 三 只 猫."""
    kind = rng.choice(("animal", "thing", "food", "book", "person", "clothes"))
    noun = rng.choice(NOUNS_BY_KIND[kind])
    thing = common_phrase(rng, noun, 1, INDEFINITE_DETERMINERS)
    past = chance(rng, 0.25)
    there = aligned(f"there:1 {(BE_PAST if past else BE)[thing.agr]}:1", "有:1")
    where = thing_place(rng, 1)
    time = time_phrase(rng, ("past",) if past else ("habit", "any")) if chance(rng, 0.3) else EMPTY
    return reorder([there, thing.phrase, where, time], [time, where, there, thing.phrase])


# --- Sentences -------------------------------------------------------------------------------

STATEMENTS: tuple[tuple[Callable[[random.Random], Phrase], float], ...] = (
    (declarative, 16),
    (description, 2),
    (comparison, 0.7),
    (identity, 0.8),
    (existence, 1.2),
)
CONNECTIVES = (("and", 2), ("but", 2), ("so", 1), ("because", 2))
CONNECTIVES += (("after", 1), ("before", 1), ("when", 1), ("if", 1))


def statement(rng: random.Random) -> Phrase:
    """A declarative clause or a sentence about a noun."""
    return weighted(rng, STATEMENTS)(rng)


def compound(rng: random.Random, nested: bool) -> Phrase:
    """Two statements joined by a connective; `nested` makes the second one compound too."""
    word = weighted(rng, CONNECTIVES)

    def second() -> Phrase:
        """The second clause, compound itself when nested."""
        return compound(rng, False) if nested else statement(rng)

    if word in COORDINATORS:
        first = statement(rng)
        return first + parse(COORDINATORS[word]) + second()
    if word == "because":
        return subordinate(rng, word, statement(rng), second())
    if word == "if":
        main_form = weighted(rng, (("future", 3), ("can", 1), ("want", 1), ("must", 1)))
        return subordinate(rng, word, declarative(rng, "present"), declarative(rng, main_form))
    form = weighted(rng, (("past", 2), ("present", 1)))  # both clauses in one tense
    return subordinate(rng, word, declarative(rng, form, negation=0), declarative(rng, form))


def subordinate(rng: random.Random, word: str, sub: Phrase, main: Phrase) -> Phrase:
    """A subordinate clause, which Chinese always puts first: "…, because …" → 因为 …，所以 …."""
    head, tail, then = SUBORDINATORS[word]
    link = Link()
    marker = Phrase(words(word, link), words(head, link))
    after_sub, before_main = Phrase(zh=words(tail, link)), Phrase(zh=words(then, link))
    if chance(rng, 0.5):
        comma = lex(",", "，")
        zh = [marker, sub, after_sub, comma, before_main, main]
        return reorder([marker, sub, comma, main], zh)
    comma = Phrase(zh=words("，"))  # "… because …" has no English comma to link it to
    return reorder([main, marker, sub], [marker, sub, after_sub, comma, before_main, main])


def sentence(rng: random.Random) -> Phrase:
    """One sentence pair: a statement, a question, or two or three clauses joined."""
    shape = weighted(rng, (("statement", 2.5), ("question", 1.5), ("two", 3.5), ("three", 2.5)))
    if shape == "question":
        return question(rng)
    body = statement(rng) if shape == "statement" else compound(rng, nested=shape == "three")
    return body + lex(".", "。")


# --- Corpus ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """A sentence pair with its gold alignment in Pharaoh format."""

    en: str
    zh: str
    alignment: str


def to_pair(phrase: Phrase) -> Pair:
    """Renders a phrase as text, capitalizing the first English word, with its links as `i-j`."""
    en = [word for word, _ in phrase.en]
    en[0] = en[0][0].upper() + en[0][1:]
    positions: dict[Link, list[int]] = {}
    for j, (_, link) in enumerate(phrase.zh):
        if link is not None:
            positions.setdefault(link, []).append(j)
    links = sorted(
        (i, j) for i, (_, link) in enumerate(phrase.en) if link for j in positions.get(link, ())
    )
    alignment = " ".join(f"{i}-{j}" for i, j in links)
    return Pair(" ".join(en), " ".join(chinese(phrase)), alignment)


def generate_pairs(seed: int) -> Iterator[Pair]:
    """Yields distinct sentence pairs (no English or Chinese side twice), the same for a seed."""
    rng = random.Random(seed)
    seen_en: set[str] = set()
    seen_zh: set[str] = set()
    while True:
        pair = to_pair(sentence(rng))
        if pair.en in seen_en or pair.zh in seen_zh:
            continue
        seen_en.add(pair.en)
        seen_zh.add(pair.zh)
        yield pair


def generate_splits(seed: int, sizes: dict[str, int] = SPLIT_SIZES) -> dict[str, list[Pair]]:
    """Splits one stream of pairs in the order of `sizes`, so a split never repeats another."""
    pairs = generate_pairs(seed)
    return {name: list(itertools.islice(pairs, size)) for name, size in sizes.items()}


def write_splits(out: Path, splits: dict[str, list[Pair]]) -> None:
    """Writes {split}.en, {split}.zh and {split}.align, one sentence per line."""
    out.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        for suffix, field in (("en", "en"), ("zh", "zh"), ("align", "alignment")):
            text = "".join(getattr(pair, field) + "\n" for pair in pairs)
            (out / f"{name}.{suffix}").write_text(text, encoding="utf-8", newline="\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Generates the corpus into --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "demo", help="output directory"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    for name, size in SPLIT_SIZES.items():
        help_text = f"pairs in {name} (default {size})"
        parser.add_argument(f"--{name}-size", type=int, default=size, metavar="N", help=help_text)
    args = parser.parse_args(argv)
    sizes = {name: getattr(args, f"{name}_size") for name in SPLIT_SIZES}
    write_splits(args.out, generate_splits(args.seed, sizes))


if __name__ == "__main__":
    main()
