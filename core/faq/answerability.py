"""Can the retrieved articles answer *what was asked*? The facet check, and questions split in two.

A question about a price the knowledge base does not list (「ワイパーのゴムの交換費用はいくら？」)
retrieves the wiper article, which is about *when* to change wipers: answering from it and labelling
the answer 回答（根拠あり） misleads. :func:`asked_facets` finds what kind of fact the question asks for
(a price, a duration); :func:`supports` says whether an article states such a fact *about the
question's subject* — a sentence (or its title) with the facet's evidence (円・料金・無料 … /
分・時間・日 …) sharing the question's subject words (at least two when the question has two);
:func:`answerable` keeps only those articles. With none left the turn is "not found" with the facet's
next step (:data:`Facet.next_step`: ask the shop for a quote), for the offline policy and a model
alike (the model only ever sees, and may only cite, articles that pass).

:func:`split_questions` cuts a message that asks two things (「オイル交換の目安と、ワイパーの交換時期を
教えてください」「車検はいつから受けられますか？あと代車は借りられますか？」) into its questions, so
each is searched and answered with its own citation. Every pattern is bounded and the text is capped.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

from core.text import quoting
from core.text.ja_tokens import get_tokenizer

MAX_CHARS = 1000
MAX_PARTS = 3
VEHICLE_NAMES = frozenset({"トレック", "ミライバ", "カイワ", "ハイブリッド", "4WD", "車", "クルマ", "お車"})


@dataclass(frozen=True)
class Facet:
    name: str
    question: re.Pattern[str]  # the question asks for this kind of fact
    evidence: re.Pattern[str]  # a sentence states such a fact
    words: frozenset[str]  # the facet's own words, not the subject
    label: str  # 「料金」
    next_step: str


FACETS = (
    Facet("price", re.compile(r"いくら|幾ら|費用|料金|値段|価格|金額|代金|コスト|お金|何円|[0-9０-９]+円|見積|無料|有料|タダ|ただで|税込|工賃"),
          re.compile(r"[0-9０-９,，]+円|円（|料金|費用|価格|金額|無料|有料|税込|税抜|工賃|見積|ご負担|自己負担|お客さま負担"),
          frozenset({"いくら", "幾ら", "費用", "料金", "値段", "価格", "金額", "代金", "コスト", "お金", "円", "見積もり",
                     "見積", "無料", "有料", "タダ", "税込", "工賃", "かかる", "掛かる", "する", "くらい", "ぐらい"}),
          "料金", "料金は車種や作業内容によって異なります。店頭またはお電話でお見積もりをご依頼ください。"),
    Facet("duration", re.compile(r"何分|何時間|何日|所要時間|どのくらい(の)?時間|どれくらい(の)?時間|時間(は|が)どの|日数|何営業日|即日"),
          re.compile(r"[0-9０-９]+ ?(分|時間|日|営業日|週間|か月|カ月|ヶ月)|数(分|時間|日|週間)|即日|当日|所要時間|期間"),
          frozenset({"何分", "何時間", "何日", "所要時間", "時間", "日数", "どのくらい", "どれくらい", "かかる", "掛かる"}),
          "所要時間", "作業の内容や混み具合で変わります。ご予約の際に店頭またはお電話でご確認ください。"),
)
_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")
_NOUN = re.compile(r"[一-龥ァ-ヶーA-Za-z0-9０-９]+")  # a word without kana endings (a verb like 借りる is not the subject)


def _norm(text: str | None) -> str:
    return unicodedata.normalize("NFKC", text or "")[:MAX_CHARS]


def asked_facets(question: str | None) -> list[Facet]:
    """The kinds of fact ``question`` asks for (a price, a duration), in :data:`FACETS` order."""
    text = _norm(question)
    return [f for f in FACETS if f.question.search(text)]


SUBJECT_STOP = frozenset({"大体", "後", "他", "事", "時", "方", "前", "今", "所", "位", "程", "場合", "感じ", "普通", "一般"})


def subject_words(question: str, facet: Facet) -> set[str]:
    """The question's nouns that are not the facet's own (「ワイパー」「ゴム」「交換」)."""
    return {w for w in quoting.tokens(_norm(question))
            if w not in facet.words and w not in SUBJECT_STOP and _NOUN.fullmatch(w) and len(w) >= 2}


def head_word(question: str, facet: Facet) -> str | None:
    """The noun the fact is asked about: the last subject noun before the facet's word (「タイヤ4本
    交換するといくら」 → 交換, 「査定ってお金かかる」 → 査定), else any subject noun."""
    text = _norm(question)
    subject = subject_words(text, facet) - VEHICLE_NAMES
    match = facet.question.search(text)
    before = [w for w in get_tokenizer()(text[:match.start()]) if w in subject] if match else []
    if before:
        return before[-1]
    return next(iter(sorted(subject)), None)


def supports(hit: dict[str, Any], question: str, facet: Facet) -> bool:
    """The article states a fact of this kind about what the question asks it of: it is about the
    question's subject (half of its nouns at least, vehicle names aside) and a sentence (or the
    title) with the facet's evidence names the question's :func:`head_word` (「タイヤの状態は無料で
    確認します」 does not state the price of a tyre *change*)."""
    head = head_word(question, facet)
    subject = subject_words(question, facet) - VEHICLE_NAMES
    title, body = _norm(hit.get("title", "")), _norm(hit.get("text", ""))
    article = f"{title}\n{body}"
    if sum(1 for w in subject if w in article) < (len(subject) + 1) // 2:
        return False  # the article is about something else (車検の費用 for a tyre change's price)
    if head in ACTION_NOUNS:  # 「ワイパーゴムの交換費用」: the price of *what* is changed, not any 交換
        head = _object_of(question, head, subject) or head
    asked = {w.lower() for w in quoting.tokens(_norm(question))} - facet.words - {head or ""}
    short = facet.name == "duration" and _SHORT_ASKED.search(_norm(question))
    for sentence in [title] + _SENTENCE.findall(body):
        if not facet.evidence.search(sentence) or (short and not _SHORT_STATED.search(sentence)):
            continue  # 「何分で終わる？」 is not answered by 「6か月ごと」
        if head is None or head in quoting.tokens(sentence) or head in sentence:
            return True
        # the article is about the head (its title names it) and this sentence states the fact of
        # another word of the question (「スタッドレスへの履き替えは何分」: 「履き替えの作業時間は約30分」)
        if head in title and asked & {w.lower() for w in quoting.tokens(sentence)}:
            return True
    return False


_SHORT_ASKED = re.compile(r"何分|何時間|所要時間|時間(は|が)?(どの|どれ)")
_SHORT_STATED = re.compile(r"[0-9０-９]+ ?(分|時間)|数(分|時間)|半日|即日|当日")
ACTION_NOUNS = frozenset({"交換", "修理", "作業", "取り付け", "取付", "整備", "修正", "脱着"})


def _object_of(question: str, action: str, subject: set[str]) -> str | None:
    """The noun just before an action noun (「ワイパーゴムの交換」 → ワイパーゴム)."""
    text = _norm(question)
    at = text.find(action)
    before = [w for w in get_tokenizer()(text[:max(at, 0)]) if w in subject and w != action]
    return before[-1] if before else None


def answerable(hits: Sequence[dict[str, Any]], question: str) -> tuple[list[dict[str, Any]], Facet | None]:
    """The hits that can answer ``question`` and, when none can, the facet they lack (else None)."""
    facets = asked_facets(question)
    kept = [h for h in hits if all(supports(h, question, f) for f in facets)]
    if kept or not hits:
        return kept, None
    missing = next((f for f in facets if not any(supports(h, question, f) for h in hits)), facets[0] if facets else None)
    return kept, missing


# --- two questions in one message ------------------------------------------------------------------

_QUESTION_END = re.compile(r"(?<=[？?。！!])\s*|\n+")
_CONNECTOR = re.compile(r"[、,]\s*(?:あと|それと|それから|また|ついでに|あわせて|併せて|もう一つ|もうひとつ)[、,は]?\s*|"
                        r"\s+(?:あと|それと|それから|ついでに)[、,]?\s*")
_AND_COMMA = re.compile(r"(?<=[ぁ-んァ-ヶー一-龥A-Za-z0-9])と[、,]\s*")
_CONTENT = re.compile(r"[ァ-ヶー一-龥]{2,}|[A-Za-z]{2,}")
_LEADING = re.compile(r"^(?:あと|それと|それから|また|ついでに|あわせて|もう一つ|もうひとつ)[、,は]?\s*")


# 「AとBの目安はそれぞれ…」: one request over two subjects; 「Xの目安とYの交換時期を…」: two "の" phrases.
_EACH = re.compile(r"それぞれ|両方|どちらも|各々")
_EACH_PAIR = re.compile(r"^([^、,と]{2,30}?)と([^、,と]{2,30}?)の(.{2,200})$")
_NO_PAIR = re.compile(r"^([^、,と]{1,30}の[^、,と]{1,20}?)と([^、,と]{1,30}の.{2,200})$")
# Words that ask about a subject without naming one (「費用はかかる？」「かかる時間を知りたい」): a part made
# only of these takes the subject of the part before it.
_GENERIC = frozenset({"時間", "目安", "時期", "期間", "必要", "場合", "方法", "手続", "手続き", "書類", "予約", "対応",
                      "可能", "大丈夫", "本当", "全部", "合計", "教え", "知りたい"})


def _pair(clause: str) -> list[str]:
    """A clause that asks one thing of two subjects, as two questions; else the clause."""
    each = _EACH_PAIR.match(clause) if _EACH.search(clause) else None
    if each:
        rest = _EACH.sub("", each.group(3)).replace("はは", "は")
        return [f"{each.group(1)}の{rest}", f"{each.group(2)}の{rest}"]
    both = _NO_PAIR.match(clause)
    if both:
        return [both.group(1), both.group(2)]
    return [clause]


def _has_subject(part: str) -> bool:
    return any(w not in _GENERIC and not any(f.question.fullmatch(w) or w in f.words for f in FACETS)
               for w in _CONTENT.findall(part))


def _subject_of(part: str) -> str:
    """The first content word of a part that names one (「ロードサービスは24時間…」 → ロードサービス)."""
    return next((w for w in _CONTENT.findall(part) if w not in _GENERIC
                 and not any(f.question.fullmatch(w) or w in f.words for f in FACETS)), "")


_QUESTION_CUE = re.compile(r"[？?]|か[。.\s]*$|かな|かね|教えて|知りた|どう|どこ|どれ|どの|いつ|いくら|何|なに|なぜ|"
                           r"できる|できます|られる|れる[？?]?$|ある[？?]?$|ない[？?]?$|たい|ほしい|欲しい|ください|下さい|の[？?]?$")


def split_questions(text: str | None) -> list[str]:
    """The questions of one message (at most :data:`MAX_PARTS`; one when it asks one thing): cut at a
    question's end (？ 。), at a connector (「、あと」「それと」「ついでに」) and at 「Aと、B」 (A shares B's
    request); a piece that asks nothing (「中古で買った車だけど」) or has no content word of its own
    stays with its neighbour as context."""
    norm = _norm(text).strip()
    pieces: list[tuple[str, bool]] = []  # (text, asks something)
    for raw in (p.strip() for p in _QUESTION_END.split(norm) if p.strip()):
        sentence = _LEADING.sub("", raw)
        follow_on = sentence != raw and bool(pieces)  # 「…？ついでにタイヤの空気圧も」: a new question
        for clause in (_LEADING.sub("", q.strip()) for q in _CONNECTOR.split(sentence) if q.strip()):
            group = [p.strip(" 、,") for g in _AND_COMMA.split(clause) if g.strip(" 、,") for p in _pair(g.strip(" 、,"))]
            asks = follow_on or bool(_QUESTION_CUE.search(clause)) or any(f.question.search(clause) for f in FACETS)
            pieces += [(g, asks) for g in group]
    if not any(asks for _, asks in pieces):  # a rewritten query (「…を教えてください」 dropped): all ask
        pieces = [(piece, True) for piece, _ in pieces]
    parts: list[str] = []
    pending = ""
    for piece, asks in pieces:
        piece = piece.strip(" 、,。")
        if not piece:
            continue
        if not asks or not _CONTENT.findall(piece):
            if parts:
                parts[-1] = f"{parts[-1]} {piece}"
            else:
                pending = f"{pending} {piece}".strip()
            continue
        parts.append(f"{pending} {piece}".strip() if pending else piece)
        pending = ""
    if pending:
        parts = parts[:-1] + [f"{parts[-1]} {pending}"] if parts else [pending]
    if len(parts) > MAX_PARTS:
        parts = parts[:MAX_PARTS - 1] + [" ".join(parts[MAX_PARTS - 1:])]
    for i in range(1, len(parts)):  # 「ロードサービスは24時間使える？費用はかかる？」: the second asks of the first's subject
        subject = _subject_of(parts[i - 1])
        if subject and not _has_subject(parts[i]):
            parts[i] = f"{subject}の{parts[i]}"
    return parts if len(parts) > 1 else [norm]
