"""Streaming replies: how soon the page shows the first character once the server has written its first
token, as a ratio to the server's own time to first token.

The knowledge page runs in ``streamlit.testing.v1.AppTest`` (the whole ``app.py``) against llama.cpp's
real server (``core.llm.llamacpp``: Gemma 3 270M, one slot, a 2,048-token context) with a throwaway
SQLite store. Each turn streams ``assistant_message`` into the page's placeholder (``ui.streaming``);
the page's sink records, per call, the server's time to first token (request sent → first content
chunk read by the client, queue and prompt processing included) and the time from that chunk to the
first character written to the page's placeholder (partial JSON parsed, safe markdown rendered,
Streamlit element sent). ``stream_first_char_vs_server_ttft`` is the median over the turns of the
second divided by the first, both measured in the same call; the absolute medians are reported too.
That time includes the tokens the model writes before the field's first character (``{``, the key,
whitespace: 5–8 tokens with Gemma's tokenizer), so ``stream_text_chunk_to_page_ms_p50`` gives our own
part alone: from the arrival of the chunk that brought the first character to the page.
"On the page" is Streamlit's side: the browser's paint after the websocket message is not included.

Small outputs (``KAIWA_MAX_OUTPUT_TOKENS=64``, no repairs): the first character comes within the
first tokens, because the streamed field is written first; what follows does not change the figure.
"""
from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from unittest import mock

from core.paths import ROOT

APP = str(ROOT / "app.py")
QUESTIONS = ("秘密保持契約の有効期間で揉めました。", "業務委託契約の損害賠償の上限がありませんでした。",
             "再委託の禁止条項について相談です。", "検収の期限が書かれていませんでした。", "解除条項が一方的でした。")


def run(quick: bool = False) -> dict:
    from streamlit.testing.v1 import AppTest

    from core.llm.llamacpp import LlamaServer, ServerConfig

    turns = 2 if quick else len(QUESTIONS)
    tmp = tempfile.TemporaryDirectory(prefix="kaiwa_bench_stream_")
    server = LlamaServer(ServerConfig(n_ctx=2048, threads=int(os.environ.get("KAIWA_BENCH_LLAMA_THREADS") or 1)))
    environment = mock.patch.dict(os.environ)  # the whole environment is restored after
    try:
        environment.start()
        server.start()
        os.environ.update({"KAIWA_DB_URL": f"sqlite:///{Path(tmp.name) / 'bench.db'}", "OPENAI_BASE_URL": server.base_url,
                           "OPENAI_MODEL": server.model, "KAIWA_PROVIDER": "openai", "KAIWA_MAX_OUTPUT_TOKENS": "64",
                           "KAIWA_MAX_REPAIRS": "0", "KAIWA_STRATEGIES": "structured_output", "KAIWA_TIMEOUT": "600",
                           "KAIWA_TURN_DEADLINE": "1800"})
        os.environ.pop("OPENAI_API_KEY", None)
        at = AppTest.from_file(APP, default_timeout=1800)
        at.run()
        for question in QUESTIONS[:turns]:
            at.chat_input(key="knowledge_input").set_value(question).run()
            if at.exception:
                raise RuntimeError(f"knowledge page raised: {at.exception}")
        stats = [s for s in at.session_state["stream_stats"] if "token_to_page_ms" in s and s.get("server_ttft_ms")]
    finally:
        server.stop()
        environment.stop()
        tmp.cleanup()
    if not stats:
        raise RuntimeError("no streamed call reached the page")
    ratios = [s["token_to_page_ms"] / s["server_ttft_ms"] for s in stats]
    own = [s["text_chunk_to_page_ms"] for s in stats if "text_chunk_to_page_ms" in s]
    own_ratios = [s["text_chunk_to_page_ms"] / s["server_ttft_ms"] for s in stats if "text_chunk_to_page_ms" in s]
    return {"stream_first_char_vs_server_ttft": round(statistics.median(ratios), 4),
            "stream_own_vs_server_ttft": round(statistics.median(own_ratios), 5) if own_ratios else None,
            "stream_token_to_page_ms_p50": round(statistics.median(s["token_to_page_ms"] for s in stats), 2),
            "stream_text_chunk_to_page_ms_p50": round(statistics.median(own), 2) if own else None,
            "stream_server_ttft_ms_p50": round(statistics.median(s["server_ttft_ms"] for s in stats), 1),
            "stream_turns": len(stats)}


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=True), ensure_ascii=False, indent=1))
