"""FAQ use case UC-01 (spec 05): KB search → answer with citations, as a graph of contract-checked nodes.

Importing the package registers the offline policies of its three model tasks.
"""
from core.llm.offline import register_policy

register_policy("faq_intent", "core.faq.offline_policy:classify_intent")
register_policy("faq_plan", "core.faq.offline_policy:plan_tool")
register_policy("faq_answer", "core.faq.offline_policy:answer")
