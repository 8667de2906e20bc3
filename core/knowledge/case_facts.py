"""What a knowledge interview's conversation says: the facts an entry needs, read by rules.

:func:`collect_facts` reads the messages a knowledge turn is given (the user's payloads and attachments,
our own earlier turns) into :class:`Facts`: contract type, clause, topic, the case, the risks the user
states, the actions they propose, a sample clause, the fields they name themselves (「タイトル: …」), what
an earlier turn asked and what the user declined or adopted from a house-style proposal.
:func:`facts_from_texts` reads plain messages the same way (the similar-entries search). The offline
interviewer (:mod:`core.knowledge.offline_interviewer`) writes its reply from these facts.

Every pattern here runs on capped text and has no nested quantifiers: linear in the input.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from core.knowledge.confirmation import CONFIRM_WORDS
from core.knowledge.house_style import parse_examples
from core.knowledge.review_language import has_risk_words, is_question, is_wrap_up, plain_statement, risk_statement
from core.llm.strategies import SCHEMA_INSTRUCTION_MARKER
from core.text.untrusted import OPEN, strip_markers

CONTRACT_TYPES = (
    "秘密保持契約", "業務委託契約", "請負契約", "準委任契約", "売買契約", "取引基本契約", "ライセンス契約",
    "賃貸借契約", "販売代理店契約", "代理店契約", "販売店契約", "共同研究開発契約", "共同開発契約",
    "保守契約", "システム開発契約", "ソフトウェア開発契約", "利用規約", "労働者派遣契約", "雇用契約",
    "業務提携契約", "OEM契約", "製造委託契約", "金銭消費貸借契約", "フランチャイズ契約",
)
ALIASES = {"NDA": "秘密保持契約", "機密保持契約": "秘密保持契約", "SaaS": "利用規約", "委託契約": "業務委託契約"}
# Clause topics: words a user uses → the heading word used in titles and sample clauses.
TOPICS = {
    "損害賠償": ("損害賠償", "賠償", "責任制限", "賠償上限"),
    "秘密保持": ("秘密保持", "機密保持", "秘密情報", "守秘"),
    "契約解除": ("解除", "解約"),
    "知的財産権": ("知的財産", "著作権", "特許", "成果物の権利"),
    "再委託": ("再委託", "下請"),
    "支払条件": ("支払", "代金", "報酬", "委託料"),
    "検収": ("検収", "受入検査"),
    "契約不適合責任": ("契約不適合", "瑕疵", "保証責任"),
    "競業避止": ("競業",),
    "反社会的勢力の排除": ("反社",),
    "契約期間・更新": ("契約期間", "自動更新", "更新"),
    "準拠法・管轄": ("管轄", "準拠法"),
    "個人情報の取扱い": ("個人情報",),
}
# Adopting the house proposal the last turn made (「当社の確定済みナレッジ No.N では…」).
ACCEPT_WORDS = ("この方針で", "その方針で", "それで", "同じで", "同じ方針", "そのまま", "はい", "お願いします", "そのとおり",
                "その通り", "おまかせ", "お任せ", "採用")
PROPOSAL_MARK = "当社の確定済みナレッジ"
WAIVE_WORDS = ("おまかせ", "お任せ", "特になし", "特にない", "なし", "ありません", "ない", "不要", "わからない", "分からない")
RISK_CUES = ("リスク", "不利", "問題", "懸念", "上限", "無制限", "一方的", "過大", "曖昧", "不明確", "負担", "責任",
             "おそれ", "恐れ", "可能性", "困る", "損", "漏えい", "漏洩", "紛争", "トラブル", "揉め", "もめ")
ACTION_CUES = ("修正", "削除", "追加", "提案", "交渉", "求め", "限定", "設け", "変更", "明記", "すべき", "べき",
               "したい", "希望", "対応", "入れる", "盛り込", "要求", "確認する", "規定する", "定める")
FIELD_LABELS = {
    "contract_type": ("契約類型", "契約の種類", "契約種別"),
    "knowledge_title": ("タイトル", "表題", "件名", "題名"),
    "target_clause": ("対象条項", "条項"),
    "review_points": ("審査ポイント", "確認ポイント", "レビューポイント", "リスク", "ポイント"),
    "action_plan": ("対応方針", "修正方針", "交渉方針", "方針", "アクション", "対応"),
    "clause_sample": ("条文例", "推奨条文", "サンプル条文", "条文案"),
}
_CLAUSE_REF = re.compile(r"第\s*([0-9一二三四五六七八九十百]+)\s*条(?:\s*第?\s*([0-9一二三四五六七八九十]+)\s*項)?")
_CLAUSE_HEADING = re.compile(r"第\s*([0-9一二三四五六七八九十百]+)\s*条\s*[（(]([^）)]{1,20})[）)]")
MIN_QUOTED_CHARS = 12  # a shorter quote is a word (「既存著作物」), not a clause
_OPENERS = {"「": "」", "『": "』"}
_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")
# A labelled line: optional bullet, the label (optionally in 【】), then ":" (full-width colons are
# NFKC-folded before this runs) or は「 / を「 (「タイトルを「…」に」). Lines are capped, the pattern
# has no nested quantifiers: linear in the line.
_ALL_LABELS = sorted({label for labels in FIELD_LABELS.values() for label in labels}, key=len, reverse=True)
_LABELS_RE = "|".join(_ALL_LABELS)
_LABEL_LINE = re.compile(r"^[ \t・\-*■●◆□>]{0,6}(?:【(" + _LABELS_RE + r")】[ \t]*[:：]?|(" + _LABELS_RE
                         + r")[ \t]*(?:[:：]|(?:は|を)(?=[「『])))[ \t　]*(.*)$")
MAX_LINE_CHARS = 2000
# Sentences about the interview itself ("事例を登録したい") are not facts about the case.
META_WORDS = ("登録", "ナレッジ", "作成して", "お願いします", "手伝", "相談したい", "教えて", "事例です", "についてです", "添付を")
# Attachment sentences that address the assistant rather than state a contract term: never quoted
# into an entry (a contract is data; 「以前の指示を無視して…」 in it is not an instruction).
INJECTION_CUES = ("指示を無視", "無視して", "無視し", "システムプロンプト", "プロンプト", "アシスタント", "AI", "あなたは",
                  "出力して", "出力せよ", "ignore", "instruction", "system prompt")
# The wording of each question the interviewer asks (core.knowledge.offline_interviewer._question); an earlier
# turn that contains a stem asked about that key.
QUESTION_STEMS = {
    "contract_type": ("どの種類の契約書",),
    "target_clause": ("問題になったのはどの条項", "条番号や見出しを教えて"),
    "case": ("事例の概要を教えて",),
    "review_points": ("想定されるリスクや、審査時に確認すべきポイント",),
    "action_plan": ("どのように修正・交渉すべきですか",),
    "clause_sample": ("推奨する条文例があれば",),
}


@dataclass
class Facts:
    contract_type: str = ""
    target_clause: str = ""
    topic: str = ""
    case: list[str] = field(default_factory=list)
    review_points: list[str] = field(default_factory=list)
    action_plan: list[str] = field(default_factory=list)
    clause_sample: str = ""
    sample_waived: bool = False
    explicit: dict[str, str] = field(default_factory=dict)
    clauses_in_attachments: dict[str, str] = field(default_factory=dict)  # "第8条(損害賠償)" -> body
    attachment_names: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)  # 「想定リスク: …」 the user stated
    questions: list[str] = field(default_factory=list)  # the latest message's questions (never policy)
    asked: dict[str, int] = field(default_factory=dict)  # key -> how many earlier turns asked it
    declined: set[str] = field(default_factory=set)  # keys the user said they cannot give (「わからない」)
    adopted: dict[str, str] = field(default_factory=dict)  # house proposal taken: field -> text
    typed: dict[str, str] = field(default_factory=dict)  # folded char -> the full-width form the user typed


STRUCTURE_CHARS = frozenset(": ")  # the label colon and spaces belong to our own layout, not a value


def typed_forms(texts: list[str]) -> dict[str, str]:
    """{「(」: 「（」, …}: the characters the user typed in a form that NFKC folds (（）／３ＮＤＡ) and
    never typed folded; a character typed both ways is left out (nothing to restore)."""
    seen: dict[str, set[str]] = {}
    for text in texts:
        for ch in text[:20000]:
            folded = unicodedata.normalize("NFKC", ch)
            if len(folded) == 1 and folded not in STRUCTURE_CHARS:
                seen.setdefault(folded, set()).add(ch)
    return {folded: next(iter(forms)) for folded, forms in seen.items() if len(forms) == 1 and folded not in forms}


def as_typed(text: str, typed: dict[str, str]) -> str:
    """``text`` (read from NFKC-folded input) with the user's own typography back (「第８条（損害賠償）」)."""
    return "".join(typed.get(ch, ch) for ch in text) if typed and text else text


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "")


