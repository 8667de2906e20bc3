"""Offline diagnosis policy: a deterministic stand-in for the model in the diagnosis flow.

It decides from the facts the flow passes as ``context=`` (symptom, answers so far, keyword
urgency, the retrieved manual sections with their content types), never from the prompt text:

* keyword urgency critical → ``escalate`` (can_drive false);
* a top hit that is a ``specification`` section saying 「故障ではありません」/「正常」 → ``spec_answer``
  quoting the section with its citation (unless the keyword urgency is high or a spec answer was
  already rejected); ``classify_spec`` makes the same call for SPEC_CHECK;
* otherwise the symptom's category gives a short question plan — a warning light: which lamp
  (manual lamp names, with lay descriptions that the icon guard can map) then how it is lit; a
  noise: when, then what kind; a leak: colour/smell; … — questions already asked are skipped;
* a vague first complaint with no subject (「調子がおかしい」「違和感がある」) → ``clarify_term``:
  what the customer means, with the symptom categories as choices (checked before the spec answer,
  which a vague text would match by chance);
* then ``provide_answer`` with the best section's procedure and 「（取扱説明書「節」p.N）」;
  urgency from the keyword level, danger/warning sections and the answers (blinking lamp,
  oil/coolant leak); manual_coverage from the hit score.

The level it works with is the flow's fused one (``context["keyword"]``: rules + semantic layer +
section markers) and ``context["urgency"]`` says more (``core.diagnosis.urgency_semantic.as_context``):

* text without Japanese (emoji, English) → ``clarify_term`` asking for the symptom, urgency none;
* a confirmed normal-behaviour case that needs asking (brake squeal, EV mode, a fluid leak) → the
  manual's explanation and the case's disambiguating question first; a normal answer gives the
  spec answer, an abnormal one an answer at the case's ``abnormal_level``;
* the spec answer passes ``normal_answer_blocked`` (a symptom at medium or more that no manual
  normal case confirms never gets 「故障ではありません」);
* the question plan follows the category of the first description (an answer mentioning a sound
  does not turn a start problem into a noise interview);
* ``can_drive`` False from the rules or exemplars (a flat tyre) is kept on every answer;
* an information question (intent ``info``) has urgency none; ``classify_spec`` answers it from
  the best non-danger section.

``assess_urgency`` (URGENCY_SCHEMA) and ``summarize`` (plain-text summary) complete the set.
"""
from __future__ import annotations

import re
from typing import Any

from core.diagnosis.denials import asks_about_denied, strip_denials
from core.diagnosis.urgency_rules import CHECK_MEMO_MAX_CHARS, canonical, normal_form
from core.diagnosis.urgency_semantic import NormalCase, confirming_hit, normal_cases, text_normal_case
from core.llm.base import LLMRequest
from core.text import quoting
from core.text.memo import short_text_memo
from core.text.quoting import is_heading

NORMAL_RE = re.compile(r"故障ではありません|正常な(現象|動作)|異常ではありません|問題ありません|心配ありません|安全のための仕様")
LEVEL_RANK = {"none": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
VISIT = {"critical": "immediate", "high": "today", "medium": "this_week", "low": "when_convenient"}
RECOMMEND = {
    "critical": "安全な場所に停車し、自走せずにロードサービスまたは販売店へ連絡してください。",
    "high": "本日中に販売店で点検を受けてください。",
    "medium": "今週中を目安に販売店で点検を受けてください。",
    "low": "ご都合のよいときに販売店で点検を受けてください。",
}

# (key, choice label with a lay description, words that name the lamp in text / section titles)
LAMPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("engine", "エンジン警告灯（エンジンの形をした黄色のマーク）", ("エンジン警告灯", "エンジンチェック", "チェックエンジン", "エンジンマーク", "潜水艦",
                                                                      "エンジンのランプ", "エンジンランプ", "チェックランプ",
                                                                      "エンジンのマーク", "エンジンの形")),
    ("abs", "ABS警告灯（「ABS」の文字のランプ）", ("ABS",)),
    ("brake", "ブレーキ警告灯（赤い「!」のマーク）", ("ブレーキ警告灯",)),
    ("oil", "油圧警告灯（赤い油さしのマーク）", ("油圧", "オイルランプ", "油さし", "魔法のランプ")),
    ("charge", "充電警告灯（バッテリーの形のマーク）", ("充電", "バッテリーのマーク", "バッテリーランプ")),
    ("coolant", "水温警告灯（温度計の形のマーク）", ("水温",)),
    ("hybrid", "ハイブリッドシステム警告灯（車の形に「!」のマーク）", ("ハイブリッドシステム警告灯", "ハイブリッドシステムチェック")),
    ("airbag", "エアバッグ警告灯（座った人と丸いエアバッグのマーク）", ("エアバッグ",)),
    ("eps", "パワーステアリング警告灯（ハンドルに「!」のマーク）", ("パワステ", "パワーステアリング", "EPS")),
    ("tpms", "タイヤ空気圧警告灯（タイヤの断面に「!」のマーク）", ("空気圧",)),
    ("4wd", "4WD警告灯（「4WD」の文字のランプ）", ("4WD", "四駆")),
    ("skid", "スリップ表示灯（車が滑っているマーク）", ("スリップ", "横滑り", "VSC", "VDC")),
    ("fuel", "燃料残量警告灯（給油機の形のマーク）", ("燃料残量", "ガソリンランプ", "給油ランプ")),
)
RED_LAMPS = {"brake", "oil", "charge", "coolant", "hybrid"}
DEFAULT_LAMPS = {"hybrid": ("engine", "hybrid", "abs", "tpms"), "4wd": ("engine", "abs", "4wd", "tpms"),
                 "other": ("engine", "abs", "tpms", "charge")}

CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("warning_light", re.compile(r"警告灯|(?<!ルーム)(?<!ヘッド)(?<!テール)(?<!ブレーキ)(?<!フォグ)(?<!マップ)(?<!室内)ランプ|マーク|"
                                 r"(?<!READY)表示灯|インジケーター|(?<!ルームランプが)(?<!ライトが)点灯|点滅|メッセージ|表示され|テントウ|テンメツ")),
    ("noise", re.compile(r"音|鳴|キーキー|ガラガラ|ゴロゴロ|カタカタ|ガタガタ|キュルキュル|ゴー|ウィーン|ヒューン|オト(?!ナ)")),
    ("vibration", re.compile(r"振動|揺れ|ゆれ|震え|ブルブル|ぶるぶる|ガクガク|ぶれる|ブレる|ユレ|シンドウ|ブレル")),
    ("leak", re.compile(r"漏れ|もれ|垂れ|たれ|ポタポタ|ぽたぽた|水たまり|シミ|濡れ|モレ|タレ|ミズタマリ")),
    ("smell", re.compile(r"におい|匂い|臭|ニオイ|クサイ")),
    ("start", re.compile(r"かからない|かかりにくい|始動|READY|起動|スタートボタン|セルが|カカラナイ|カカリニクイ")),
    ("howto", re.compile(r"方法|やり方|使い方|仕方|しかた|教えて|知りたい|どうすれば|どうやって|どうしたら|とは|って何|わからない|？|\?")),
)

