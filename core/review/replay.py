"""The reviewed set against a prompt version or model: every stored regression case is played again
(``core.eval``) on the client given — the prompt versions in use, the provider and model chosen — and each
row says whether the new answer matches what the reviewer decided (its expectations hold). A ナレッジに質問
case asks the library of the store given (the current one).

To try a prompt, either save it in the workbench (it is then the version in use in every process) and
replay, or replay with ``drafts`` — ``{prompt name: unsaved text}``, served to this replay only
(``core.prompts.draft_prompts``: this thread, never saved, never a version); the rows then say
「未保存の下書き」. To try a model, pick it: the client is copied with that model (``core.workbench.with_model``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from core.eval.runner import run_scenario
from core.prompts import draft_prompts
from core.review.answers import current_prompt_version
from core.store.review import VERDICT_JA
from core.workbench.replay import with_model

MAX_REPLAY = 500
DRAFT_JA = "未保存の下書き"


@dataclass
class ReplayRow:
    scenario_id: int
    item_id: int | None
    flow: str
    name: str
    verdict: str | None
    expect: dict[str, Any]
    matches: bool
    failures: list[str] = field(default_factory=list)
    prompt_version: str = ""

    def as_row(self) -> dict[str, Any]:
        return {"No.": self.scenario_id, "項目": self.item_id, "フロー": self.flow,
                "レビュー判定": VERDICT_JA.get(self.verdict or "", "—"), "期待": ", ".join(self.expect),
                "プロンプト版": self.prompt_version, "判定と一致": "✅ 一致" if self.matches else "❌ 不一致",
                "不一致の内容": " / ".join(self.failures)[:500]}


def draft_label(versions: Mapping[str, str]) -> str:
    """How a replay with unsaved drafts names its prompt version: 「未保存の下書き（name@version）」."""
    return f"{DRAFT_JA}（{', '.join(f'{n}@{v}' for n, v in versions.items())}）"


def replay_reviewed(store: Any, client_factory: Callable[[], Any], *, model: str | None = None,
                    limit: int = MAX_REPLAY, drafts: Mapping[str, str] | None = None) -> list[ReplayRow]:
    """Every active stored regression case (the newest ``limit``) on ``client_factory()`` (with ``model``),
    with the unsaved ``drafts`` served instead of the prompts in use (when given)."""
    rows = store.list_review_scenarios()[-limit:]
    out = []
    with draft_prompts(drafts or {}) as versions:
        for row in rows:
            scenario = row["scenario"]
            result = run_scenario(scenario, lambda: with_model(client_factory(), model),
                                  source="store:review_scenarios", store=store)
            review = scenario.get("review") or {}
            flow = str(scenario.get("flow") or "")
            version = current_prompt_version(flow)
            if versions:
                version = f"{version} · {draft_label(versions)}" if not any(
                    version.startswith(f"{n}@") for n in versions) else draft_label(versions)
            out.append(ReplayRow(int(row["id"]), row.get("item_id"), flow, str(scenario.get("name") or ""),
                                 review.get("verdict"), dict(scenario.get("expect") or {}), result.passed,
                                 list(result.failures), version))
    return out
