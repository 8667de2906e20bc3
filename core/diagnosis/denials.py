"""Denied symptoms: the parts of a message where the customer says a symptom is *absent*.

「警告灯は点いていないけど、走るとゴトゴト音がする」「異音や振動はないが燃費が悪い」「オイル漏れはないけど
交換時期を知りたい」「煙は出ていない」「警告灯なし」 — a symptom named only to deny it must never raise
the urgency nor open questions about it. :func:`strip_denials` returns the text with those spans
removed (what the urgency rules, the learned layer and the question plan read) and the denied
symptom words (what the prompt and the question guard use).

A span is a symptom noun (a list of them: 「異音や振動」), a topic / listing particle or a bare
noun before a progressive negative, an optional adverb (特に・全然・一切 …), an optional verb of
occurrence (点いて・出て・して・聞こえ・感じ …) and a negation (ない・ません・なし・ねえ・へん …).
「ブレーキが効かない」「エンジンがかからない」「冷たい風が出ない」 are not denials: their verbs are
the fault, not the symptom's occurrence, and 「風」 is not a symptom noun. 「READY表示灯が点かない」 and
「ヘッドランプが点いていない」 are faults too (those lamps are not warning lamps).

Input is NFKC-normalised and capped (:data:`MAX_CHARS`); every quantifier is bounded, so the time
is linear in the (capped) input.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MAX_CHARS = 2000

# Symptom nouns a customer denies (hiragana and katakana spellings; the longest first within a group).
_NOUN = (r"(?:(?<![ァ-ヶーA-Za-z])(?:警告灯|警告ランプ|ワーニングランプ|ワーニング|チェックランプ|エンジンチェック|ランプ|マーク|エラー表示|エラーメッセージ|エラー|"
         r"けいこくとう|ケイコクトウ)|"
         r"異音|変な音|へんな音|おかしな音|異常音|金属音|音|おと|オト|"
         r"振動|しんどう|揺れ|ゆれ|ブレ|ぶれ|ガタつき|がたつき|"
         r"煙|けむり|ケムリ|白煙|黒煙|湯気|ゆげ|"
         r"異臭|焦げ臭さ|焦げくささ|におい|匂い|臭い|ニオイ|"
         r"オイル漏れ|おいるもれ|水漏れ|液漏れ|燃料漏れ|ガソリン漏れ|漏れ|もれ|モレ|シミ|しみ|水たまり|"
         r"事故|衝突|接触|追突|"
         r"点灯|点滅|異常|不具合|症状|違和感|問題)")
# a modifier the noun may carry (「焦げ臭いにおい」「変な音」「白い煙」) and a leading adverb (「特に異常は」)
_MOD = (r"(?:(?:特に|とくに|他に|ほかに|それ以外に|それ以外の|これといった|目立った)\s?)?"
        r"(?:(?:焦げ臭い|焦げくさい|こげくさい|焦げた|甘い|あまい|変な|へんな|おかしな|異常な|大きな|大きい|白い|黒い|"
        r"青い|強い|嫌な|いやな|ガソリンの|オイルの|ゴムの|気になる|いつもと違う)\s?)?")
_NOUNS = rf"{_MOD}{_NOUN}(?:(?:や|と|とか|、|・|も|か|の){_MOD}(?:{_NOUN})){{0,3}}"
# Lamps that are not warning lamps: 「ヘッドランプが点いていない」 is a fault, not a denial.
_NOT_WARNING_LAMP = re.compile(r"(ヘッド|テール|ルーム|室内|マップ|ブレーキ|バック|READY|レディ|フォグ|ウインカー|ハザード|車幅|フット|足元)"
                               r"(ランプ|ライト|灯|表示灯)?$")
_PARTICLE = r"(?:(?:とか|なんか|なんて|など|等|って)(?:は|も)?|は|も|すら)"
_ADVERB = r"(?:特に|とくに|トクニ|全然|ぜんぜん|一切|いっさい|全く|まったく|何も|なにも|別に|べつに|まだ|一度も|いちども|今のところ|いまのところ|今は|いまは)"
_VERB = (r"(?:点灯|点滅|点い|つい|ツイ|付い|灯っ|光っ|ひかっ|出|で|デ|し|聞こえ|きこえ|感じ|かんじ|起き|起こし|おこし|"
         r"漏れ|もれ|垂れ|たれ|鳴っ|なっ|上がっ|あがっ|見当たら|みあたら|見え|みえ|あり|有り|ある|起こっ|おこっ)"
         r"(?:て|てる|ては|ても|たり|たりは|たりも)?(?:は|も)?(?:い|おり|お|ら)?")
_NEG = (r"(?:ない|無い|ねえ|ねー|ねぇ|へん|ひん|ません|ませんでした|なかった|なし|無し|ナシ|ないです|ありません|"
        r"ございません|んかった|ん(?=[。、,!?！？\s]|$|けど|が|し|よ|ね|で))")
# noun + particle (+ adverb) (+ verb) + negation;  noun + なし;  bare / が noun + progressive negative
_DENIAL = re.compile(
    rf"(?P<nouns>{_NOUNS})(?:(?:{_PARTICLE}) ?{_ADVERB}? ?(?:{_VERB})?{_NEG}"
    rf"|(?:は|も)?(?:{_ADVERB})? ?(?:なし|無し|ナシ)(?![ァ-ヶー])"
    rf"|(?:が|を)?{_ADVERB}? ?(?:点い|つい|付い|点灯し|出|で|し|光っ|鳴っ|漏れ|垂れ)(?:て|た)(?:は|も)?(?:い|お)?(?:ない|ねえ|ねー|ません|へん|ひん))")
_SPLIT_NOUNS = re.compile(rf"{_NOUN}")
# what is left after a removed span: a dangling connective (けど・が・し・、) at the start of the rest
_CONNECTIVE = re.compile(r"^ ?(?:です|んです|んだ|みたい|よう)? ?(?:けれども|けれど|けど|が|し|ので|から|のに)?(?:、|,| )?")


@dataclass
class Denial:
    """``kept``: the text without the denied spans; ``denied``: the symptom words denied (in order)."""

    kept: str
    denied: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.denied)


def _is_warning_lamp_context(text: str, start: int, noun: str) -> bool:
    """「ランプ」「マーク」 right after a non-warning lamp word (ヘッド、ルーム …) is that lamp, not a warning lamp."""
    if noun not in ("ランプ", "マーク"):
        return True
    return _NOT_WARNING_LAMP.search(text[max(0, start - 8):start + len(noun)]) is None


def strip_denials(text: str | None) -> Denial:
    """The text with every denied-symptom span removed, and the denied nouns."""
    norm = unicodedata.normalize("NFKC", text or "")[:MAX_CHARS]
    denied: list[str] = []
    pieces: list[str] = []
    pos = 0
    for match in _DENIAL.finditer(norm):
        nouns = _SPLIT_NOUNS.findall(match.group("nouns"))
        if not nouns or not _is_warning_lamp_context(norm, match.start(), nouns[0]):
            continue
        if norm[match.end():match.end() + 1] in ("か", "の") and norm[match.end():match.end() + 2] != "のに":
            continue  # 「点いてないか」「異常なのか」: a question, not a statement
        pieces.append(norm[pos:match.start()])
        rest = norm[match.end():]
        pos = match.end() + len(_CONNECTIVE.match(rest).group(0))
        for noun in nouns:
            if noun not in denied:
                denied.append(noun)
    if not denied:
        return Denial(kept=norm)
    pieces.append(norm[pos:])
    kept = re.sub(r"^[、。,\s]{1,8}|(?:けれど|けど|が)?[、,\s]{0,8}$", "", "".join(pieces))
    return Denial(kept=kept.strip(), denied=denied)


# Question topics that are about a denied symptom (a lamp question after 「警告灯は点いていない」).
_TOPIC_WORDS = {
    "lamp": ("警告灯", "ランプ", "表示灯", "マーク", "インジケーター", "点灯", "点滅"),
    "noise": ("音", "鳴"),
    "vibration": ("振動", "揺れ", "ブレ"),
    "smoke": ("煙", "湯気"),
    "smell": ("におい", "匂い", "臭"),
    "leak": ("漏れ", "液体", "垂れ", "水たまり", "シミ"),
    "collision": ("事故", "衝突", "接触", "追突"),
}
_DENIED_KIND = (
    ("lamp", re.compile(r"警告|ランプ|マーク|エラー|ワーニング|チェック|けいこくとう|ケイコクトウ")),
    ("noise", re.compile(r"音|おと|オト")),
    ("vibration", re.compile(r"振動|しんどう|揺れ|ゆれ|ブレ|ぶれ|ガタつき|がたつき")),
    ("smoke", re.compile(r"煙|けむり|ケムリ|湯気|ゆげ")),
    ("smell", re.compile(r"臭|におい|匂い|ニオイ")),
    ("leak", re.compile(r"漏れ|もれ|モレ|シミ|しみ|水たまり")),
    ("collision", re.compile(r"事故|衝突|接触|追突")),
)


def denied_kinds(denied: list[str]) -> set[str]:
    """The symptom kinds (lamp, noise, vibration, smoke, smell, leak, collision) of the denied words."""
    return {kind for word in denied for kind, pattern in _DENIED_KIND if pattern.search(word)}


def asks_about_denied(topic: str | None, message: str | None, denied: list[str]) -> bool:
    """A question whose topic (or, with no topic, its message) is about a symptom the customer denied."""
    kinds = denied_kinds(denied)
    if not kinds:
        return False
    text = unicodedata.normalize("NFKC", topic or message or "")
    return any(word in text for kind in kinds for word in _TOPIC_WORDS[kind])