def _split_payload(content: str) -> tuple[str, str]:
    content = content.split(SCHEMA_INSTRUCTION_MARKER)[0]
    instruction, _, attachments = content.partition("添付テキスト:")
    instruction = instruction.replace("ユーザー指示:", "", 1).strip()
    return instruction, strip_markers(attachments).strip()


def _attachment_names(attachments: str) -> list[str]:
    """The 【name】 heading line right after each document marker (not any 【…】 inside a document)."""
    lines = attachments.split("\n")
    names = []
    for line, following in zip(lines, lines[1:]):
        if line.startswith(OPEN) and line.endswith(">>>") and following.startswith("【") and following.endswith("】"):
            names.append(following[1:-1][:120])
    return names


def _is_repair(content: str) -> bool:
    """A repair or regeneration request (ours, not the user's words), wrapped in the payload or not."""
    return content.removeprefix("ユーザー指示:").lstrip().startswith("以下は、あなたが直前に出力した")


def _contract_type(text: str) -> str:
    """The contract type named first in ``text`` (the longest name at a position; an alias only
    where it is not part of a known name: 「製造委託契約」 is not 「委託契約」)."""
    hits = [(i, -len(name), name) for name in CONTRACT_TYPES if (i := text.find(name)) >= 0]
    for alias, canonical in ALIASES.items():
        i = text.find(alias)
        if i >= 0 and not any(start <= i < start - neg_len for start, neg_len, _ in hits):
            hits.append((i, -len(alias), canonical))
    if hits:
        return min(hits)[2]
    match = re.search(r"([一-龥ァ-ヶー]{2,10}契約)書?", text)
    return match.group(1) if match else ""


