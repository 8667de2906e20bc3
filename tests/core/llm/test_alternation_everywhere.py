"""Every model call of every flow goes out as a stack a strict chat template accepts (one system message,
then user / assistant strictly alternating): the three flows' scenario files, a repair, failed turns and
resends, and a workbench replay of a record made with seed 001's old stack. The client answers like the
offline provider but refuses, as Gemma's template does, any stack that does not alternate."""
from __future__ import annotations

from pathlib import Path

from core.eval.runner import load_file, run_scenario
from core.faq.flow import ask, start_session
from core.knowledge.session import resend, submit_turn
from core.knowledge.turn import system_prompt
from core.llm.base import LLMRequest, LLMResponse, ProviderError
from core.llm.messages import alternates
from core.llm.offline import OfflineClient
from core.prompts import load_prompt
from core.workbench.replay import replay

# One scenario file per flow that between them reach every model task of the three flows.
SCENARIOS = [Path(__file__).resolve().parents[2] / "scenarios" / f"{name}.yaml"
             for name in ("diagnosis_booking", "diagnosis_loop", "faq_acceptance", "knowledge_attachments")]


class StrictTemplateClient(OfflineClient):
    """The offline provider behind a template that wants alternation; ``fail`` tasks fail once with 401."""

    def __init__(self, fail: tuple[str, ...] = (), bad_first: tuple[str, ...] = ()):
        super().__init__()
        self.requests: list[LLMRequest] = []
        self.fail, self.bad_first = list(fail), list(bad_first)

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not alternates(request.messages):
            raise ProviderError("template", "Conversation roles must alternate user/assistant/user/assistant/...", 400)
        if request.task in self.fail:
            self.fail.remove(request.task)
            raise ProviderError("auth", "401", 401)
        if request.task in self.bad_first:
            self.bad_first.remove(request.task)
            return LLMResponse(content="これは JSON ではありません", model=self.model)
        return super().complete(request)

    def check(self) -> None:
        assert self.requests and all(alternates(r.messages) for r in self.requests)


def test_every_flows_scenarios_run_with_a_strict_template_and_reach_every_model_task():
    clients: list[StrictTemplateClient] = []

    def factory() -> StrictTemplateClient:
        clients.append(StrictTemplateClient())
        return clients[-1]

    for path in SCENARIOS:
        for scenario in load_file(path):
            result = run_scenario(scenario, factory, source=str(path))
            assert result.passed, (path.stem, scenario.get("name"), result.problems)
    for client in clients:
        if client.requests:
            client.check()
    tasks = {r.task for c in clients for r in c.requests}
    assert {"diagnostic_response", "choice_judgment", "rag_answer", "faq_intent", "faq_plan", "faq_answer",
            "knowledge_llm_turn"} <= tasks, tasks


def test_a_repair_request_alternates_and_carries_the_bad_output_once():
    client = StrictTemplateClient(bad_first=("knowledge_llm_turn",))
    outcome = submit_turn([], [], "秘密保持契約の件です", [], client)
    assert outcome.result.ok and outcome.result.repairs == 1
    repair = client.requests[1].messages
    assert repair[-2]["role"] == "assistant" and repair[-2]["content"] == "これは JSON ではありません"
    assert "これは JSON ではありません" not in repair[-1]["content"]
    client.check()


def test_knowledge_history_after_a_failed_turn_and_a_resend():
    client = StrictTemplateClient(fail=("knowledge_llm_turn",))
    chat, outputs = [], []
    failed = submit_turn(chat, outputs, "業務委託契約の損害賠償の件です", [], client)
    assert not failed.result.ok and failed.result.provider_error == "auth"
    assert resend(chat, outputs, failed.user_entry["id"], client).result.ok
    assert submit_turn(chat, outputs, "上限がないのが問題でした", [], client).result.ok
    last = client.requests[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    client.check()


def test_faq_history_after_a_failed_answer():
    client = StrictTemplateClient(fail=("faq_answer",))
    state = start_session("strict")
    for question in ("オイル交換の目安は？", "タイヤの空気圧はどのくらい？", "車検の予約はできますか？"):
        state = ask(state, question, client=client).state
    assert any(r.task == "faq_answer" for r in client.requests)
    client.check()


def test_a_replay_of_a_record_made_with_the_old_seed_stack():
    few_shot_turn = load_prompt("knowledge_few_shot_turn.json")
    record = {"task": "knowledge_llm_turn", "flow": "knowledge", "step": "turn", "temperature": 0.2,
              "messages": [{"role": "system", "content": system_prompt()},
                           {"role": "assistant", "content": few_shot_turn},  # seed 001 as it was: refused by Gemma
                           {"role": "user", "content": "ユーザー指示:\n秘密保持契約の件です"}],
              "raw_output": few_shot_turn}
    client = StrictTemplateClient()
    result = replay(record, client=client)
    assert result.new.ok
    client.check()
