"""Policy check for the FAQ bot: requests to refuse or to hand off to a person (spec 05 §4.3 / UC-03).

Rules come from ``data/faq/policy_rules.yaml``: each has ``id, category, action (refuse|handoff),
patterns (regex), message``. The rules are tried in file order; the first rule with a matching
pattern decides (first match wins).

Matching works on :func:`core.text.normalize.match_key` of the text (NFKC, no zero-width characters, no
whitespace or line breaks, katakana as hiragana, case-insensitive), and every pattern is folded the
same way, so 「返 金 し て」, 「返金\nして」, 「ヘンキン」 and 「ＡＢＳ」 cannot slip past a rule. Patterns are
compiled with re2 (linear time on any input; no look-arounds or back-references).

A question with no Japanese in it (``language_rule`` in the same file) gets an honest "Japanese
only" reply and a handoff instead of a silent "not found".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import re2
import yaml

from core.paths import DATA_DIR
from core.text.input_gate import is_non_japanese
from core.text.normalize import fold_pattern, match_key, normalize

RULES_PATH = DATA_DIR / "faq" / "policy_rules.yaml"
ACTIONS = ("refuse", "handoff")


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    action: str
    patterns: tuple[Any, ...]  # re2 patterns over match_key(text)
    message: str


@dataclass(frozen=True)
class PolicyDecision:
    disallowed: bool
    action: str | None = None       # refuse / handoff
    rule_id: str | None = None
    category: str | None = None
    message: str | None = None

    def as_state(self) -> dict[str, Any]:
        return {"disallowed": self.disallowed, "action": self.action, "rule_id": self.rule_id,
                "category": self.category, "message": self.message}


ALLOWED = PolicyDecision(disallowed=False)


def _compile(rule_id: str, pattern: str) -> Any:
    try:
        return re2.compile("(?is)" + fold_pattern(pattern))
    except re2.error as exc:
        raise ValueError(f"policy rule {rule_id}: pattern {pattern!r} is not valid re2 syntax ({exc})") from exc


def _rule(item: dict[str, Any]) -> Rule:
    action = str(item.get("action", ""))
    if action not in ACTIONS:
        raise ValueError(f"policy rule {item.get('id')}: action must be refuse or handoff, got {action!r}")
    rule_id = str(item["id"])
    return Rule(id=rule_id, category=str(item.get("category", "")), action=action,
                patterns=tuple(_compile(rule_id, p) for p in item.get("patterns") or ()),
                message=re.sub(r"\s*\n\s*", "", str(item.get("message", "")).strip()))


def parse_rules(raw: dict[str, Any]) -> list[Rule]:
    return [_rule(item) for item in raw.get("rules") or []]


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[tuple[Rule, ...], tuple[dict[str, Any], ...], Rule | None]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    language = _rule(raw["language_rule"]) if raw.get("language_rule") else None
    return tuple(parse_rules(raw)), tuple(raw.get("tests") or ()), language


def load_rules(path: Path = RULES_PATH) -> list[Rule]:
    return list(_load(str(path))[0])


def load_rule_tests(path: Path = RULES_PATH) -> list[dict[str, Any]]:
    """The file's own regression cases: ``{text, expect: rule id | none}``."""
    return list(_load(str(path))[1])


def load_language_rule(path: Path = RULES_PATH) -> Rule | None:
    """The rule for questions without any Japanese (its patterns are unused)."""
    return _load(str(path))[2]


def check(text: str, rules: list[Rule] | None = None) -> PolicyDecision:
    """The first rule matching ``text`` (as :func:`core.text.normalize.match_key` reads it), then the
    language rule for a question without Japanese, or ``ALLOWED``."""
    key = match_key(text or "")
    for rule in load_rules() if rules is None else rules:
        if any(p.search(key) for p in rule.patterns):
            return PolicyDecision(True, rule.action, rule.id, rule.category, rule.message)
    language = load_language_rule()
    if language is not None and is_non_japanese(normalize(text or "")):
        return PolicyDecision(True, language.action, language.id, language.category, language.message)
    return ALLOWED