Q = dict  # a question: topic, message, choices, skip (pattern on the symptom that makes it unnecessary)
QUESTIONS: dict[str, list[Q]] = {
    "warning_light": [
        Q(topic="点灯している警告灯の種類", message="メーターに出ている警告灯（ランプ）は、次のどれに近いですか？", choices=None),
        Q(topic="警告灯の点灯状態", message="その警告灯は、どのように点いていますか？",
          choices=["点灯したまま消えない", "点滅している", "一度ついたが、しばらくして消えた"], skip=r"点滅|消えた|消えない|ついたまま|つきっぱなし"),
    ],
    "noise": [
        Q(topic="異音が出るタイミング", message="音はどんなときに聞こえますか？",
          choices=["ブレーキを踏んだとき", "走り出し・加速するとき", "ハンドルを切ったとき", "一定の速度で走っているとき"],
          skip=r"ブレーキ|踏む|踏ん|加速|発進|走り出|ハンドル|曲が|走行中|走って|エンジンをかけ|始動|バック|停車中|段差"),
        Q(topic="異音の種類", message="どんな音に近いですか？",
          choices=["キーキー・キーッ（高い金属音）", "ゴー・ウォンウォン（低くうなる音）", "カタカタ・ゴトゴト（何かが当たる音）",
                   "ウィーン・ヒューン（モーターのような音）"],
          skip=r"([ァ-ヴー]{1,3})\1|ゴー|ウィーン|ヒューン|キーッ"),
    ],
    "vibration": [
        Q(topic="振動が出る条件", message="振動はどんなときに感じますか？",
          choices=["特定の速度で走っているとき", "ブレーキを踏んだとき", "停車中（アイドリング中）", "段差を越えたとき"],
          skip=r"キロ|km|速度|ブレーキ|停車中|アイドリング|段差"),
    ],
    "leak": [
        Q(topic="漏れている液体の色とにおい", message="垂れている液体は、どんな色やにおいですか？",
          choices=["透明で無臭（水のよう）", "ピンクや緑色で甘いにおい（冷却水の可能性）", "茶色や黒っぽく油っぽい（エンジンオイルの可能性）"],
          skip=r"透明|ピンク|緑|茶色|黒|甘い"),
    ],
    "smell": [
        Q(topic="においの種類", message="どんなにおいですか？",
          choices=["焦げたようなにおい", "カビっぽい・酸っぱいにおい（エアコンから）", "甘いにおい", "排気ガスのようなにおい"],
          skip=r"焦げ|カビ|かび|酸っぱ|甘い|排気|ガソリン"),
    ],
    "start": [
        Q(topic="始動しないときの状態", message="スタートボタンを押したとき、どうなりますか？",
          choices=["メーターやライトも点かない", "メーターは点くがREADY（エンジン）にならない", "「キーが見つかりません」と表示される",
                   "カチカチと音がするだけ"],
          skip=r"メーター|キーが見つ|カチカチ|何も反応"),
        Q(topic="始動操作（シフト位置とブレーキ）", message="シフトレバーはPの位置で、ブレーキペダルをしっかり踏みながらスタートボタンを押しましたか？",
          choices=["Pの位置で、ブレーキを踏みながら押した", "Pに入っていなかった・ブレーキを踏んでいなかった"],
          skip=r"ブレーキを踏(み|ん)|Pに入|Pの位置|Nの位置"),
    ],
    "general": [
        Q(topic="症状が出る状況", message="その症状は、どんなときに起きますか？",
          choices=["エンジンをかけた直後", "走行中", "停車中・駐車中", "毎回ではなく時々"],
          skip=r"とき|時に|中に|直後|毎回|いつも|信号"),
    ],
}


def _rank(level: str | None) -> int:
    return LEVEL_RANK.get(level or "none", 0)


def _max_level(*levels: str) -> str:
    return max(levels, key=_rank)


def _strip_paren(text: str) -> str:
    return re.sub(r"（[^）]*）|\([^)]*\)", "", text).strip()


def _answers(ctx: dict[str, Any]) -> list[str]:
    collected = ctx.get("collected") or []
    return [a for a in collected[1:] if a and a not in ("わからない",) and not a.startswith(("提案された対処", "仕様の説明", "説明された内容"))]


CATEGORY_MEMO = 1024


@short_text_memo(CATEGORY_MEMO, CHECK_MEMO_MAX_CHARS)
def _category(text: str) -> str:
    """The symptom category of ``text``, from what it reports (a denied symptom is not a category:
    「警告灯は点いていないけど音がする」 is a noise). Remembered per text (a turn asks for the symptom's
    several times; :data:`CATEGORY_MEMO` texts of at most :data:`CHECK_MEMO_MAX_CHARS` characters)."""
    kept = strip_denials(text).kept
    forms = (kept, canonical(kept), normal_form(kept))  # kana and casual spellings read the rules' way
    for name, pattern in CATEGORIES:
        if any(pattern.search(form) for form in forms):
            return name
    return "general"


def _plan_category(symptom: str, answers: list[str]) -> str:
    """The first description decides the question plan; the answers only when it says nothing
    (「カチカチと音がするだけ」 answers a start question, it does not open a noise interview)."""
    first = _category(symptom)
    return first if first != "general" else _category(" ".join([symptom] + answers))


def _focus_sentence(text: str, focus: str) -> str | None:
    """The sentence of ``text`` sharing the most words (at least two) with ``focus`` (the customer's
    own words): 「寒い朝にマフラーから白い湯気が出るのも同じ理由によるものです。」 for a question about
    steam from the muffler, in a section that opens with the A/C condensate."""
    wanted = quoting.tokens(focus)
    best, best_shared = None, 1
    for unit in quoting.units(text):
        if unit.kind == "heading":
            continue
        shared = len(wanted & quoting.tokens(unit.text))
        if shared > best_shared:
            best, best_shared = unit.text, shared
    return best


