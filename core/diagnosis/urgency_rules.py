"""Keyword urgency rules (seed 000 §6, ``data/urgency_rules.yaml``): the fast rule-based check.

Text is NFKC-normalised, then each level is tried in order critical → high → medium; within a
level the first rule with a matching pattern (``re.search``) gives the reason. No match is
level ``none``. The levels carry the seed's ``visit_urgency`` and ``can_drive``; a rule may
override ``can_drive`` (a puncture is high but never drivable to a shop).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import yaml

from core.diagnosis.models import urgency_rank
from core.paths import DATA_DIR

RULES_PATH = DATA_DIR / "urgency_rules.yaml"
LEVELS = ("critical", "high", "medium")


@dataclass(frozen=True)
class Rule:
    id: str
    level: str
    reason: str
    patterns: tuple[re.Pattern[str], ...]
    can_drive: bool | None = None  # overrides the level's can_drive (a flat tyre at high: false)


@dataclass
class KeywordUrgency:
    """Result of the keyword check: ``level`` is none / medium / high / critical."""

    level: str = "none"
    reasons: list[str] = field(default_factory=list)
    rule_ids: list[str] = field(default_factory=list)
    visit_urgency: str | None = None
    can_drive: bool | None = None
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
_DIALECT_NOT = re.compile(r"(?<=[かがさばまらわえけせねめれ])ん(?=(じゃ|のじゃ|ようにな|のう|のや|わ|よ|ぞ|で|が|し|、|。|!|\?|$))")


def variants(text: str | None) -> list[str]:
    """The NFKC text, then (when different) the same with hiragana folded to katakana
    (「がそりんくさい」 → 「ガソリンクサイ」) and with colloquial negation written out
    (「切れねえ」 → 「切れない」, 「効かんのじゃ」 → 「効かないのじゃ」), so kana spellings, casual
    speech and dialect meet the same patterns."""
    base = unicodedata.normalize("NFKC", text or "")[:MAX_CHARS]
    if not base.strip():
        return []
    out = [base]
    dialect = _DIALECT_NOT.sub("ない", _DIALECT_NOT_PAST.sub("な", base))
    for form in (base.translate(_HIRAGANA), _COLLOQUIAL_NOT.sub("ない", base), dialect):
        if form not in out:
            out.append(form)
    return out


@dataclass
class UrgencyRules:
    rules: list[Rule]
    level_info: dict[str, dict]
    tests: list[dict]

    def check(self, text: str | None) -> KeywordUrgency:
        """The first level (critical → high → medium) with a matching rule; ``none`` otherwise.
        Each pattern is tried on the text and on its :func:`variants` (kana folded, colloquial
        negation written out)."""
        forms = variants(text)
        if not forms:
            return KeywordUrgency()
        for level in LEVELS:
            for rule in (r for r in self.rules if r.level == level):
                if any(p.search(form) for p in rule.patterns for form in forms):
                    info = self.level_info.get(level, {})
                    can_drive = rule.can_drive if rule.can_drive is not None else info.get("can_drive")
                    return KeywordUrgency(level=level, reasons=[rule.reason], rule_ids=[rule.id],
                                          visit_urgency=info.get("visit_urgency"), can_drive=can_drive)
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
                              patterns=tuple(re.compile(p) for p in item.get("patterns") or []),
                              can_drive=item.get("can_drive")))
    return UrgencyRules(rules=rules, level_info=level_info, tests=list(data.get("tests") or []))


@lru_cache(maxsize=1)
def default_rules() -> UrgencyRules:
    return load_rules()


def keyword_urgency_check(text: str | None, rules: UrgencyRules | None = None) -> KeywordUrgency:
    """Seed ``keyword_urgency_check``: the rule-based level of one text."""
    return (rules or default_rules()).check(text)
