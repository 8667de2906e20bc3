"""The guards on a real small model (issue #26): ``python -m bench.guards [--turn-deadline S]``.

Starts llama.cpp's server with Gemma 3 270M (:mod:`core.llm.llamacpp`, 2,048 tokens, one thread) and plays a
few turns of each flow through the console's own code (diagnosis: ``ChatService`` with the keyword manual
retriever; FAQ: ``core.faq.flow.ask`` on the bundled KB; knowledge: ``submit_turn``), twice: with the output
limit from the schema alone (``KAIWA_OUTPUT_LIMITS=schema``, as before issue #26) and with the measured
limits (``data/output_limits.json``). Prints per flow and run: turns, median and max turn time, the output
limits sent, and how many answers the guards changed and why (the ``guards`` entries of the debug records:
code and action). One process, one server, the same turns: the two runs are comparable; the machine is
shared, so the load average is printed with them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from typing import Any, Callable

from core.llm.llamacpp import GEMMA, LlamaServer, ServerConfig

DIAGNOSIS = ["赤信号で止まったらハイブリッドのエンジンが勝手に再始動した", "給油口の開け方がわからない",
             "ブレーキを踏むとキーキー鳴ります", "走行中に異音がする"]
FAQ = ["オイル交換の目安はどのくらいですか？", "保証期間は何年ですか？"]
KNOWLEDGE = ["売買契約の代金支払条項で、支払期限が書かれていなかった件です", "秘密保持契約の有効期間で揉めました。",
             "業務委託契約の損害賠償の上限が低すぎると指摘されました"]


def _client(server: LlamaServer, deadline: float):
    from core.llm.registry import ProviderRegistry
    from core.llm.settings import load_settings

    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": server.model, "KAIWA_PROVIDER": "openai",
           "KAIWA_TIMEOUT": str(deadline), "KAIWA_FIRST_TOKEN_TIMEOUT": str(deadline),
           "KAIWA_TOKEN_GAP_TIMEOUT": "60", "KAIWA_TURN_DEADLINE": str(deadline), "KAIWA_MAX_REPAIRS": "0"}
    return ProviderRegistry(load_settings(env)).get_active()


def _diagnosis(client: Any, text: str, log: list) -> None:
    import sys

    sys.path.insert(0, "tests/core/diagnosis")
    from diagnosis_fakes import KeywordManualRetriever  # the deterministic retriever over the bundled manuals

    from core.diagnosis import ChatRequest
    from core.diagnosis.service import ChatService
    from core.diagnosis.session_store import InMemorySessionStore

    service = ChatService(client, retriever=KeywordManualRetriever(), log=log, store=InMemorySessionStore())
    sid = service.start().session_id
    service.process(ChatRequest(session_id=sid, action="select_vehicle", action_value="kaiwa-mirai-hv-2022"))
    service.process(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    service.process(ChatRequest(session_id=sid, message=text))


def _faq(client: Any, text: str, log: list) -> None:
    from core.faq.config import FAQConfig
    from core.faq.flow import ask, start_session
    from core.faq.kb import default_kb

    ask(start_session("bench"), text, client=client, kb=default_kb(), log=log, config=FAQConfig(plan_with_model=False))


def _knowledge(client: Any, text: str, log: list) -> None:
    from core.knowledge.session import submit_turn

    submit_turn([], [], text, [], client, log=log)


FLOWS: dict[str, tuple[list[str], Callable[[Any, str, list], None]]] = {
    "diagnosis": (DIAGNOSIS, _diagnosis), "faq": (FAQ, _faq), "knowledge": (KNOWLEDGE, _knowledge)}


def run(server: LlamaServer, deadline: float, limits: str, flows: tuple[str, ...] = tuple(FLOWS)
        ) -> dict[str, dict[str, Any]]:
    os.environ["KAIWA_OUTPUT_LIMITS"] = limits
    out = {}
    for flow, (texts, play) in FLOWS.items():
        if flow not in flows:
            continue
        times, guards, sent = [], Counter(), Counter()
        for text in texts:
            client = _client(server, deadline)
            log: list = []
            started = time.monotonic()
            play(client, text, log)
            times.append(time.monotonic() - started)
            for record in log:
                if record.get("provider") != "offline" and not (record.get("call") or {}).get("not_sent"):
                    sent[f"{record['task']}:{record['call'].get('max_tokens')}"] += 1
                for entry in record.get("guards") or []:
                    guards[f"{entry['guard']}→{entry['action']}"] += 1
        out[flow] = {"turns": len(texts), "median_s": round(statistics.median(times), 1), "max_s": round(max(times), 1),
                     "limits": dict(sent), "guards": dict(guards), "load1": round(os.getloadavg()[0], 1)}
        print(f"[{limits}] {flow}: {out[flow]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turn-deadline", type=float, default=150.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--flows", default=",".join(FLOWS), help="comma separated: diagnosis,faq,knowledge")
    args = parser.parse_args(argv)
    flows = tuple(f.strip() for f in args.flows.split(",") if f.strip() in FLOWS)
    with LlamaServer(ServerConfig(model=GEMMA, n_ctx=2048, threads=args.threads)) as server:
        for limits in ("schema", "measured"):
            run(server, args.turn_deadline, limits, flows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
