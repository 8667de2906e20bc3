"""Two browsers on two knowledge conversations at once: each keeps its own conversation id, and no
page ever shows the other conversation's words (chat, draft panel, sidebar), before or after a reload.
The shared 「最近の会話」 list is left out on purpose: it lists every operator's conversation titles."""
from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.helpers import RERUN, messages, open_app, send, session_id, wait_for_session

SECRETS = {"a": ("ヒバリ商事", "AKANE-7731"), "b": ("カワセミ物産", "SORA-4410")}
# The page's text (hidden parts included) without the shared recent-conversations list.
PAGE_TEXT = """() => {
  const body = document.body.cloneNode(true);
  for (const e of body.querySelectorAll('[data-testid="stExpander"]')) {
    const summary = e.querySelector('summary');
    if (summary && summary.textContent.includes('最近の会話')) e.remove();
  }
  return body.textContent;
}"""


def case(words: tuple[str, str]) -> str:
    company, code = words
    return f"{company}との業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。案件番号 {code}。"


def policy(words: tuple[str, str]) -> str:
    company, code = words
    return f"{company}には委託料総額を上限とするよう修正を求めるべきです（{code}）。「賠償額は委託料総額を上限とする。」"


def assert_sees_only(page: Page, own: str) -> None:
    text = page.evaluate(PAGE_TEXT)
    for name, words in SECRETS.items():
        for word in words:
            if name == own:
                assert word in text, f"browser {own} lost its own word {word}"
            else:
                assert word not in text, f"browser {own} shows {word} from browser {name}"


def test_two_browsers_on_two_conversations_never_see_each_other(new_browser, server, server_store):
    pages = {"a": new_browser(), "b": new_browser()}
    for page in pages.values():
        open_app(page, server.url)
    sids = {name: wait_for_session(page) for name, page in pages.items()}
    assert sids["a"] != sids["b"]

    for turn, make in enumerate((case, policy), start=1):  # interleaved: a, b, a, b
        for name, page in pages.items():
            send(page, make(SECRETS[name]))
            expect(messages(page)).to_have_count(2 * turn, timeout=RERUN)
            expect(messages(page).nth(2 * turn - 2)).to_contain_text(SECRETS[name][1])
        for name, page in pages.items():
            assert_sees_only(page, name)

    for name, page in pages.items():
        expect(page.get_by_role("button", name="このナレッジを確定する")).to_be_visible(timeout=RERUN)
        page.reload()
        expect(messages(page)).to_have_count(4, timeout=RERUN)
        assert session_id(page) == sids[name]
        assert_sees_only(page, name)

    for name, sid in sids.items():
        stored = " ".join(e.get("content") or "" for e in server_store.chat_entries(sid))
        other = SECRETS["b" if name == "a" else "a"]
        assert SECRETS[name][1] in stored and not any(word in stored for word in other)
