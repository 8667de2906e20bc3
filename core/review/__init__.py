"""The reviewers' loop (issue #22): feedback on every answer, the review queue, corrected answers that become
regression cases, and quality by prompt version. The data lives in the store (``core.store.review``); here:

``answers`` (one answer of a stored conversation: question, answer, sources, facts, model, prompt version,
debug records), ``intake`` (feedback, and why an answer enters the queue), ``regression`` (a reviewed answer as
a ``core.eval`` scenario), ``replay`` (the reviewed set against a prompt version, an unsaved prompt draft or a model), ``quality`` (👍 rate,
verdicts, labels, reviewer agreement for 分析), ``export`` (JSONL / CSV of the reviewed answers). No Streamlit.
"""