def manual_digest(text: str, limit: int = 420, must: re.Pattern[str] | None = None, focus: str = "") -> str:
    """The section's opening (two sentences, plus the first one matching ``must``) and the following
    lines, within ``limit`` characters; with ``focus`` (the customer's words), the sentence that
    speaks of them most is kept too when the opening does not already say it."""
    digest = _digest(text, limit, must)
    sentence = _focus_sentence(text, focus) if focus else None
    if sentence and sentence not in digest:
        lines = digest.split("\n")
        digest = "\n".join([lines[0], sentence] + lines[1:])
        while len(digest) > limit + len(sentence) and "\n" in digest.rstrip():
            digest = digest.rsplit("\n", 1)[0]  # room for the focus sentence: the tail goes first
    return digest


def _digest(text: str, limit: int, must: re.Pattern[str] | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.startswith("⚠") and len(lines) > 1:
        first = lines[1]
        lines = lines[1:]
    sentences = re.findall(r"[^。]+。?", first)
    opening = sentences[:2]
    if must is not None and not any(must.search(x) for x in opening):
        opening += [x for x in sentences[2:] if must.search(x)][:1]
    out = ["".join(opening).strip()]
    size = len(out[0])
    for line in lines[1:]:
        if size + len(line) > limit:
            break
        out.append(line)
        size += len(line)
    while len(out) > 1 and (re.fullmatch(r"⚠.{0,4}|【[^】]*】|.{0,12}[:：]", out[-1]) or is_heading(out[-1])):
        out.pop()  # a heading whose content was cut off
    return "\n".join(out)


def cite(hit: dict[str, Any]) -> str:
    return f"（取扱説明書「{hit['section']}」p.{hit['page']}）"


def _urgency(ctx: dict[str, Any]) -> dict[str, Any]:
    return ctx.get("urgency") or {}


def _normal_allowed(ctx: dict[str, Any], hit: dict[str, Any]) -> bool:
    """The safety gate for a "this is normal" answer from ``hit`` (see ``normal_answer_blocked``)."""
    u = _urgency(ctx)
    case = normal_cases().get(u.get("normal_case") or "") if u.get("normal_confirmed") else None
    level = (ctx.get("keyword") or {}).get("level") or "none"
    if case is not None:
        level = u.get("rule_level") or level  # the vote's part is what the case's question settles
    if _rank(level) >= _rank("high"):
        return False
    if case is None:
        return _rank(level) < _rank("medium") or u.get("intent") == "info"
    if not any(word in hit["section"] for word in case.sections):
        return False
    if case.ask:
        text = " ".join([ctx.get("symptom") or ""] + _answers(ctx))
        return case.says_normal(text) and not case.says_abnormal(text)
    return True


def _spec_hit(hits: list[dict[str, Any]], flags: set[str], ctx: dict[str, Any] | None = None) -> dict[str, Any] | None:
    floor = 0.4 if "spec_hint" in flags else 0.45
    top_score = hits[0]["score"] if hits else 0
    case = normal_cases().get(_urgency(ctx or {}).get("normal_case") or "")
    if case is not None and _urgency(ctx or {}).get("normal_confirmed"):
        hit = confirming_hit(case, hits)
        if hit is not None and _normal_allowed(ctx or {}, hit):
            return hit
    for hit in hits[:2]:
        if ctx is not None and not _normal_allowed(ctx, hit):
            continue
        if (hit["content_type"] == "specification" and not hit["has_warning"] and hit["score"] >= floor
                and hit["score"] >= top_score - 0.1 and NORMAL_RE.search(hit["text"])):
            return hit
    return None


def lamps_named(text: str) -> list[str]:
    """The lamps ``text`` names (also in kana or casual spelling, read through :func:`normal_form`)."""
    forms = (text, normal_form(text))
    return [key for key, _, words in LAMPS if any(w in f for w in words for f in forms)]


def _lamp_choices(hits: list[dict[str, Any]], powertrain: str, symptom: str = "") -> list[str]:
    keys: list[str] = []
    for hit in hits:
        for key in lamps_named(hit["section"]):
            if key not in keys:
                keys.append(key)
    kind = "hybrid" if "hybrid" in powertrain else ("4wd" if "4wd" in powertrain else "other")
    for key in DEFAULT_LAMPS[kind]:
        if key not in keys:
            keys.append(key)
    if re.search(r"黄|オレンジ|橙", symptom):
        keys = [k for k in keys if k not in RED_LAMPS]
    elif re.search(r"赤", symptom):
        keys = [k for k in keys if k in RED_LAMPS] or keys
    labels = {key: label for key, label, _ in LAMPS}
    return [labels[k] for k in keys[:4]]


def _next_question(ctx: dict[str, Any], category: str, hits: list[dict[str, Any]]) -> Q | None:
    said = [ctx.get("symptom") or ""] + _answers(ctx)
    denied = [w for text in said for w in strip_denials(text).denied]
    symptom = " ".join(strip_denials(text).kept for text in said)
    asked = set(ctx.get("asked_topics") or [])
    if category == "howto" or not hits or _urgency(ctx).get("intent") == "info":
        return None  # a how-to question, or nothing in the manual to narrow down with
    if category == "general" and hits and hits[0]["score"] >= 0.55:
        return None  # the manual answers it directly
    for q in QUESTIONS.get(category, []):
        if q["topic"] in asked:
            continue
        if q.get("skip") and re.search(q["skip"], symptom):
            continue
        if asks_about_denied(q["topic"], q["message"], denied):
            continue  # never ask about what the customer said is absent
        if q["topic"] == "点灯している警告灯の種類":
            if lamps_named(symptom):
                continue
            q = dict(q, choices=_lamp_choices(hits, (ctx.get("vehicle") or {}).get("powertrain") or "", symptom))
        return q
    return None


VAGUE_RE = re.compile(r"調子が?(悪|わる|おかし|変|へん)[いく]?|(なんか|なんだか|何か)(変|へん|おかしい)|変な感じ|違和感|"
                      r"いつもと違う|様子が(変|へん|おかしい)|具合が(悪|わる)い?")
CLARIFY_TOPIC = "あいまいな症状の確認"
CLARIFY_CHOICES = ["いつもと違う音がする", "振動や揺れを感じる", "メーターに警告灯やランプが点いている",
                   "いつもと違うにおいがする", "エンジン（システム）がかかりにくい"]


def _vague_term(ctx: dict[str, Any]) -> str | None:
    """The vague words of a complaint that names no symptom category and no part found in the
    manual hits' titles (「ワイパーの調子が悪い」 is not vague), if not yet clarified."""
    symptom = ctx.get("symptom") or ""
    if CLARIFY_TOPIC in (ctx.get("asked_topics") or []) or _category(symptom) != "general":
        return None
    match = VAGUE_RE.search(symptom)
    if match is None:
        return None
    for hit in ctx.get("hits") or []:
        if any(t in symptom for t in re.findall(r"[ァ-ヴー]{3,}|[一-龥々]{2,}|[A-Za-z0-9]{2,}", _strip_paren(hit["section"]))):
            return None
    return match.group(0)


CATEGORY_TITLES = {"noise": ("異音", "鳴き"), "vibration": ("振動",), "leak": ("漏れ", "水が垂れる"),
                   "smell": ("臭", "におい"), "start": ("かからない", "始動", "起動")}


def best_hit(hits: list[dict[str, Any]], text: str, category: str) -> dict[str, Any] | None:
    """The hit to answer from: retrieval score, plus a bonus when the section title (or the lamp it
    is about) is named in the user's text, or fits the symptom's category."""
    named = set(lamps_named(text))

    def rank(hit: dict[str, Any]) -> float:
        bonus = 0.0
        title = _strip_paren(hit["section"])
        if any(len(part) >= 3 and part in text for part in re.split(r"[・／/、]", title)):
            bonus += 0.5
        if named and named & set(lamps_named(hit["section"])):
            bonus += 0.5
        if any(word in hit["section"] for word in CATEGORY_TITLES.get(category, ())):
            bonus += 0.3
        return hit["score"] + bonus

    return max(hits, key=rank, default=None)


def _coverage(hit: dict[str, Any] | None) -> str:
    if hit is None:
        return "not_covered"
    return "covered" if hit["score"] >= 0.5 else "partially_covered"


def _rewritten(ctx: dict[str, Any]) -> str:
    parts = [ctx.get("symptom") or ""] + [_strip_paren(a) for a in _answers(ctx)]
    return " ".join(p for p in parts if p)[:200]


def _result(action: str, message: str, *, urgency: str = "none", reasoning: str, choices: list[str] | None = None,
            can_drive: bool | None = None, confidence: float, query: str, topic: str, coverage: str,
            visit: str | None = None, term: str | None = None) -> dict[str, Any]:
    return {"action": action, "message": message, "urgency_flag": urgency, "reasoning": reasoning, "choices": choices,
            "can_drive": can_drive, "confidence_to_answer": round(confidence, 2), "rewritten_query": query,
            "question_topic": topic, "manual_coverage": coverage, "visit_urgency": visit, "term_to_clarify": term}


def _answer_urgency(ctx: dict[str, Any], hit: dict[str, Any] | None) -> tuple[str, bool | None, list[str]]:
    keyword = (ctx.get("keyword") or {}).get("level") or "none"
    info = _urgency(ctx).get("intent") == "info" and keyword == "none"
    level = keyword if info else {"none": "low"}.get(keyword, keyword)
    can_drive: bool | None = True
    why = [f"キーワード判定: {keyword}"]
    answers = " ".join(_answers(ctx))
    if hit is not None and hit["content_type"] == "danger":
        level, can_drive = _max_level(level, "high"), False
        why.append(f"危険区分の記載「{hit['section']}」")
    elif hit is not None and (hit["content_type"] == "warning" or hit["has_warning"]):
        level = _max_level(level, "medium")
        why.append(f"注意・警告の記載「{hit['section']}」")
    if "点滅" in answers:
        level = _max_level(level, "high")
        why.append("警告灯が点滅している")
    if "エンジンオイル" in answers or "油っぽい" in answers:
        level, can_drive = _max_level(level, "high"), False
        why.append("エンジンオイル漏れの可能性")
    elif "冷却水" in answers:
        level = _max_level(level, "high")
        why.append("冷却水漏れの可能性")
    if _urgency(ctx).get("can_drive") is False and _rank(level) >= _rank("high"):
        can_drive = False
        why.append("自走での来店は危険な症状")
    return level, can_drive, why


def diagnose(request: LLMRequest) -> dict[str, Any]:
    """Task ``diagnostic_response``."""
    ctx = request.context
    hits = list(ctx.get("hits") or [])
    keyword = ctx.get("keyword") or {}
    level = keyword.get("level") or "none"
    flags = set(ctx.get("flags") or [])
    symptom = ctx.get("symptom") or ""
    query = _rewritten(ctx)
    top = hits[0] if hits else None
    answered = len(_answers(ctx))

    if level == "critical":
        reasons = "、".join(keyword.get("reasons") or []) or "危険な症状"
        return _result("escalate", f"お伺いした内容から、{reasons}があります。安全な場所に停車し、運転を続けないでください。",
                       urgency="critical", reasoning="キーワード判定が critical", can_drive=False, confidence=0.9,
                       query=query, topic="緊急対応", coverage=_coverage(top), visit="immediate")

    u = _urgency(ctx)
    if u.get("intent") == "unknown" and not answered and not flags & {"force_answer", "final_turn"}:
        return _result("clarify_term", "ご相談の内容を確認させてください。気になっている症状を、日本語で具体的に教えてください。"
                       "近いものがあれば選んでください。", urgency="none", reasoning="日本語の症状の記述がない入力",
                       choices=list(CLARIFY_CHOICES), confidence=0.1, query=query, topic=CLARIFY_TOPIC,
                       coverage=_coverage(top), term=symptom[:40] or None)

    case_turn = _normal_case_turn(ctx, hits, level, query, flags)
    if case_turn is not None:
        return case_turn

    term = None if flags & {"force_answer", "final_turn"} else _vague_term(ctx)
    if term is not None:
        return _result("clarify_term", f"「{term}」とのことですが、具体的にはどのような状態でしょうか？近いものを選んでください。",
                       urgency=level, reasoning=f"あいまいな表現「{term}」の確認", choices=list(CLARIFY_CHOICES),
                       can_drive=True if level in ("high", "medium") else None, confidence=0.2, query=query,
                       topic=CLARIFY_TOPIC, coverage=_coverage(top), visit=VISIT.get(level), term=term)

    gate_level = (u.get("rule_level") or level) if u.get("normal_confirmed") else level
    spec = None if ("spec_rejected" in flags or gate_level in ("high", "critical")) else _spec_hit(hits, flags, ctx)
    if spec is not None:
        message = (f"ご説明の症状は、取扱説明書「{spec['section']}」に記載されている正常な動作（仕様）の可能性があります。\n\n"
                   f"{manual_digest(spec['text'], must=NORMAL_RE, focus=symptom)}\n\n{cite(spec)}")
        return _result("spec_answer", message, urgency="none", reasoning=f"仕様の節 {spec['section_id']} が上位",
                       can_drive=True, confidence=0.85, query=query, topic=spec["section"], coverage=_coverage(spec),
                       visit=None)

    category = _plan_category(symptom, _answers(ctx))
    if not flags & {"force_answer", "final_turn"}:
        question = _next_question(ctx, category, hits)
        if question is not None:
            urgency = level if level != "none" else "none"
            return _result("ask_question", question["message"], urgency=urgency,
                           reasoning=f"{category} の問診: {question['topic']}", choices=list(question["choices"]),
                           can_drive=True if urgency in ("high", "medium") else None,
                           confidence=min(0.3 + 0.2 * answered, 0.65), query=query, topic=question["topic"],
                           coverage=_coverage(top), visit=VISIT.get(urgency))

    if top is None:
        message = ("取扱説明書には、この症状に当てはまる記載が見つかりませんでした。原因が複数考えられるため、"
                   "症状が出たときの状況（いつ・どんなときに・どのくらい）をメモして、販売店で点検を受けてください。")
        urgency = {"none": "low"}.get(level, level)
        return _result("provide_answer", message, urgency=urgency, reasoning="該当する記載なし", can_drive=True,
                       confidence=0.4, query=query, topic="点検のおすすめ", coverage="not_covered", visit=VISIT.get(urgency))

    top = best_hit(hits, " ".join([symptom] + _answers(ctx)), category)
    urgency, can_drive, why = _answer_urgency(ctx, top)
    lead = ("安全のため、すぐに対処が必要な症状の可能性があります。" if can_drive is False
            else "お伺いした内容から、次の記載が当てはまる可能性が高いです。")
    message = f"{lead}\n\n【{top['section']}】\n{manual_digest(top['text'])}\n\n{cite(top)}"
    coverage = _coverage(top)
    return _result("provide_answer", message, urgency=urgency, reasoning=" / ".join(why), can_drive=can_drive,
                   confidence=0.85 if coverage == "covered" else 0.65, query=query, topic=top["section"],
                   coverage=coverage, visit=VISIT.get(urgency))


def _normal_case_turn(ctx: dict[str, Any], hits: list[dict[str, Any]], level: str, query: str,
                      flags: set[str]) -> dict[str, Any] | None:
    """A confirmed normal case that needs asking: the question (with the manual's explanation)
    until it is answered; an abnormal answer → an answer at the case's ``abnormal_level``."""
    u = _urgency(ctx)
    case: NormalCase | None = normal_cases().get(u.get("normal_case") or "") if u.get("normal_confirmed") else None
    if case is None or not case.ask or "spec_rejected" in flags:
        return None
    hit = confirming_hit(case, hits)
    if hit is None:
        return None
    text = " ".join([ctx.get("symptom") or ""] + _answers(ctx))
    if case.says_abnormal(text):
        top = best_hit(hits, text, _plan_category(ctx.get("symptom") or "", _answers(ctx))) or hit
        if top is hit and len(hits) > 1 and hit["content_type"] == "specification":
            top = next((h for h in hits if h is not hit), hit)
        urgency = _max_level({"none": "low"}.get(level, level), case.abnormal_level)
        _, can_drive, why = _answer_urgency(ctx, top)
        message = (f"お伺いした内容は、正常な動作（{hit['section']}）の条件に当てはまらないため、点検をおすすめします。\n\n"
                   f"【{top['section']}】\n{manual_digest(top['text'])}\n\n{cite(top)}")
        return _result("provide_answer", message, urgency=urgency, reasoning=f"{case.id}: 正常な条件に当てはまらない / " + " / ".join(why),
                       can_drive=can_drive, confidence=0.8, query=query, topic=top["section"], coverage=_coverage(top),
                       visit=VISIT.get(urgency))
    if case.says_normal(text) or case.topic in (ctx.get("asked_topics") or []) or flags & {"force_answer", "final_turn"}:
        return None  # answered normal (the spec answer follows), or no more asking
    message = (f"取扱説明書「{hit['section']}」には、次のように説明されています。\n\n"
               f"{manual_digest(hit['text'], must=NORMAL_RE, focus=ctx.get('symptom') or '')}\n\n{cite(hit)}\n\n{case.question}")
    # normal behaviour is level none once settled; while its question is open it is at least low —
    # unless the customer's own words name the situation the manual calls normal (「EVモードで走ると
    # 音がしない」): then nothing abnormal was said, and the question only confirms it
    named = text_normal_case(ctx.get("symptom") or "")
    if not (named is not None and named.id == case.id and level == "none"):
        level = {"none": "low"}.get(level, level)
    return _result("ask_question", message, urgency=level, reasoning=f"正常な動作の可能性（{case.id}）: 条件を確認",
                   choices=list(case.normal_choices) + list(case.abnormal_choices),
                   can_drive=True if level in ("high", "medium") else None, confidence=0.5, query=query,
                   topic=case.topic, coverage=_coverage(hit), visit=VISIT.get(level))


def classify_spec(request: LLMRequest) -> dict[str, Any]:
    """Task ``spec_classification``."""
    ctx = request.context
    hits = list(ctx.get("hits") or [])
    level = (ctx.get("keyword") or {}).get("level") or "none"
    if _urgency(ctx).get("intent") == "info" and level == "none":
        info = next((h for h in hits[:3] if h["content_type"] not in ("danger",) and h["score"] >= 0.4), None)
        if info is not None:
            explanation = (f"取扱説明書「{info['section']}」に、次のように記載されています。\n\n"
                           f"{manual_digest(info['text'])}\n\n{cite(info)}")
            return {"is_spec": True, "confidence": "high", "explanation": explanation, "matched_section": info["section"],
                    "matched_section_id": info["section_id"], "page": info["page"]}
    candidates = [h for h in hits[:3] if h["content_type"] in ("specification", "general", "procedure")
                  and NORMAL_RE.search(h["text"]) and _normal_allowed(ctx, h)]
    best = max(candidates, key=lambda h: h["score"], default=None)
    if level in ("high", "critical") or best is None or best["score"] < 0.4:
        return {"is_spec": False, "confidence": "low", "explanation": "取扱説明書に、正常な動作として説明されている記載は見つかりませんでした。",
                "matched_section": None, "matched_section_id": None, "page": None}
    high = best["score"] >= 0.5 and best["content_type"] == "specification" and not best["has_warning"]
    explanation = (f"ご説明の症状は、取扱説明書「{best['section']}」に記載されている正常な動作（仕様）の可能性があります。\n\n"
                   f"{manual_digest(best['text'], must=NORMAL_RE, focus=ctx.get('symptom') or '')}\n\n{cite(best)}")
    return {"is_spec": True, "confidence": "high" if high else "medium", "explanation": explanation,
            "matched_section": best["section"], "matched_section_id": best["section_id"], "page": best["page"]}


def assess_urgency(request: LLMRequest) -> dict[str, Any]:
    """Task ``urgency_assessment``."""
    ctx = request.context
    keyword = ctx.get("keyword") or {}
    level = {"none": "low"}.get(keyword.get("level") or "none", keyword.get("level") or "low")
    reasons = list(keyword.get("reasons") or [])
    can_drive = level != "critical"
    for hit in (ctx.get("hits") or [])[:3]:
        if hit["content_type"] == "danger" and hit["score"] >= 0.45:
            if _rank(level) < _rank("high"):
                level = "high"
            can_drive = False
            reasons.append(f"取扱説明書「{hit['section']}」（p.{hit['page']}）に危険の記載があります")
            break
    if not reasons:
        reasons.append("危険を示す症状は確認されていません")
    return {"level": level, "can_drive": can_drive, "visit_urgency": VISIT[level], "reasons": reasons,
            "recommendation": RECOMMEND[level] if can_drive or level == "critical" else
            "自走は控え、ロードサービスまたは販売店へ連絡してください。"}


def summarize(request: LLMRequest) -> str:
    """Task ``diagnosis_summary``: an extractive summary (symptom, answers, last guidance)."""
    ctx = request.context
    collected = [c for c in ctx.get("collected") or [] if c]
    answers = "、".join(_strip_paren(a) for a in collected[1:]) or "なし"
    last = next((m["content"] for m in reversed(ctx.get("history") or []) if m.get("role") == "assistant"), "")
    last_sentence = re.findall(r"[^。？\n]+[。？]?", last)[:1]
    summary = f"主訴: {ctx.get('symptom') or (collected[0] if collected else '不明')}。これまでの回答: {answers}。"
    if last_sentence:
        summary += f"直近の案内: {last_sentence[0].strip()}"
    return summary
