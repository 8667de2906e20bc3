"""Neutral review language for knowledge entries: a user's sentence as a reviewer would write it.

A knowledge entry is read by other reviewers later, so its review points and action plan are written
as plain statements, not as the user's own speech:

* :func:`plain_statement` — 「私としては上限を設けたいと考えています。」 → 「上限を設ける」: leading
  connectives and first-person subjects dropped, opinion wrappers (と考えています, と思います),
  desire (たい), obligation (べきです), politeness (ます, です) and requests (てほしい → よう求める)
  turned into the plain (dictionary) form with Sudachi's conjugation data;
* :func:`is_question` — a sentence that asks (「…べきでしょうか？」) is never a policy or a risk;
  :func:`is_wrap_up` — 「この内容でまとめてください」「以上です」 ask for the entry now;
* :func:`risk_statement` — the risk a user states, kept as 「想定リスク: …」 without its tail
  (リスクがあります, 点が懸念です, と困ります) and without the case's preamble (「NDAの第5条で、」);
* :func:`concise_title` — a title without a repeated segment (「秘密保持契約の秘密保持：…」).

Everything works on one sentence at a time, capped at ``MAX_SENTENCE_CHARS``; the patterns are
anchored, without nested quantifiers (linear in the capped input).
"""
from __future__ import annotations

import re
import unicodedata

from core.text.ja_tokens import morphemes

MAX_SENTENCE_CHARS = 400
RISK_PREFIX = "想定リスク: "
# Asking to wrap up: draft now with what is known (before a draft exists; after it, 「以上です」 confirms).
WRAP_UP_WORDS = ("まとめて", "まとめを", "以上です", "以上になります", "これで以上", "以上でお願いします", "これで終わり",
                 "これだけです", "この内容で作成", "この内容で登録", "この内容でお願いします", "ドラフトを作成", "草案を作成",
                 "草案にして", "ドラフトにして", "下書きにして", "ナレッジ化して")
RISK_WORDS = ("リスク", "おそれ", "恐れ", "懸念", "心配", "可能性", "困る", "困り", "危険", "不安")

_END_PUNCT = "。．.！!？?…、,　 \t\n"
_CONNECTIVE = re.compile(
    r"^(?:また|さらに|なお|ただし|ただ|あと|それと|加えて|そして|でも|しかし|ちなみに|とりあえず|そこで|なので|"
    r"この場合|その場合|このケースでは|このケースだと|今回は|今回|基本的には|個人的には|結論として|結論としては|要するに|"
    r"(?:対応|修正|交渉|審査)?方針(?:として(?:は|も)?|と(?:は|も)|は|も)|対応(?:として|と)(?:は|も)?|考え(?:として|と)(?:は|も)?|"
    r"希望(?:として|と)(?:は|も)?|(?:できれば|可能であれば|可能なら|理想(?:として|と)(?:は|も)?))[、,]?")
_FIRST_PERSON = re.compile(
    r"^(?:私|わたし|僕|ぼく|自分|わたくし|私たち|我々|われわれ|当方|弊社|当社|うち|こちら|法務|法務部)"
    r"(?:として|的に|の考えとして|の意見として|の立場として)(?:は|も)?[、,]?|^(?:私|わたし|僕|ぼく|自分|わたくし)(?:は|も|では)[、,]?")
_HUMBLE_SELF = re.compile(r"弊社|当方")
_WRAPPER = re.compile(
    r"(?:と(?:考えて(?:い|お)ります|考えています|考えていました|考えます|考える|思って(?:い|お)ります|思っています|"
    r"思いました|思います|思う|存じます)|つもりです|つもりだ|つもり|ところです|予定です)$")
