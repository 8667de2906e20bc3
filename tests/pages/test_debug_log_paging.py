"""デバッグログ (AppTest) over many records: one page of an indexed query with a total and a pager, every
filter answered by the store, nothing kept per session, the JSONL built on click."""
from __future__ import annotations

import json

from sqlalchemy import event
from streamlit.testing.v1 import AppTest

from core.store import get_store
from tests.pages.conftest import APP


def seed(n: int) -> list[int]:
    """``n`` records, oldest first: every 4th failed (schema_error), two models, two conversations, one day each
    ten records (from 2025-06-01, 03:00 UTC = 12:00 JST)."""
    store = get_store()
    ids = []
    for i in range(n):
        failed = i % 4 == 0
        ids.append(store.add_debug_record({
            "time": f"2025-06-{1 + i // 10:02d}T03:00:00.{i % 1000:03d}+00:00", "session_id": f"conv-{i % 2}-x",
            "flow": "faq", "step": "answer", "prompt": "faq_answer_system", "task": "faq_answer",
            "provider": "offline", "model": "m-a" if i % 3 else "m-b", "strategy": "structured_output", "attempt": 1,
            "kind": "call", "outcome": "schema_error" if failed else "ok",
            "errors": [f"必須項目 {i} がありません"] if failed else [], "raw_output": f'{{"n": {i}}}',
            "messages": [{"role": "user", "content": f"質問 {i}"}]}, None))
    return ids


def debug_log() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/debug_log.py").run()
    assert not at.exception, at.exception
    return at


def listed(at: AppTest) -> list[int]:
    return list(at.dataframe[0].value["ID"])


def test_the_list_is_one_page_of_the_store_with_a_total_and_every_filter(deferred):
    ids = seed(130)
    at = debug_log()
    assert listed(at) == ids[80:]  # the newest 50, shown oldest first as before
    assert any(c.value.startswith("1–50 / 130 件") for c in at.caption)
    at.number_input(key="wb_page").set_value(3).run()
    assert listed(at) == ids[:30]
    at.toggle(key="f_failed").set_value(True).run()  # a new filter starts again on page 1
    failed = [i for n, i in enumerate(ids) if n % 4 == 0]
    assert listed(at) == failed[-33:][-50:] and any(c.value.startswith("1–33 / 33 件") for c in at.caption)
    at.multiselect(key="f_model").set_value(["m-b"]).run()
    assert listed(at) == [i for n, i in enumerate(ids) if n % 4 == 0 and n % 3 == 0]
    at.toggle(key="f_failed").set_value(False).run()
    at.multiselect(key="f_model").set_value([]).run()
    at.text_input(key="f_text").set_value("必須項目 12 が").run()  # searched in the validation errors
    assert listed(at) == [ids[12]]
    at.text_input(key="f_text").set_value('"n": 7').run()  # and in the raw output
    assert set(listed(at)) == {ids[7], ids[70], ids[71], ids[72], ids[73], ids[74], ids[75], ids[76], ids[77],
                               ids[78], ids[79]}
    at.text_input(key="f_text").set_value("").run()
    at.text_input(key="f_conversation").set_value("conv-1").run()  # part of an id
    assert listed(at) == [i for n, i in enumerate(ids) if n % 2][-50:]
    at.text_input(key="f_conversation").set_value("").run()
    from datetime import date
    at.date_input(key="f_date_from").set_value(date(2025, 6, 3)).run()
    at.date_input(key="f_date_to").set_value(date(2025, 6, 4)).run()
    assert listed(at) == ids[20:40]  # Japan days: 10 records a day
    lines = deferred["debug_logs.jsonl"]().strip().splitlines()  # the download, built only now
    assert [json.loads(line)["id"] for line in lines] == ids[20:40]


def test_nothing_is_kept_per_session_and_a_second_browser_reads_only_the_stamps():
    seed(60)
    first = debug_log()
    kept = {k: v for k, v in first.session_state.to_dict().items() if k not in ("debug_logs", "llm_client",
                                                                               "provider_registry")}
    assert "wb_records_cache" not in kept and "messages" not in repr(kept)  # no parsed records in the session
    assert len(repr(kept)) < 20_000
    statements: list[str] = []
    event.listen(get_store().engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]) if args[2] != "BEGIN" else None)
    second = debug_log()
    assert listed(second) == listed(first)
    reads = [s for s in statements if "debug_records" in s and "stamp" not in s]
    # the second browser reads only the newest id (is there any record?) and the record it opens for replay
    assert all("LIMIT" in s or " IN (" in s for s in reads) and len(reads) <= 3, reads
