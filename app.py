"""Kaiwa Console entry point: session state, identity and provider sidebar, and page navigation; a
database outage is a notice above the page, never a traceback (``ui.outage``)."""
import streamlit as st

from ui import outage
from ui.identity import render_identity_sidebar
from ui.session import init_session
from ui.sidebar import render_debug_controls, render_sidebar

st.set_page_config(page_title="Kaiwa Console", page_icon="💬", layout="wide")
init_session()

pages = {
    "会話フロー": [
        st.Page("pages/knowledge.py", title="契約ナレッジ作成", icon="📝", default=True),
        st.Page("pages/diagnosis.py", title="車両問診", icon="🚗"),
        st.Page("pages/faq.py", title="FAQ", icon="❓"),
    ],
    "ライブラリ・予約": [
        st.Page("pages/library.py", title="ナレッジライブラリ", icon="📚"),
        st.Page("pages/ask_knowledge.py", title="ナレッジに質問", icon="🔎"),
        st.Page("pages/bookings.py", title="予約管理", icon="📅"),
    ],
    "運用": [
        st.Page("pages/debug_log.py", title="デバッグログ", icon="🪵"),
        st.Page("pages/analytics.py", title="分析", icon="📊"),
        st.Page("pages/review.py", title="レビュー", icon="🧐"),
        st.Page("pages/manual_admin.py", title="マニュアル管理", icon="🛠️"),
    ],
}
navigation = st.navigation(pages)
render_identity_sidebar()
render_sidebar()
outage.notice()
with outage.page_guard():
    navigation.run()
render_debug_controls()
