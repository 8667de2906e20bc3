"""Streamlit pages: layout and widgets only; every flow lives in ``core``."""
