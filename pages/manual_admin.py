"""Placeholder page (being built)."""
import streamlit as st

st.info("準備中です。")
