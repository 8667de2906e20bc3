"""Scenario runner shared by the conversation flows: YAML scenarios in, pass/fail and exit code out.

``python -m core.eval FILE_OR_DIR... [--provider offline|openai] [--json]``; see :mod:`core.eval.runner`.
"""