def _topic(text: str) -> str:
    for topic, words in TOPICS.items():
        if any(w in text for w in words):
            return topic
    return ""


def topic_of(text: str) -> str:
    """The clause topic ``text`` is about (:data:`TOPICS`), or ""."""
    return _topic(nfkc(text))


def contract_type_of(text: str) -> str:
    """The contract type ``text`` names (an alias counts: 「ＮＤＡ」 is 秘密保持契約), or ""."""
    return _contract_type(nfkc(text)) if text else ""


def _clauses(attachment_text: str) -> dict[str, str]:
    """Clause headings with their bodies from an attachment: {"第8条(損害賠償)": "body..."}."""
    found: dict[str, str] = {}
    matches = list(_CLAUSE_HEADING.finditer(attachment_text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else min(len(attachment_text), m.end() + 600)
        body = _data_only(re.sub(r"\s+", " ", attachment_text[m.end():end].strip())[:1200])
        found.setdefault(f"第{m.group(1)}条({m.group(2)})", body[:400])
    return found


def _data_only(text: str) -> str:
    """``text`` without the sentences that address the assistant (see INJECTION_CUES)."""
    kept = [s for s in _SENTENCE.findall(text) if not any(c.lower() in s.lower() for c in INJECTION_CUES)]
    return "".join(kept).strip()


def outer_quotes(text: str, min_chars: int = MIN_QUOTED_CHARS) -> list[str]:
    """The outermost quotations of ``text``, 「…」 or 『…』, with what they nest kept whole
    (「…（以下「既存著作物」という。）の著作権は…」). An unclosed quotation runs to the end of the
    text. One pass, no regular expression: linear in the text."""
    found: list[str] = []
    stack: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            if not stack:
                start = i + 1
            stack.append(_OPENERS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack and len(text[start:i].strip()) >= min_chars:
                found.append(text[start:i].strip())
    if stack and len(text[start:].strip()) >= min_chars:
        found.append(text[start:].strip())
    return found


def _sentences(text: str) -> list[str]:
    return [s.strip(" 、") for s in _SENTENCE.findall(text) if len(s.strip()) >= 6]


def _label_key(label: str) -> str:
    return next(key for key, labels in FIELD_LABELS.items() if label in labels)


def _labelled_value(first: str, following: list[str]) -> tuple[str, int]:
    """The value of a labelled line and how many following lines it took (a bullet list under an
    empty label: 「審査ポイント:」 then 「・…」 lines)."""
    first = first.strip()
    if first[:1] in _OPENERS:
        quoted = outer_quotes(first, min_chars=1)
        return (quoted[0] if quoted else first[1:].strip()), 0
    if first:
        return first.rstrip("。").strip(), 0
    taken: list[str] = []
    for line in following:
        if not line.strip() or _LABEL_LINE.match(line[:MAX_LINE_CHARS]):
            break
        taken.append(line.strip())
    return "\n".join(taken), len(taken)


def split_labelled(text: str) -> tuple[dict[str, str], str]:
    """Fields the user names (「タイトル: …」「方針：…」「対応方針は「…」」), and the text without those
    lines. Callers pass NFKC-normalised text; full-width colons are accepted anyway. A labelled
    line is a correction of that field only: it takes no part in any other inference."""
    values: dict[str, str] = {}
    rest: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i][:MAX_LINE_CHARS]
        m = _LABEL_LINE.match(line)
        if not m:
            rest.append(lines[i])
            i += 1
            continue
        value, used = _labelled_value(m.group(3), lines[i + 1:])
        key = _label_key(m.group(1) or m.group(2))
        if len(value) >= 2:
            values[key] = value
        i += 1 + used
    return values, "\n".join(rest)


def labelled_fields(text: str) -> dict[str, str]:
    return split_labelled(text)[0]


def assistant_message_of(turn: dict[str, Any] | None) -> str:
    return str((turn or {}).get("assistant_message") or "")


def _asked_keys(message: str) -> list[str]:
    """The keys an earlier turn of ours asked about (its question wording, see ``QUESTIONS``)."""
    return [key for key, stems in QUESTION_STEMS.items() if any(stem in message for stem in stems)]


def _ends_with_action(sentence: str) -> bool:
    """The sentence ends as something to do (「…を求めるべきです」「…交渉します」), not as a risk
    (「…を求められない点も懸念です」)."""
    core = sentence.rstrip("。.!！ ")
    if has_risk_words(core[-8:]):
        return False
    return any(c in core[-20:] for c in ACTION_CUES)


def _context_words(sentence: str) -> tuple[str, ...]:
    return tuple(name for name in (*CONTRACT_TYPES, *ALIASES) if name in sentence)


def _read_sentences(text: str, facts: Facts, *, latest: bool) -> None:
    for sentence in _sentences(text):
        if is_question(sentence):
            if latest:
                facts.questions.append(sentence.strip())
            continue  # a question is never a policy, a risk or a fact of the case
        if any(w in sentence for w in META_WORDS) or is_wrap_up(sentence):
            continue
        if _ends_with_action(sentence):
            plain = plain_statement(sentence)
            if len(plain) >= 4:
                facts.action_plan.append(plain)
            continue
        risk = risk_statement(sentence, _context_words(sentence))
        if risk:
            facts.risks.append(risk)
            facts.review_points.append(sentence)
        elif any(c in sentence for c in RISK_CUES):
            facts.review_points.append(sentence)
        elif len(sentence) >= 15 and not any(w == sentence.strip("。") for w in CONFIRM_WORDS):
            facts.case.append(sentence)


def _adopt_proposal(facts: Facts, reply: str, proposal: str, examples: list[dict[str, Any]]) -> None:
    """The user took the house proposal our last turn made: its fields become this entry's."""
    if not examples or PROPOSAL_MARK not in proposal or is_question(reply) or len(reply) > 40:
        return
    if not any(w in reply for w in ACCEPT_WORDS):
        return
    example = examples[0]
    for key, label in (("review_points", "・審査ポイント"), ("action_plan", "・対応方針")):
        if label in proposal and str(example.get(key) or "").strip():
            facts.adopted[key] = str(example[key]).strip()


def collect_facts(messages: list[dict[str, Any]]) -> tuple[Facts, list[str], dict[str, Any] | None]:
    """Facts from the conversation, the user instructions in order, and the last turn we sent."""
    facts = Facts()
    examples = parse_examples(str(messages[0].get("content") or "")) if messages else []
    instructions: list[tuple[str, str]] = []  # (instruction, our message just before it)
    last_turn: dict[str, Any] | None = None
    before_reply: tuple[dict[str, Any] | None, dict[str, int]] = (None, {})
    typed_texts: list[str] = []
    for msg in messages[2:]:  # skip system prompt and few-shot turn
        if msg.get("role") == "user":
            typed_texts.append(_split_payload(str(msg.get("content") or ""))[0])
        content = nfkc(str(msg.get("content") or ""))
        if msg.get("role") == "assistant":
            before_reply = (last_turn, dict(facts.asked))
            try:
                parsed = json.loads(content)
                last_turn = parsed if isinstance(parsed, dict) else last_turn
            except json.JSONDecodeError:
                continue
            for key in _asked_keys(assistant_message_of(last_turn)):
                facts.asked[key] = facts.asked.get(key, 0) + 1
            continue
        if msg.get("role") == "user" and _is_repair(content):
            last_turn, facts.asked = before_reply[0], dict(before_reply[1])  # the output it replaces never counted
            continue
        if msg.get("role") != "user":
            continue
        instruction, attachments = _split_payload(content)
        if attachments:
            facts.clauses_in_attachments.update(_clauses(attachments))
            facts.attachment_names += _attachment_names(content.partition("添付テキスト:")[2])
            facts.contract_type = facts.contract_type or _contract_type(attachments[:300])
        if instruction:
            instructions.append((instruction, assistant_message_of(last_turn)))
    facts.typed = typed_forms(typed_texts)
    for n, (text, before) in enumerate(instructions):
        labelled, text = split_labelled(text)
        facts.explicit.update(labelled)
        if facts.target_clause:  # 「なお第10条は問題ありません」: an aside about another article
            text = _without_asides(text, facts.target_clause)
        facts.contract_type = _contract_type(text) or facts.contract_type
        headed = _CLAUSE_HEADING.search(text)
        ref = _CLAUSE_REF.search(text)
        if headed:
            facts.target_clause = f"第{headed.group(1)}条({headed.group(2)})"
        elif ref:
            facts.target_clause = _clause_label(ref.group(0), facts)
        if headed or ref:
            facts.topic = _topic(facts.target_clause) or _topic(text) or facts.topic
        facts.topic = facts.topic or _topic(text)
        _read_sentences(text, facts, latest=n == len(instructions) - 1)
        quoted = outer_quotes(text)
        if quoted:
            facts.clause_sample = quoted[-1]
        if text.strip("。 ") in WAIVE_WORDS or any(w in text for w in ("おまかせ", "お任せ")):
            facts.sample_waived = True
        if text.strip("。 ") in WAIVE_WORDS and not any(w in text for w in ("おまかせ", "お任せ")):
            facts.declined.update(_asked_keys(before))  # 「わからない」: what we just asked stays open
        _adopt_proposal(facts, text.strip(), before, examples)
    if not facts.target_clause and facts.topic:
        for heading in facts.clauses_in_attachments:  # the attachment's clause on this topic
            if any(word in heading for word in (facts.topic[:2], *TOPICS.get(facts.topic, ()))):
                facts.target_clause = heading
                break
    if not facts.topic and facts.target_clause:
        facts.topic = _topic(facts.target_clause)
    return facts, [text for text, _ in instructions], last_turn


# A sentence that sets another article aside (「なお第10条は問題ありません」「第3条は対象外です」): it names no
# new target and states no risk of this entry.
DISMISS_WORDS = ("問題ありません", "問題はありません", "問題ない", "問題はない", "問題なし", "大丈夫", "関係ありません",
                 "関係ない", "対象外", "気にしなくて", "了承済み", "合意済み", "触れなくて", "不要です", "このままで")
ASIDE_OPENERS = ("なお", "ちなみに", "ほかに", "他に", "別件", "ついでに")


def _without_asides(text: str, target: str) -> str:
    """``text`` without the sentences about another article than ``target`` that set it aside or open
    as an aside (「なお」「ちなみに」): the entry keeps its article and its review points."""
    current = _CLAUSE_REF.search(target)
    kept = []
    for sentence in _SENTENCE.findall(text):
        ref = _CLAUSE_REF.search(sentence)
        other = ref is not None and (current is None or ref.group(1) != current.group(1))
        if other and (any(w in sentence for w in DISMISS_WORDS)
                      or sentence.lstrip(" 、").startswith(ASIDE_OPENERS)):
            continue
        kept.append(sentence)
    return "".join(kept)


def facts_from_texts(texts: list[str]) -> Facts:
    """The facts of a case told in ``texts`` (the user's messages, oldest first), read by the same rules."""
    messages = [{"role": "system", "content": ""}, {"role": "assistant", "content": "{}"}]
    messages += [{"role": "user", "content": f"ユーザー指示:\n{text}"} for text in texts]
    return collect_facts(messages)[0]


def _clause_label(ref: str, facts: Facts) -> str:
    number = re.sub(r"\s", "", ref)
    article = re.match(r"第[0-9一二三四五六七八九十百]+条", number)
    if article:
        for heading in facts.clauses_in_attachments:
            if heading.startswith(article.group(0) + "("):
                return heading + number[len(article.group(0)):]
    return number


def current_clause_text(facts: Facts) -> str:
    """The attachment's text of the target clause (shown in the chat, never put in the entry)."""
    return facts.clauses_in_attachments.get(re.sub(r"第[0-9一二三四五六七八九十]+項$", "", facts.target_clause), "")
