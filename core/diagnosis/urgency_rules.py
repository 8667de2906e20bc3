"""Keyword urgency rules (seed 000 §6, ``data/urgency_rules.yaml``): the fast rule-based check.

Text is NFKC-normalised, then each level is tried in order critical → high → medium; within a
level the first rule with a matching pattern (``re.search``) gives the reason. No match is
level ``none``. The levels carry the seed's ``visit_urgency`` and ``can_drive``.
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


@dataclass
class KeywordUrgency:
    """Result of the keyword check: ``level`` is none / medium / high / critical."""

    level: str = "none"
    reasons: list[str] = field(default_factory=list)
    rule_ids: list[str] = field(default_factory=list)
    visit_urgency: str | None = None
    can_drive: bool | None = None

    @property
    def is_critical(self) -> bool:
        return self.level == "critical"


@dataclass
class UrgencyRules:
    rules: list[Rule]
    level_info: dict[str, dict]
    tests: list[dict]

    def check(self, text: str | None) -> KeywordUrgency:
        """The first level (critical → high → medium) with a matching rule; ``none`` otherwise."""
        normalised = unicodedata.normalize("NFKC", text or "")
        if not normalised.strip():
            return KeywordUrgency()
        for level in LEVELS:
            for rule in (r for r in self.rules if r.level == level):
                if any(p.search(normalised) for p in rule.patterns):
                    info = self.level_info.get(level, {})
                    return KeywordUrgency(level=level, reasons=[rule.reason], rule_ids=[rule.id],
                                          visit_urgency=info.get("visit_urgency"), can_drive=info.get("can_drive"))
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
                              patterns=tuple(re.compile(p) for p in item.get("patterns") or [])))
    return UrgencyRules(rules=rules, level_info=level_info, tests=list(data.get("tests") or []))


@lru_cache(maxsize=1)
def default_rules() -> UrgencyRules:
    return load_rules()


def keyword_urgency_check(text: str | None, rules: UrgencyRules | None = None) -> KeywordUrgency:
    """Seed ``keyword_urgency_check``: the rule-based level of one text."""
    return (rules or default_rules()).check(text)
