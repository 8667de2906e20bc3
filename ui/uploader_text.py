"""Japanese texts on Streamlit's file uploader, whose built-in texts (the 「Upload」 button, 「25MB per
file • PDF」) Streamlit cannot localise (streamlit/streamlit#13500, open): our own static CSS hides them
and shows the Japanese text in their place. The CSS is a constant of ours, never user or model text."""
from __future__ import annotations

import streamlit as st

BUTTON_TEXT = "ファイルを選択"


def limit_text(max_mb: int, types: str = "") -> str:
    """「1 ファイル 25MB まで・PDF」: the uploader's hint in Japanese."""
    return f"1 ファイル {max_mb}MB まで" + (f"・{types}" if types else "")


def uploader_css(max_mb: int, types: str = "") -> str:
    hint = limit_text(max_mb, types).replace('"', "")
    return (
        "<style>"
        '[data-testid="stFileUploaderDropzoneInstructions"] > div > * {font-size: 0 !important;}'
        '[data-testid="stFileUploaderDropzoneInstructions"] > div > *::after '
        f'{{content: "{hint}"; font-size: 0.875rem;}}'
        '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p {font-size: 0 !important;}'
        '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p::after '
        f'{{content: "{BUTTON_TEXT}"; font-size: 0.875rem;}}'
        "</style>")


def japanese_uploader(types: str = "") -> None:
    """Show the file uploaders of this page with Japanese texts (call once per page, before them)."""
    max_mb = int(st.get_option("server.maxUploadSize") or 200)
    st.html(uploader_css(max_mb, types))