_REQUEST = re.compile(r"(?:て|で)(?:ほしい|欲しい|もらいたい|もらえると助かる|いただきたい|ください|下さい)(?:です|と思います)?$")
_BETTER = re.compile(r"(?:方|ほう)が(?:いい|良い|よい)(?:です|でしょう)?$")
_SHOULD = re.compile(r"べき(?:です|だ|である|でしょう|だと思います)?$")
_COPULA = re.compile(r"(?:です|でした|だった|である|だ)$")
_QUESTION_TAIL = re.compile(r"(?:でしょうか|ですか|ますか|ませんか|べきか|のか|かな|かね|だろうか|か)$")
_QUESTION_WORDS = ("どうすれば", "どうしたら", "どのように", "どうやって", "いかがでしょう", "教えてください", "知りたい")
# the tail that carries the risk: removed, the rest is the risk itself
_RISK_TAILS = (
    re.compile(r"(?:という|といった)?(?:リスク|おそれ|恐れ|可能性|懸念|危険|不安)(?:が|も)(?:あ(?:ります|る)|残(?:ります|る)|"
               r"考えられ(?:ます|る)|大きい|高い|否定できない|拭えない)(?:です)?$"),
    re.compile(r"(?:という|といった)?(?:点|の|こと|ところ|部分)(?:が|も|は)(?:懸念|心配|問題|不安|気にな(?:ります|る|っています))"
               r"(?:です|でした|だ|されます|されました)?$"),
    re.compile(r"(?:と|ので|のは|のが|から)(?:困(?:ります|る|りました)|まずい|問題(?:です|だ)?)$"),
    re.compile(r"(?:が|も|は)(?:懸念|心配|不安)(?:です|でした|されます|される|だ)?$"),
)
_CLAUSE_REF = re.compile(r"第\s{0,2}[0-9一二三四五六七八九十百]{1,4}\s{0,2}条(?:\s{0,2}[（(][^）)]{0,20}[）)])?")
_PREAMBLE_END = re.compile(r"^(?:の|で|では|について|に関して|において|における)[、,]?")
_TITLE_SEPARATORS = re.compile(r"[:：]")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", str(text or ""))[:MAX_SENTENCE_CHARS]


def _strip_end(text: str) -> str:
    text = text.rstrip(_END_PUNCT)
    for particle in ("ね", "よ", "な", "わ"):  # sentence-final particles after a predicate
        if text.endswith(particle) and len(text) > 3 and not text.endswith(("いな", "らな", "かな")):
            text = text[:-1].rstrip(_END_PUNCT)
    return text


def _morphemes(text: str) -> list:
    return morphemes(text)


def _dictionary_form_at_end(text: str) -> str:
    """``text`` whose last word is a verb (or せる/れる) in a conjugated form, with that word in its
    dictionary form (「交渉し」 → 「交渉する」, 「設け」 → 「設ける」, 「削除した」 → 「削除する」)."""
    if not text:
        return text
    morphemes = _morphemes(text)
    if morphemes and morphemes[-1].part_of_speech()[0] == "助動詞" and morphemes[-1].dictionary_form() == "た" \
            and len(morphemes) > 1:
        morphemes = morphemes[:-1]  # 「削除した」: drop the past tense, the verb comes next
        text = "".join(m.surface() for m in morphemes)
    if not morphemes:
        return text
    last = morphemes[-1]
    pos = last.part_of_speech()
    if pos[0] == "動詞" or (pos[0] == "助動詞" and last.dictionary_form() in ("せる", "させる", "れる", "られる")):
        base = last.dictionary_form()
        if base == "す" and pos[4].startswith("文語サ行"):
            base = "する"
        return text[: len(text) - len(last.surface())] + base
    return text


def _plain_predicate(text: str) -> str:
    """The sentence's predicate in the plain form (see :func:`plain_statement`)."""
    for _ in range(4):  # wrappers can nest: 「…すべきだと思います」
        before = text
        text = _strip_end(text)
        text = _WRAPPER.sub("", text)
        text = _strip_end(text)
        if _REQUEST.search(text):
            return _dictionary_form_at_end(_REQUEST.sub("", text)) + "よう求める"
        if _BETTER.search(text):
            return _dictionary_form_at_end(_BETTER.sub("", text))
        if _SHOULD.search(text):
            text = _SHOULD.sub("", text)
            return text[:-1] + "する" if text.endswith("す") and not text.endswith("する") else text
        for polite in ("たいです", "ましょう", "ます", "たい"):
            if text.endswith(polite):
                return _dictionary_form_at_end(text[: -len(polite)])
        if text.endswith("ません"):
            head = text[:-3]
            morphemes = _morphemes(head) if head else []
            if morphemes and morphemes[-1].part_of_speech()[4] in ("サ行変格", "下一段-マ行") or \
                    (morphemes and morphemes[-1].part_of_speech()[4].startswith(("下一段", "上一段"))):
                return head + "ない"
            return text
        if _COPULA.search(text):
            text = _COPULA.sub("", text)
        if text == before:
            break
    return text


