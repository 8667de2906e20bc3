"""Keyword urgency rules (seed 000 §6, ``data/urgency_rules.yaml``): the fast rule-based check.

Text is NFKC-normalised and read in a few forms (:func:`variants`), all with hiragana folded to
katakana and matched against the patterns folded the same way; each level is tried in order
critical → high → medium → low;
within a level the first rule with a matching pattern (``re.search``) gives the reason. No match
is level ``none``. The levels carry the seed's ``visit_urgency`` and ``can_drive``; a rule may
override ``can_drive`` (a puncture is high but never drivable to a shop) and may set ``max_level``,
the most the similarity vote may raise a text it matched to (a slight pull, a cabin rattle: the
rule has recognised a mild form of the symptom).

An information / how-to question with no symptom word (:func:`is_how_to`: 「給油口は右と左どっち
ですか」「ブレーキフルードの交換時期はいつ？」) never matches a critical rule: a risky word that is
only the topic of a question is not a symptom. Every critical symptom names one of the
:data:`SYMPTOM_WORD` verbs or states, so a real emergency phrased as a question still matches.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import yaml

from core.diagnosis.denials import strip_denials
from core.diagnosis.models import urgency_rank
from core.paths import DATA_DIR
from core.text.memo import short_text_memo

RULES_PATH = DATA_DIR / "urgency_rules.yaml"
SYNONYMS_PATH = DATA_DIR / "urgency_synonyms.yaml"
LEVELS = ("critical", "high", "medium", "low")

# An information / how-to question (「…はどうやって開けるの」「…はどこ」「…はどっちですか」
# 「…の方法を教えて」) is recognised by a question word or ending; it is a how-to question only when
# the text has no symptom verb or state (:data:`SYMPTOM_WORD`). Matched on the NFKC text and its
# hiragana → katakana fold, so kana spellings are covered by the katakana alternatives.
HOW_TO = re.compile(
    r"どうやって|どうやったら|どうすれば.{0,6}(開|あけ|外|はず|消|け[しせ]|設定|使|つか|入|い[れら]|つけ|付け|戻|もど|直|なお)|"
    r"(やり方|やりかた|仕方|しかた|使い方|つかいかた|方法|ほうほう|ホウホウ|手順|てじゅん|[けしきえめれせい](方|かた))(を|が|は|って)?.{0,4}(教え|おしえ|知りた|しりた|わから|分から|わかん|ある|ありますか|[?？]|$)|"
    r"どこ|ドコ|(何|なん|ナン)の(意味|マーク|ランプ)|意味(は|って|を)|とは|"
    r"いつ(?!も)|イツ(?!モ)|いくつ|イクツ|(何|なん)(キロ|km|人|にん|リットル|年)|どれ|ドレ|どのように|どっち|ドッチ|どちら|ドチラ|"
    r"(?<![0-9])何(?!回|度|か|とか|だか)|なに(?!か|とか)|ナニ(?!カ)|なんで|ナンデ|なぜ|ナゼ|どうして|"
    r"(変え|替え|かえ|切り|きり|調整し|つなぎ|設定し|登録し)たい|(時期|空気圧)は[?？]|"
    r"(教えて|おしえて|オシエテ|知りたい|しりたい|シリタイ)|(予約|交換|点検).{0,6}(でき|したい|お願い|してもら|やってもら)|"
    r"(です|ます|でしょう|でした)か|デスカ|マスカ|[?？]")
# A symptom verb or state: a text with one of these is a report, not an information question.
SYMPTOM_WORD = re.compile(
    r"(?<!わから)(?<!分から)(?<!知ら)(?<!しら)(?<!ワカラ)(な|ませ|ナ)い(?!か)|しな|せず|止まら|とまら|トマラ|効か|きか|キカ|利か|煙|けむり|ケムリ|火|ヒ[ガバ]|漏|もれ|モレ|"
    r"音|オト|鳴|なっ|ナッ|臭|くさ|クサ|におい|匂い|ニオイ|点灯|点滅|つい(た|て)|ツイ[タテ]|点い|付い|光|ひか|ヒカ|チカチカ|ちかちか|ちらちら|ピカピカ|ぴかぴか|"
    r"警告|沈|しず|シズ|床|奥|おく|スカスカ|すかすか|ふわふわ|フワフワ|おかし|オカシ|変な|へんな|ヘンナ|異|振動|揺れ|ゆれ|ユレ|重|おも[いく]|かた[いく]|固|熱|あつ|焦げ|"
    r"壊|こわ|割れ|パンク|ぱんく|抜け|ぬけ|垂れ|たれ|タレ|出て|でて|デテ|出た|でた|デタ|出る|湯気|ゆげ|ユゲ|沸騰|オーバーヒート|赤|あか[いく]|アカ[イク]|"
    r"かから|カカラ|かかん|かかれ|かかりにく|再始動|エンスト|えんすと|動か|うごか|ウゴカ|動きませ|走れ|はしれ|進ま|すすま|戻ら|もどら|回ら|まわら|"
    r"取られ|とられ|流れ|寄っ|寄る|曇|くもり|悪[いく]|わる[いく]|弱|よわ|遅|鈍|にぶ|いまいち|イマイチ|いまひとつ|今ひとつ|今一つ|もっさり|もたつ|"
    r"切れ(た|て|そう|かけ)|きれ(た|て)|キレ[タテ]|ガタ|がた|カタカタ|かたかた|ビビ|びび|傷|キズ|きず|へこ|凹|剥げ|はげ|ハゲ|錆|さび|汚|"
    r"大丈夫|だいじょうぶ|ダイジョウブ|平気|へいき|ヘイキ|このまま|危な|あぶな|アブナ|やばい|ヤバイ|心配|しんぱい|怖|こわい|っぱなし|ッパナシ|まま|"
    r"上が|あが[っる]|アガ[ッル]|高[いく]|点き|付き|つき(っぱ|まま)|ぶつか|ブツカ|追突|衝突|当てられ|あてられ|接触|"
    r"故障|こしょう|コショウ|ぶつけ|ブツケ|事故|外れ|はずれ|緩|ゆる|剥が|はが|濡れ|ぬれ|バースト|破裂|展開|開い|エラー|表示され|なくな|無くな|減|へっ|増え|ふえ|しか")


@dataclass(frozen=True)
class Rule:
    id: str
    level: str
    reason: str
    patterns: tuple[re.Pattern[str], ...]  # hiragana folded (:func:`_folded`), matched on folded text
    can_drive: bool | None = None  # overrides the level's can_drive (a flat tyre at high: false)
    max_level: str | None = None  # the most the similarity vote may raise a text this rule matched


@dataclass
class KeywordUrgency:
    """Result of the keyword check: ``level`` is none / medium / high / critical."""

    level: str = "none"
    reasons: list[str] = field(default_factory=list)
    rule_ids: list[str] = field(default_factory=list)
    visit_urgency: str | None = None
    can_drive: bool | None = None
    max_level: str | None = None  # the matched rule's cap on what the similarity vote may add
    # set by core.diagnosis.urgency_semantic.fuse (the rules alone leave them at their defaults)
    rule_level: str | None = None  # the rules' own level, the floor nothing goes below
    semantic_level: str | None = None
    intent: str = "symptom"  # symptom / info / unknown (no Japanese)
    normal_case: str | None = None  # a manual "not a fault" case confirmed by a retrieved section
    normal_confirmed: bool = False

    @property
    def is_critical(self) -> bool:
        return self.level == "critical"


MAX_CHARS = 2000  # longer input is cut before matching (the patterns use bounded gaps)
_HIRAGANA = {c: c + 0x60 for c in range(0x3041, 0x3097)}
_COLLOQUIAL_NOT = re.compile(r"(?<=[かきくけこがぎぐげごさしすせそたちつてとまみむめもらりるれろわえべげぜで])ね[えぇー]")
# western / elderly negation: 「効かん」「止まらんかった」「点かんようになって」
_DIALECT_NOT_PAST = re.compile(r"(?<=[かがさばまらわえけせねめれ])ん(?=かった)")
# written negation: 「再始動できず。」「止まらず、」 (before a pause, the end, or 「に」「で」)
_LITERARY_NOT = re.compile(r"(?<=[かがさたなばまらわきぎしちにびみりえけげせてねべめれ])ず(?=[。、,.!?！？\s]|$|に|で|じまい)")
# spaces between Japanese words (kana-only writers space them: 「はんどる が ぜんぜん まわらなく なった」)
_JA_SPACE = re.compile(r"(?<=[\u3041-\u30ff\u4e00-\u9fff]) +(?=[\u3041-\u30ff\u4e00-\u9fff])")
_DIALECT_NOT = re.compile(r"(?<=[かがさばまらわえけせねめれ])ん(?=(じゃ|のじゃ|ようにな|のう|のや|わ|よ|ぞ|で|が|し|、|。|!|\?| |$))")


@lru_cache(maxsize=1)
def _synonyms() -> tuple[tuple[re.Pattern[str], str], ...]:
    data = yaml.safe_load(SYNONYMS_PATH.read_text(encoding="utf-8")) or {}
    return tuple((re.compile(item["from"]), item["to"]) for item in data.get("replacements") or [])


def canonical(text: str) -> str:
    """``text`` with the drivers' other words for what the rules spell one way written the rules'
    way (``data/urgency_synonyms.yaml``: 「オイルプレッシャーのワーニングランプ」 → 「油圧警告灯」,
    「警告等」 → 「警告灯」, 「燃料がしたたって」 → 「燃料が垂れて」)."""
    for pattern, replacement in _synonyms():
        text = pattern.sub(replacement, text)
    return text


VARIANTS_MEMO = 1024  # texts whose variants are remembered (a turn asks for the same text's many times)


def variants(text: str | None) -> list[str]:
    """The NFKC text, then (when different) the same with spaces between Japanese words dropped, and
    each of them with hiragana folded to katakana
    (「がそりんくさい」 → 「ガソリンクサイ」), with colloquial negation written out
    (「切れねえ」 → 「切れない」, 「効かんのじゃ」 → 「効かないのじゃ」, 「再始動できず。」 →
    「再始動できない。」) and in :func:`canonical`
    words, so kana spellings, casual speech, dialect and loanwords meet the same patterns. Every
    form is matched, so a form can add a match and never hides one. Remembered per text (bounded:
    :data:`VARIANTS_MEMO`); each caller gets its own list."""
    return list(_variants(unicodedata.normalize("NFKC", text or "")[:MAX_CHARS]))


@lru_cache(maxsize=VARIANTS_MEMO)
def _variants(base: str) -> tuple[str, ...]:
    if not base.strip():
        return ()
    out: list[str] = []
    joined = _JA_SPACE.sub("", base)
    for start in ((base, joined) if joined != base else (base,)):
        colloquial = _COLLOQUIAL_NOT.sub("ない", start)
        dialect = _DIALECT_NOT.sub("ない", _DIALECT_NOT_PAST.sub("な", _LITERARY_NOT.sub("ない", colloquial)))
        folded = start.translate(_HIRAGANA)
        for form in (start, folded, colloquial, dialect, canonical(dialect), canonical(folded)):
            if form not in out:
                out.append(form)
    return tuple(out)


NORMAL_FORM_MEMO = 1024  # texts whose normal form is remembered (the offline policy asks for a symptom's often)
CHECK_MEMO_MAX_CHARS = 2000  # a longer text is checked (and normalised) every time (the memos stay small)


@short_text_memo(NORMAL_FORM_MEMO, CHECK_MEMO_MAX_CHARS)
def normal_form(text: str | None) -> str:
    """One normalised reading of ``text`` for a learned model: the symptoms it denies set aside
    (:mod:`core.diagnosis.denials`), NFKC, spaces between Japanese words dropped, colloquial /
    dialect / written negation spelled out, the drivers' other words written the rules' way
    (:func:`canonical`) and hiragana folded to katakana — so 「ぶれーき きかねえ」 and
    「ブレーキ効かない」 share most of their characters. Remembered per text of at most
    :data:`CHECK_MEMO_MAX_CHARS` characters (:data:`NORMAL_FORM_MEMO` of them)."""
    base = unicodedata.normalize("NFKC", strip_denials(text).kept)[:MAX_CHARS]
    joined = _JA_SPACE.sub("", base)
    colloquial = _COLLOQUIAL_NOT.sub("ない", joined)
    dialect = _DIALECT_NOT.sub("ない", _DIALECT_NOT_PAST.sub("な", _LITERARY_NOT.sub("ない", colloquial)))
    return canonical(dialect).translate(_HIRAGANA).lower()


# A hypothetical question (「もし走行中にブレーキが効かなくなったら、どうすればいい？」): a symptom word
# inside an "if … then how" question is not a report. 「もしかして」「もしもし」 are not "if".
HYPOTHETICAL = re.compile(
    r"(?<!もし)(?<!モシ)(もし|モシ|万一|万が一|まんがいち|仮に|かりに)(?!かし|カシ|もし|モシ|か|カ)"
    r".{0,40}(たら|タラ|れば|レバ|なら|ナラ|ときは|時は|トキハ|場合は?|バアイ).{0,30}"
    r"(どう|ドウ|どの|ドノ|何を|なにを|ナニヲ|手順|テジュン|方法|ホウホウ|対処|タイショ|教え|おしえ|オシエ|知りた|しりた|シリタ|知っておき)")


def _only_hypothetical(form: str) -> bool:
    """A "what if" question and no symptom word outside it (「さっき効かなくなった。もしまた
    起きたらどうすれば」 is a report)."""
    match = HYPOTHETICAL.search(form)
    return match is not None and not SYMPTOM_WORD.search(form[:match.start()] + form[match.end():])


def is_how_to(text: str | None) -> bool:
    """An information / how-to question with no symptom verb or state in it (once the symptoms the
    text denies are set aside: 「オイル漏れはないけど交換時期を知りたい」), or a hypothetical "what if"
    question (:data:`HYPOTHETICAL`)."""
    return _how_to_forms(variants(strip_denials(text).kept))


# 「このランプは何の意味？」「エンジン警告灯とは」: a question about what a lamp means …
LAMP_MEANING = re.compile(r"(何|なん|ナン|なに|ナニ)(の|を|ノ|ヲ)?(意味|イミ|マーク|ランプ|表示|ひょうじ)|意味|いみ|イミ|とは|トハ|"
                          r"って(何|なに|なん)|ッテ(何|ナニ|ナン)|どういう|ドウイウ|何のこと|なんのこと")
# … with no lamp reported lit, flashing or showing now
LAMP_STATE = re.compile(r"点い|つい|ツイ|付い|点灯|点滅|光っ|光る|ひかっ|ヒカッ|出た|でた|出て|でて|消えな|きえな|チカチカ|ちかちか|"
                        r"ピカピカ|ぴかぴか|(?<!警告)(?<!表示)灯っ|ともっ|つきっぱなし|点きっぱなし")


def is_lamp_question(text: str) -> bool:
    """A question about what a lamp means, with no lamp said to be lit (「エンジン警告灯って何を意味するの？」)."""
    return bool(LAMP_MEANING.search(text or "")) and not LAMP_STATE.search(text or "")


def is_lamp_rule(rule_id: str) -> bool:
    """A rule about a lit lamp (「…_warning」, the generic lamp rule): a question about what a lamp
    means, with no lamp reported lit, is not that symptom."""
    return rule_id.endswith("_warning") or rule_id.startswith("warning_light") or rule_id == "brake_warning_red"


def _how_to_forms(forms: list[str]) -> bool:
    """:func:`is_how_to` on the text's :func:`variants`. A bare 「ない」 that only a negation rewrite
    put there (「こうかん ほうほう」 read as dialect 「こうかない」) is not a symptom word."""
    if any(_only_hypothetical(f) for f in forms):
        return True
    if not any(HOW_TO.search(f) for f in forms):
        return False
    original = forms[0] if forms else ""
    for form in forms:
        for match in SYMPTOM_WORD.finditer(form):
            if match.group(0) in ("ない", "ナイ") and "ない" not in original and "ナイ" not in original:
                continue
            return False
    return True


CHECK_MEMO = 512  # texts whose rule check each rule set remembers (a turn re-checks every symptom collected)


@dataclass
class UrgencyRules:
    rules: list[Rule]
    level_info: dict[str, dict]
    tests: list[dict]

    def __post_init__(self) -> None:
        self._checked = lru_cache(maxsize=CHECK_MEMO)(self._check)

    def check(self, text: str | None) -> KeywordUrgency:
        """:meth:`_check`, remembered per text (:data:`CHECK_MEMO`, :data:`CHECK_MEMO_MAX_CHARS`); each caller
        gets a result of its own (``check_many`` and the fusion change the one they hold)."""
        if text is not None and (not isinstance(text, str) or len(text) > CHECK_MEMO_MAX_CHARS):
            return self._check(text)
        found = self._checked(text)
        return replace(found, reasons=list(found.reasons), rule_ids=list(found.rule_ids))

    def _check(self, text: str | None) -> KeywordUrgency:
        """The first level (critical → high → medium) with a matching rule; ``none`` otherwise.
        The text's :func:`variants` (joined, colloquial and written negation spelled out, canonical
        words) are matched with hiragana folded to katakana, against patterns folded the same way,
        so a hiragana, katakana or mixed spelling meets the same words *and* the same exclusions
        (「まふらーから ゆげ」 is the muffler's steam, as 「マフラーから湯気」 is). A symptom the text
        only denies (「警告灯は点いていないけど」「異音や振動はない」, :mod:`core.diagnosis.denials`) is
        set aside first: it never raises the level."""
        written = variants(strip_denials(text).kept)
        if not written:
            return KeywordUrgency()
        question = _how_to_forms(written)
        lamp_question = question or any(is_lamp_question(f) for f in written)
        forms = list(dict.fromkeys(f.translate(_HIRAGANA) for f in written))
        for level in LEVELS:
            if level == "critical" and question:
                continue  # a risky word that is only the topic of a how-to question
            for rule in (r for r in self.rules if r.level == level):
                if lamp_question and is_lamp_rule(rule.id):
                    continue  # 「この警告灯は何の意味？」 asks about a lamp: the manual's lamp table answers it
                if any(p.search(form) for p in rule.patterns for form in forms):
                    info = self.level_info.get(level, {})
                    can_drive = rule.can_drive if rule.can_drive is not None else info.get("can_drive")
                    return KeywordUrgency(level=level, reasons=[rule.reason], rule_ids=[rule.id],
                                          visit_urgency=info.get("visit_urgency"), can_drive=can_drive,
                                          max_level=rule.max_level)
        return KeywordUrgency()

    def check_many(self, texts: Iterable[str]) -> KeywordUrgency:
        """Check each text on its own (patterns are single-line) and keep the highest level; the
        reasons of every text at that level are merged."""
        best = KeywordUrgency()
        for text in texts:
            result = self.check(text)
            if urgency_rank(result.level) > urgency_rank(best.level):
                best = result
            elif result.level == best.level and result.level != "none":
                if result.can_drive is False:
                    best.can_drive = False
                if result.max_level is None:
                    best.max_level = None  # an uncapped rule at the same level lifts the cap
                for reason, rule_id in zip(result.reasons, result.rule_ids):
                    if rule_id not in best.rule_ids:
                        best.reasons.append(reason)
                        best.rule_ids.append(rule_id)
        return best


def load_rules(path: Path | str = RULES_PATH) -> UrgencyRules:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    rules: list[Rule] = []
    level_info: dict[str, dict] = {}
    for level in LEVELS:
        spec = (data.get("levels") or {}).get(level) or {}
        level_info[level] = {"visit_urgency": spec.get("visit_urgency"), "can_drive": spec.get("can_drive")}
        for item in spec.get("rules") or []:
            rules.append(Rule(id=item["id"], level=level, reason=item["reason"],
                              patterns=_folded(item.get("patterns") or []),
                              can_drive=item.get("can_drive"), max_level=item.get("max_level")))
    return UrgencyRules(rules=rules, level_info=level_info, tests=list(data.get("tests") or []))


def _folded(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The hiragana → katakana fold of every pattern: rules are matched on folded text only
    (「はんどるが うごかない」 → 「ハンドルガ ウゴカナイ」), where they meet every hiragana alternative a
    rule spells out without writing each word twice, and where a negation or an exclusion the rule
    spells in hiragana or katakana (「煙は出ていない」 → 「煙ハ出テイナイ」) is recognised whatever the
    writer's script."""
    return tuple(re.compile(p.translate(_HIRAGANA)) for p in patterns)


@lru_cache(maxsize=1)
def default_rules() -> UrgencyRules:
    return load_rules()


def keyword_urgency_check(text: str | None, rules: UrgencyRules | None = None) -> KeywordUrgency:
    """Seed ``keyword_urgency_check``: the rule-based level of one text."""
    return (rules or default_rules()).check(text)
