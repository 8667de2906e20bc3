"""Policy check for the FAQ bot: requests to refuse or to hand off to a person (spec 05 §4.3 / UC-03).

Rules come from ``data/faq/policy_rules.yaml``: each has ``id, category, action (refuse|handoff),
patterns (regex), message``. The text is NFKC-normalised and the rules are tried in file order;
the first rule with a matching pattern decides (first match wins).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from core.paths import DATA_DIR

RULES_PATH = DATA_DIR / "faq" / "policy_rules.yaml"
ACTIONS = ("refuse", "handoff")


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    action: str
    patterns: tuple[re.Pattern[str], ...]
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


def parse_rules(raw: dict[str, Any]) -> list[Rule]:
    rules = []
    for item in raw.get("rules") or []:
        action = str(item.get("action", ""))
        if action not in ACTIONS:
            raise ValueError(f"policy rule {item.get('id')}: action must be refuse or handoff, got {action!r}")
        rules.append(Rule(id=str(item["id"]), category=str(item.get("category", "")), action=action,
                          patterns=tuple(re.compile(p) for p in item.get("patterns") or ()),
                          message=re.sub(r"\s*\n\s*", "", str(item.get("message", "")).strip())))
    return rules


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[tuple[Rule, ...], tuple[dict[str, Any], ...]]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return tuple(parse_rules(raw)), tuple(raw.get("tests") or ())


def load_rules(path: Path = RULES_PATH) -> list[Rule]:
    return list(_load(str(path))[0])


def load_rule_tests(path: Path = RULES_PATH) -> list[dict[str, Any]]:
    """The file's own regression cases: ``{text, expect: rule id | none}``."""
    return list(_load(str(path))[1])


def check(text: str, rules: list[Rule] | None = None) -> PolicyDecision:
    """The first rule matching ``text`` (NFKC-normalised), or ``ALLOWED``."""
    normalized = unicodedata.normalize("NFKC", text or "")
    for rule in load_rules() if rules is None else rules:
        if any(p.search(normalized) for p in rule.patterns):
            return PolicyDecision(True, rule.action, rule.id, rule.category, rule.message)
    return ALLOWED
