"""The UC-01 nodes (spec 05 §2–4): API, IR, GST, NP, GE, TOOL, NLG and Fallback.

Each node is a :class:`core.faq.graph.Node` with the state keys it reads and writes. Model calls
(IR ``faq_intent``, GE ``faq_plan``, NLG ``faq_answer``) go through ``core.engine.structured_call``
and only ever see PII-masked text: the API node masks the user's message before it enters the state.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, MutableSequence

from core.answer_guard import (
    NOT_ANSWERED,
    REGENERATION_TAIL,
    check_answer,
    guarded,
    offline_client,
    regeneration_messages,
)
from core.debuglog import CallTags
from core.engine import structured_call
from core.faq import answerability, intent_rules, policy, replies
from core.faq.config import FAQConfig
from core.faq.graph import Node
from core.faq.state import StateView, thaw
from core.prompts import load_prompt, render
from core.schemas import load_schema
from core.text.pii import mask_pii
from core.text.untrusted import data_block

TASK_NODES = ("GE", "TOOL", "NLG")
NON_TASK = ("oos", "question")


@dataclass
class FlowContext:
    """Everything a turn needs besides the state (dependencies, never stored in the state)."""

    client: Any
    kb: Any
    config: FAQConfig
    log: MutableSequence[dict[str, Any]] | None
    session_id: str
    user_text: str = ""  # raw input: only the API node reads it, and masks it

    def tags(self, step: str, prompt: str) -> CallTags:
        return CallTags(session_id=self.session_id, flow="faq", step=step, prompt=prompt)


def _last_user(messages: Any) -> str:
    return next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")


def _history(messages: Any, turns: int) -> list[dict[str, str]]:
    """Earlier user / assistant messages (the current user message excluded)."""
    convo = [{"role": m["role"], "content": m["content"]} for m in messages if m.get("role") in ("user", "assistant")]
    return convo[:-1][-2 * turns:] if turns > 0 else []


# ---- API ---------------------------------------------------------------------------------------

def api(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    masked = mask_pii(ctx.user_text)
    turn = view["turn_id"] + 1
    return {"session_id": view["session_id"] or ctx.session_id, "turn_id": turn,
            "messages": [{"role": "user", "content": masked, "turn_id": turn}],
            "trace": {"action": "receive", "outcome": "accepted", "pii_masked": masked != ctx.user_text}}


# ---- IR ----------------------------------------------------------------------------------------

def _clean_intent(data: dict[str, Any], text: str, source: str) -> dict[str, Any]:
    confidence = min(1.0, max(0.0, float(data.get("confidence") or 0.0)))
    query = mask_pii(str(data.get("query") or "").strip()) or intent_rules.rewrite_query(text)
    return {"intent_type": data["intent_type"], "confidence": round(confidence, 3), "query": query,
            "keywords": [mask_pii(str(k)) for k in data.get("keywords") or []][:8],
            "reason": str(data.get("reason") or ""), "source": source}


def ir(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    messages = view["messages"]
    text = _last_user(messages)
    previous = (view["goal"] or {}).get("topic")
    prompt_messages = [{"role": "system", "content": load_prompt("faq_intent_system")},
                       *_history(messages, ctx.config.history_turns),
                       {"role": "user", "content": render("faq_intent_user", previous_query=previous or "なし",
                                                          question=text)}]
    res = structured_call(ctx.client, prompt_messages, schema=load_schema("faq_intent"), name="faq_intent",
                          context={"text": text, "previous_query": previous}, log=ctx.log,
                          tags=ctx.tags("IR", "faq_intent_system"), temperature=0.0)
    trace: dict[str, Any] = {"action": "classify", "model_ok": res.ok}
    if res.ok:
        intent = _clean_intent(res.data, text, "model")
    else:  # keep going with the rule-based intent; the trace records the model failure
        intent = _clean_intent(intent_rules.classify(text, previous), text, "rules")
        trace["error_type"] = f"model_{res.error_type}"
    trace["outcome"] = intent["intent_type"]
    note = f"意図: {intent['intent_type']}（確信度 {intent['confidence']:.2f}）／検索語: {intent['query']}"
    return {"intent": intent, "messages": [{"role": "annotation", "node": "IR", "content": note}], "trace": trace}


# ---- GST ---------------------------------------------------------------------------------------

def gst(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    intent = view["intent"]
    previous = view["goal"] or {}
    decision = policy.check(_last_user(view["messages"]))
    topic = previous.get("topic")
    if decision.disallowed:
        goal = {"type": decision.action, "query": None, "topic": topic}
        mode, plan = decision.action.upper(), ["NP"]
    elif intent["intent_type"] in NON_TASK:
        goal = {"type": "non_task", "query": None, "topic": topic}
        mode, plan = ("SMALLTALK" if intent["intent_type"] == "question" else "REDIRECT"), ["NP"]
    else:
        kind = "explain_procedure" if intent["intent_type"] == "procedure" else "answer_faq"
        goal = {"type": kind, "query": intent["query"], "topic": intent["query"]}
        mode, plan = ("STEP_BY_STEP" if kind == "explain_procedure" else "ANSWER"), list(TASK_NODES)
    return {"goal": goal, "dialogue_mode": mode, "plan": plan, "policy": decision.as_state(),
            "trace": {"action": "set_goal", "outcome": mode.lower(), "rule_id": decision.rule_id}}


# ---- NP (non-task answers and policy refuse / handoff) -----------------------------------------

def non_task_kind(text: str) -> str:
    """Which non-task reply fits a ``question`` intent: thanks, farewell, greeting or about."""
    t = intent_rules.normalize(text)
    if intent_rules.THANKS.search(t):
        return "thanks"
    if intent_rules.FAREWELL.search(t):
        return "farewell"
    if intent_rules.GREETING.search(t):
        return "greeting"
    return "about"  # any other non-task question: say what this chat can do


def np_node(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    decision = view["policy"] or {}
    if decision.get("disallowed"):
        action = decision["action"]
        message = decision["message"] + (replies.HANDOFF_NOTE if action == "handoff" else "")
        outcome, trace_action = ("handoff" if action == "handoff" else "refused"), action
    else:
        kind = "oos" if view["intent"]["intent_type"] == "oos" else non_task_kind(_last_user(view["messages"]))
        message = replies.non_task(kind, _categories(ctx.kb))
        outcome, trace_action = "smalltalk", kind
    return {"response.message": message, "response.citations": [], "response.outcome": outcome,
            "messages": [{"role": "assistant", "content": message}],
            "trace": {"action": trace_action, "outcome": outcome, "rule_id": decision.get("rule_id")}}


def _categories(kb: Any) -> list[str]:
    try:
        return list(kb.categories())
    except Exception:  # noqa: BLE001 - a KB without categories still gets the default topics
        return []


# ---- GE (tool plan) ----------------------------------------------------------------------------

def ge(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    goal = view["goal"] or {}
    query, top_k = goal.get("query") or "", ctx.config.top_k
    trace: dict[str, Any] = {"action": "plan_tool"}
    if ctx.config.plan_with_model:
        prompt_messages = [{"role": "system", "content": load_prompt("faq_plan_system")},
                           {"role": "user", "content": render("faq_plan_user", goal=goal.get("type"),
                                                              dialogue_mode=view["dialogue_mode"],
                                                              query=query, top_k=top_k)}]
        res = structured_call(ctx.client, prompt_messages, schema=load_schema("faq_plan"), name="faq_plan",
                              context={"query": query, "top_k": top_k, "goal": thaw(goal)}, log=ctx.log,
                              tags=ctx.tags("GE", "faq_plan_system"), temperature=0.0)
        trace["model_ok"] = res.ok
        if res.ok:
            query = mask_pii(str(res.data["query"]).strip()) or query
            top_k = min(5, max(1, int(res.data["top_k"])))
        else:
            trace["error_type"] = f"model_{res.error_type}"
    trace["outcome"] = "kb_search"
    return {"tool.tool_name": "kb_search", "tool.tool_input": {"query": query, "top_k": top_k}, "trace": trace}


# ---- TOOL (KB search with retry) ---------------------------------------------------------------

def _search(ctx: FlowContext, query: str, top_k: int) -> tuple[list[Any] | None, dict[str, Any] | None, int]:
    """One KB search with the timeout retries of spec 05 §4.1: (hits or None, error, attempts)."""
    cfg = ctx.config
    hits, error, attempts = None, None, 0
    for retry in range(max(0, cfg.kb_max_retries) + 1):
        attempts += 1
        try:
            return ctx.kb.search(query, n_results=top_k), None, attempts
        except TimeoutError:
            error = {"error_type": "timeout", "node": "TOOL", "attempts": attempts, "detail": "KB search timed out"}
            if retry < cfg.kb_max_retries:
                cfg.sleep(cfg.backoff(retry))
        except Exception as exc:  # noqa: BLE001 - any other KB failure is not retried
            error = {"error_type": "kb_error", "node": "TOOL", "attempts": attempts, "detail": type(exc).__name__}
            break
    return hits, error, attempts


def _parts(ctx: FlowContext, query: str, top_k: int) -> list[dict[str, Any]]:
    """The message's questions when it asks more than one thing (:func:`answerability.split_questions`)
    and they find different articles: ``[{"question", "ids"}]`` with each one's own hits; else []."""
    questions = answerability.split_questions(query)
    if len(questions) < 2:
        return []
    parts, tops = [], set()
    for question in questions:
        hits, _, _ = _search(ctx, question, top_k)
        kept = [h for h in hits or [] if h.score >= ctx.config.min_score]
        parts.append({"question": question, "hits": kept})
        if kept:
            tops.add(kept[0].id)
    if len(tops) < 2:
        return []  # one matter asked in two sentences: the whole query's hits answer it
    return parts