def plain_statement(sentence: str) -> str:
    """``sentence`` as a neutral statement in the plain form (module docstring). ``""`` when
    nothing is left."""
    text = _strip_end(_norm(sentence).strip())
    for _ in range(3):
        stripped = _FIRST_PERSON.sub("", _CONNECTIVE.sub("", text)).strip(" 、,")
        if stripped == text:
            break
        text = stripped
    text = _HUMBLE_SELF.sub("自社", text)
    return _plain_predicate(text).strip(" 、,")


def is_question(sentence: str) -> bool:
    """True when ``sentence`` asks something (a question mark, 「…でしょうか」, 「どうすれば…」)."""
    text = _norm(sentence).strip()
    if text.endswith(("?", "？")):
        return True
    core = text.rstrip("。.！! ")
    return bool(_QUESTION_TAIL.search(core)) or any(w in text for w in _QUESTION_WORDS)


def is_wrap_up(text: str) -> bool:
    """「この内容でまとめてください」「以上です」: the user asks for the entry now, with what is known."""
    flat = _norm(text).strip()
    return len(flat) <= 60 and any(w in flat for w in WRAP_UP_WORDS) and not is_question(flat)


def has_risk_words(sentence: str) -> bool:
    return any(w in _norm(sentence) for w in RISK_WORDS)


def _without_preamble(text: str, context_words: tuple[str, ...]) -> str:
    """「NDAの第5条（秘密保持）の存続期間が…」 → 「存続期間が…」: the opening reference to the
    contract or clause (within the first 40 characters) and what joins it to the rest."""
    cut = 0
    for match in _CLAUSE_REF.finditer(text[:60]):
        cut = max(cut, match.end())
    for word in context_words:
        if word:
            i = text.find(word, 0, 40)
            if i >= 0:
                cut = max(cut, i + len(word))
    if not cut:
        return text
    rest = text[cut:]
    joiner = _PREAMBLE_END.match(rest)
    if joiner:
        return rest[joiner.end():].strip(" 、,")
    return text  # the reference is part of the statement itself: keep it


def _ends_with_predicate(text: str) -> bool:
    found = _morphemes(_strip_end(text)[-40:])
    return bool(found) and found[-1].part_of_speech()[0] in ("動詞", "形容詞", "助動詞")


def risk_statement(sentence: str, context_words: tuple[str, ...] = ()) -> str:
    """The risk ``sentence`` states, as 「想定リスク: …」 in the plain form, or ``""`` when it states
    none (no risk word) or is a question. ``context_words`` (contract type, clause name) are dropped
    from the opening of the sentence."""
    if is_question(sentence) or not has_risk_words(sentence):
        return ""
    text = _strip_end(_norm(sentence).strip())
    text = _FIRST_PERSON.sub("", _CONNECTIVE.sub("", text)).strip(" 、,")
    text = _without_preamble(text, context_words)
    for _ in range(3):  # 「…可能性があるので困ります」: two tails, removed while a statement is left
        shorter = text
        for tail in _RISK_TAILS:
            shorter = tail.sub("", _strip_end(shorter))
        if shorter == text or not (_ends_with_predicate(shorter) or has_risk_words(shorter)):
            break  # 「漏えいリスクが残る」 stays whole: 「漏えい」 alone says less
        text = shorter
    core = plain_statement(text)
    if len(core) < 4:
        return ""
    return RISK_PREFIX + core


def _segments(title: str) -> list[str]:
    return [s for s in re.split(r"[:：]|の", title) if s]


def concise_title(title: str, max_chars: int = 60) -> str:
    """``title`` on one line, without a segment that another segment already contains
    (「秘密保持契約の秘密保持：秘密保持期間の確保」 → 「秘密保持契約：秘密保持期間の確保」) and without a
    word doubled in place (「賠償賠償」), cut to ``max_chars``."""
    text = " ".join(_norm(title).split()).strip(" 「」『』")
    if not text:
        return text
    head, sep, tail = text.partition("：") if "：" in text else text.partition(":")
    parts = head.split("の")
    others = [s for s in _segments(tail)]
    kept: list[str] = []
    for i, part in enumerate(parts):
        in_head = [p for j, p in enumerate(parts) if j != i]
        if part and len(parts) > 1 and (any(part != p and part in p for p in in_head)
                                        or any(part in p for p in others)):
            continue
        if part and kept and part == kept[-1]:
            continue
        kept.append(part)
    head = "の".join(kept)
    text = f"{head}{'：' if sep else ''}{tail.strip()}" if head else tail.strip()
    text = re.sub(r"([一-龥ァ-ヶー]{2,8})\1", r"\1", text)
    return text[:max_chars].rstrip("の：:、 ")
