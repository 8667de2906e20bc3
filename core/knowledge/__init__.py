"""The contract-knowledge interview (seeds 001 and 003) and the knowledge base at work (retrieval,
house style, asking the library).

Importing the package registers the offline policy of ``knowledge_answer`` (the interview's own
``knowledge_llm_turn`` policy is registered by ``core.llm.offline``).
"""
from core.llm.offline import register_policy

register_policy("knowledge_answer", "core.knowledge.ask:offline_answer")