def tool(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    tool_input = view["tool.tool_input"] or {}
    query, top_k = tool_input.get("query", ""), int(tool_input.get("top_k") or ctx.config.top_k)
    cfg = ctx.config
    hits, error, attempts = _search(ctx, query, top_k)
    if hits is None:
        detail = "タイムアウト" if error["error_type"] == "timeout" else "エラー"
        return {"tool.tool_output_summary": {"query": query, "hit_count": 0, "hits": [], "attempts": attempts},
                "tool.tool_ref": [], "tool.tool_status": "error", "last_error": error,
                "messages": [{"role": "tool", "name": "kb_search", "content": f"KB 検索{detail}（{attempts} 回試行）"}],
                "trace": {"action": "kb_search", "outcome": error["error_type"], "attempts": attempts,
                          "error_type": error["error_type"]}}
    relevant = [h for h in hits if h.score >= cfg.min_score]
    parts = _parts(ctx, query, top_k)
    if parts:  # each question's hits too (best score per article), the whole query's first
        merged = {h.id: h for h in relevant}
        for part in parts:
            for h in part["hits"]:
                if h.id not in merged or h.score > merged[h.id].score:
                    merged[h.id] = h
        relevant = sorted(merged.values(), key=lambda h: -h.score)
    ids = [h.id for h in relevant]
    status = "ok" if relevant else "empty"
    summary = ", ".join(f"{h.id}「{h.title}」({h.score:.2f})" for h in relevant) or "該当なし"
    out = {"query": query, "hit_count": len(relevant), "attempts": attempts, "hits": [h.as_dict() for h in relevant]}
    if parts:
        out["parts"] = [{"question": p["question"], "ids": [h.id for h in p["hits"]]} for p in parts]
    trace = {"action": "kb_search", "outcome": status, "attempts": attempts, "hits": len(relevant)}
    if parts:
        trace["questions"] = len(parts)
    return {"tool.tool_output_summary": out, "tool.tool_ref": ids, "tool.tool_status": status, "last_error": None,
            "messages": [{"role": "tool", "name": "kb_search", "content": summary}], "trace": trace}


# ---- NLG (answer with citations) ---------------------------------------------------------------

def _articles_text(hits: list[dict[str, Any]]) -> str:
    """Each article in its own data block: article text is data for the answer, never instructions."""
    return "\n\n".join(data_block(f"[{h['id']}] {h['title']}（カテゴリ: {h['category']}）\n{h['text']}") for h in hits)


def _not_found(trace: dict[str, Any], message: str = replies.NOT_FOUND) -> dict[str, Any]:
    return {"response.message": message, "response.citations": [], "response.outcome": "not_found",
            "last_error": None, "messages": [{"role": "assistant", "content": message}],
            "trace": {**trace, "outcome": "not_found"}}


def _questions(summary: dict[str, Any], question: str, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{"question", "hits", "missing"}]``: each question of the message (one, or the TOOL node's
    parts) with the retrieved articles that can answer it (:func:`answerability.answerable`) and, when
    none can, the fact they lack."""
    by_id = {h["id"]: h for h in hits}
    asked = summary.get("parts") or [{"question": question, "ids": [h["id"] for h in hits]}]
    out = []
    for part in asked:
        kept, missing = answerability.answerable([by_id[i] for i in part["ids"] if i in by_id], part["question"])
        out.append({"question": part["question"], "hits": kept, "missing": missing})
    return out


def _unanswered_lines(questions: list[dict[str, Any]], cited: set[str]) -> list[str]:
    """One line per question no cited article answers (multi-question messages)."""
    lines = []
    for q in questions:
        if not any(h["id"] in cited for h in q["hits"]):
            lines.append(replies.part_not_found(q["question"], q["missing"].label if q["missing"] else None,
                                                q["missing"].next_step if q["missing"] else None))
    return lines


def nlg(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    summary = thaw(view["tool.tool_output_summary"]) or {}
    hits = summary.get("hits") or []
    trace: dict[str, Any] = {"action": "compose"}
    if view["tool.tool_status"] != "ok" or not hits:
        return _not_found(trace)  # no article, no model call: nothing to invent from
    goal = view["goal"] or {}
    question = _last_user(view["messages"])
    questions = _questions(summary, question, hits)
    usable = {h["id"]: h for q in questions for h in q["hits"]}
    if not usable:  # the articles found do not state what was asked (a price the KB does not list)
        missing = next((q["missing"] for q in questions if q["missing"]), None)
        trace["missing_facet"] = missing.name if missing else None
        return _not_found(trace, replies.not_found_for(missing.label, missing.next_step) if missing else replies.NOT_FOUND)
    hits = [h for h in hits if h["id"] in usable]  # a model sees, and may cite, only articles that answer
    asked = question
    if len(questions) > 1:
        asked += "\n（ご質問は " + str(len(questions)) + " 点です: " + " ／ ".join(
            f"{i}) {q['question']}" for i, q in enumerate(questions, 1)) + "。それぞれに、根拠の記事を示して答えてください。）"
    prompt_messages = [{"role": "system", "content": load_prompt("faq_answer_system")},
                       *_history(view["messages"], ctx.config.history_turns),
                       {"role": "user", "content": render("faq_answer_user", question=asked,
                                                          query=goal.get("query") or question,
                                                          articles=_articles_text(hits))}]
    parts = [{"question": q["question"], "hits": q["hits"]} for q in questions] if len(questions) > 1 else []
    context = {"question": question, "query": goal.get("query"), "hits": hits, "parts": parts,
               "max_citations": ctx.config.max_citations}

    def call(client: Any, messages: list[dict[str, Any]], step: str = "NLG", keep_tail: int = 1) -> Any:
        return structured_call(client, messages, schema=load_schema("faq_answer"), name="faq_answer", context=context,
                               log=ctx.log, tags=ctx.tags(step, "faq_answer_system"), temperature=0.2,
                               stream_field="message",  # the answer streams to the page's sink, when it set one
                               keep_tail=keep_tail)

    res = call(ctx.client, prompt_messages)
    trace["model_ok"] = res.ok
    if res.ok:  # a non-answer (the question handed back, a figure no cited article states): once more, then offline
        checked = guarded(res, lambda r: _answer_fault(r.data, question, hits),
                          lambda finding: call(ctx.client, regeneration_messages(prompt_messages, res.raw, finding,
                                                                                 "message, citations"), "NLG-guard",
                                                 REGENERATION_TAIL),
                          lambda: call(offline_client(), prompt_messages, "NLG-offline"), log=ctx.log, task="faq_answer",
                          flow="faq")
        if checked.changed:
            trace["guard"] = {"outcome": checked.outcome, "findings": [f.code for f in checked.findings]}
        if checked.result is None:
            return _not_found(trace, NOT_ANSWERED)
        res = checked.result
    if not res.ok:
        error = {"error_type": f"nlg_{res.error_type}", "node": "NLG", "detail": res.provider_error or res.error_type}
        return {"response.message": None, "response.citations": [], "response.outcome": None, "last_error": error,
                "messages": [], "trace": {**trace, "outcome": "error", "error_type": error["error_type"]}}
    retrieved = {h["id"] for h in hits}
    limit = max(ctx.config.max_citations, len(questions))
    cited = list(dict.fromkeys(c for c in res.data["citations"] if c in retrieved))[:limit]
    trace["dropped_citations"] = len(set(res.data["citations"]) - retrieved)
    if not cited:
        return _not_found(trace)
    message = re.sub(r"[ \t]{2,}", " ", replies.remove_unknown_ids(res.data["message"], retrieved)).strip()
    if len(questions) > 1:
        missing_lines = _unanswered_lines(questions, set(cited))
        if missing_lines:
            message += "\n\n" + "\n".join(missing_lines)
        trace["questions"] = len(questions)
    return {"response.message": message, "response.citations": cited, "response.outcome": "answered",
            "last_error": None, "messages": [{"role": "assistant", "content": message, "citations": cited}],
            "trace": {**trace, "outcome": "answered"}}


def _answer_fault(data: dict[str, Any], question: str, hits: list[dict[str, Any]]) -> Any:
    """Why an NLG answer is no answer (``core.answer_guard.check_answer``): the question handed back, or a
    figure neither the articles it cites (all retrieved ones when it cites none) nor the question state."""
    cited = [h for h in hits if h["id"] in set(data.get("citations") or [])] or hits
    return check_answer(data.get("message"), user_text=question,
                        sources=[question, *(f"{h.get('title', '')}\n{h.get('text', '')}" for h in cited)])


# ---- Fallback ----------------------------------------------------------------------------------

def fallback(view: StateView, ctx: FlowContext) -> dict[str, Any]:
    error = view["last_error"] or {}
    message = replies.fallback(error.get("error_type"), error.get("attempts"))
    return {"response.message": message, "response.citations": [], "response.outcome": "fallback",
            "messages": [{"role": "assistant", "content": message}],
            "trace": {"action": "safe_message", "outcome": "fallback", "error_type": error.get("error_type")}}


RESPONSE = ("response.message", "response.citations", "response.outcome")
NODES = (
    Node("API", reads=("session_id", "turn_id"), writes=("session_id", "turn_id", "messages", "trace"), fn=api),
    Node("IR", reads=("messages", "goal"), writes=("intent", "messages", "trace"), fn=ir),
    Node("GST", reads=("intent", "messages", "goal"), writes=("goal", "dialogue_mode", "plan", "policy", "trace"),
         fn=gst),
    Node("NP", reads=("intent", "policy", "goal", "messages"), writes=(*RESPONSE, "messages", "trace"), fn=np_node),
    Node("GE", reads=("plan", "goal", "policy", "dialogue_mode"), writes=("tool.tool_name", "tool.tool_input", "trace"),
         fn=ge),
    Node("TOOL", reads=("tool.*",), writes=("tool.tool_output_summary", "tool.tool_ref", "tool.tool_status",
                                            "last_error", "messages", "trace"), fn=tool),
    Node("NLG", reads=("tool.*", "policy", "goal", "messages"), writes=(*RESPONSE, "last_error", "messages", "trace"),
         fn=nlg),
    Node("Fallback", reads=("last_error", "goal"), writes=(*RESPONSE, "messages", "trace"), fn=fallback),
)
