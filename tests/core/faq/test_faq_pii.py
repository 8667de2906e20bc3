"""PII never reaches a model, the trace or a debug record; the user's own view keeps their words."""
import json

from core.faq.flow import ask, start_session
from core.text.pii import find_pii

RAW = "電話は090-1234-5678、メールは taro.yamada@example.com です。カード 4111 1111 1111 1111 でオイル交換の支払いはできますか"


def test_pii_is_masked_everywhere_but_in_the_users_view(fake_kb, client, config):
    log = []
    result = ask(start_session("s"), RAW, client=client, kb=fake_kb, config=config, log=log)
    assert result.user_text == RAW  # what the page shows the user
    assert result.outcome == "answered"
    dumps = {
        "model requests": json.dumps([{"messages": r.messages, "context": r.context} for r in client.requests],
                                     ensure_ascii=False),
        "trace": json.dumps(list(result.trace), ensure_ascii=False),
        "debug log": json.dumps(log, ensure_ascii=False),
        "state": json.dumps(result.state.to_dict(), ensure_ascii=False),
        "kb queries": json.dumps(fake_kb.retriever.queries, ensure_ascii=False),
    }
    assert len(client.requests) == 3 and len(log) == 3
    for where, text in dumps.items():
        assert find_pii(text) == [], where
        for secret in ("090-1234-5678", "taro.yamada@example.com", "4111 1111 1111 1111"):
            assert secret not in text, where
    user_message = result.state["messages"][0]["content"]
    assert "[電話番号]" in user_message and "[メール]" in user_message and "[カード番号]" in user_message
    assert next(e for e in result.trace if e["node"] == "API")["pii_masked"] is True


def test_my_number_and_address_are_masked_before_the_model(fake_kb, client, config):
    text = "東京都千代田区丸の内1-2-3に住んでいます。マイナンバーは 1234 5678 9012 です。タイヤの空気圧は？"
    result = ask(start_session("s"), text, client=client, kb=fake_kb, config=config)
    sent = json.dumps([r.messages for r in client.requests], ensure_ascii=False)
    assert "丸の内1-2-3" not in sent and "1234 5678 9012" not in sent
    assert "[住所]" in sent and "[マイナンバー]" in sent
    assert result.outcome == "answered" and result.citations == ["kb:201"]


def test_a_generated_session_id_that_looks_like_a_phone_number_is_kept(fake_kb, client, config):
    # A generated hex id can hold a digit run such as 09012345678: it names the session, it is not a phone.
    log = []
    result = ask(start_session("a09012345678"), RAW, client=client, kb=fake_kb, config=config, log=log)
    assert {e["session_id"] for e in result.trace} == {"a09012345678"}
    assert {r["session_id"] for r in log} == {"a09012345678"}
    assert "090-1234-5678" not in json.dumps([list(result.trace), log], ensure_ascii=False)
