"""The store's tables, declared once (SQLAlchemy Core). Migrations in ``migrations/`` create them.

Every row that a person causes carries who did it (``*_by`` = ``Identity.user_id``, ``*_by_label``
for display) and when (UTC ISO-8601 text, which sorts and compares the same on SQLite and
PostgreSQL). JSON payloads are stored as text (``JSONText``) so both engines hold them alike.
"""
from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text, text

metadata = MetaData()

conversations = Table(
    "conversations", metadata,
    Column("id", String(40), primary_key=True),
    Column("flow", String(16), nullable=False),            # knowledge / diagnosis / faq
    Column("title", Text, nullable=False, default=""),
    Column("status", String(16), nullable=False, default="active"),  # active / done / expired
    Column("owner", String(200), nullable=False, default=""),
    Column("owner_label", String(200), nullable=False, default=""),
    Column("created_at", String(32), nullable=False),
    Column("updated_at", String(32), nullable=False),
    Column("state", Text, nullable=True),                  # the flow's resumable state (JSON)
    Column("state_version", Integer, nullable=False, default=0),  # bumped on every state write
    # the turn lease: one turn of a conversation runs at a time, across processes (Store.turn)
    Column("turn_token", String(40), nullable=True),       # who holds it (a random token), NULL when free
    Column("turn_until", String(32), nullable=True),       # when it lapses if never released (a crashed process)
)
Index("ix_conversations_flow_updated", conversations.c.flow, conversations.c.updated_at)
Index("ix_conversations_created", conversations.c.created_at)  # 分析 reads one period's conversations

turns = Table(
    "turns", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(40), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),                # 1, 2, … within the conversation
    Column("entry_id", String(40), nullable=False),        # the chat entry's own id (stable across edits)
    Column("superseded", Boolean, nullable=False, default=False),  # cut by a rewind / replaced by a resend
    Column("role", String(16), nullable=False),            # user / assistant
    Column("created_at", String(32), nullable=False),
    Column("user_input", Text, nullable=True),
    Column("attachments", Text, nullable=True),            # JSON: [{name, size, pages, sha256}]
    Column("turn_json", Text, nullable=True),              # the validated turn, whole
    Column("step", String(40), nullable=True),             # diagnosis step / knowledge phase / FAQ outcome
    Column("provider", String(40), nullable=True),
    Column("model", String(200), nullable=True),
    Column("method", String(40), nullable=True),
    Column("attempts", Integer, nullable=True),
    Column("latency_ms", Float, nullable=True),
    Column("ok", Boolean, nullable=False, default=True),
    Column("error_type", String(60), nullable=True),
    Column("raw_output", Text, nullable=True),
    Column("entry", Text, nullable=False),                 # the page's chat entry (JSON) for exact resume
    Column("author", String(200), nullable=False, default=""),
    # Read from turn_json / the entry once, when the turn is written (base.derived_turn_columns), so 分析
    # groups by columns instead of parsing JSON: the knowledge turn's control.mode, and how many sources
    # the answer cites (FAQ citations, diagnosis rag_sources, else the chat entry's sources).
    Column("mode", String(20), nullable=True),
    Column("citations", Integer, nullable=True),
)
Index("ux_turns_conversation_seq", turns.c.conversation_id, turns.c.seq, unique=True)

knowledge_entries = Table(
    "knowledge_entries", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(40), ForeignKey("conversations.id", ondelete="SET NULL"), nullable=True),
    Column("slot", Integer, nullable=False, default=0),   # position in the turn's knowledge list
    Column("status", String(16), nullable=False, default="draft"),  # draft / confirmed / archived
    Column("knowledge_title", Text, nullable=False, default=""),
    Column("contract_type", Text, nullable=False, default=""),
    Column("target_clause", Text, nullable=False, default=""),
    Column("review_points", Text, nullable=False, default=""),
    Column("action_plan", Text, nullable=False, default=""),
    Column("clause_sample", Text, nullable=False, default=""),
    Column("version", Integer, nullable=False, default=1),
    Column("created_by", String(200), nullable=False, default=""),
    Column("created_by_label", String(200), nullable=False, default=""),
    Column("created_at", String(32), nullable=False),
    Column("updated_by", String(200), nullable=False, default=""),
    Column("updated_by_label", String(200), nullable=False, default=""),
    Column("updated_at", String(32), nullable=False),
    Column("confirmed_by", String(200), nullable=True),
    Column("confirmed_at", String(32), nullable=True),
    Column("confirmed_by_label", String(200), nullable=True),   # who confirmed it, by name (for people)
)
Index("ix_entries_status", knowledge_entries.c.status, knowledge_entries.c.updated_at)
Index("ix_entries_updated", knowledge_entries.c.updated_at, knowledge_entries.c.id)  # the library's order
Index("ix_entries_contract_type", knowledge_entries.c.contract_type, knowledge_entries.c.updated_at)
Index("ix_entries_conversation", knowledge_entries.c.conversation_id, knowledge_entries.c.slot)

# The library's full-text index, one row per entry, written with the entry (core.store.search): character
# bigrams of the six fields (core.text.ngrams). SQLite: an FTS5 table (rowid = entry id, column
# ``document``: the tokens); PostgreSQL: this table with ``document`` a tsvector under a GIN index. The
# migration creates it per engine; it is declared here so every table has one declaration.
knowledge_search = Table(
    "knowledge_search", metadata,
    Column("entry_id", Integer, primary_key=True),
    Column("document", Text, nullable=False),
)

entry_history = Table(
    "entry_history", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("entry_id", Integer, ForeignKey("knowledge_entries.id", ondelete="CASCADE"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("action", String(20), nullable=False),          # drafted / model_update / edit / confirm / archive / restore
    Column("data", Text, nullable=False),                  # JSON of the six fields after the change
    Column("status", String(16), nullable=False),
    Column("changed_by", String(200), nullable=False, default=""),
    Column("changed_by_label", String(200), nullable=False, default=""),
    Column("changed_at", String(32), nullable=False),
)
Index("ix_entry_history_entry", entry_history.c.entry_id, entry_history.c.version)
Index("uq_entry_history_entry_version", entry_history.c.entry_id, entry_history.c.version, unique=True)  # 0006

bookings = Table(
    "bookings", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("number", String(32), nullable=False, unique=True),
    Column("conversation_id", String(40), ForeignKey("conversations.id", ondelete="SET NULL"), nullable=True),
    Column("vehicle_id", String(80), nullable=True),
    Column("vehicle_label", Text, nullable=False, default=""),
    Column("urgency", String(16), nullable=True),
    Column("can_drive", Boolean, nullable=True),
    Column("booking_type", String(16), nullable=False),    # visit / dispatch
    Column("contact", Text, nullable=False),               # JSON of the form fields
    Column("symptom", Text, nullable=False, default=""),
    Column("status", String(16), nullable=False, default="requested"),  # requested / confirmed / cancelled
    Column("created_by", String(200), nullable=False, default=""),
    Column("created_by_label", String(200), nullable=False, default=""),
    Column("created_at", String(32), nullable=False),
    Column("updated_by", String(200), nullable=False, default=""),
    Column("updated_at", String(32), nullable=False),
    Column("updated_by_label", String(200), nullable=False, default="", server_default=""),
    Column("form_key", String(64), nullable=True),         # sha256 of (conversation, type, form); NULL without a conversation
)
Index("ix_bookings_status", bookings.c.status, bookings.c.created_at)
# one live (not cancelled) booking per conversation and form, however many confirmations arrive at once
LIVE_FORM = text("status <> 'cancelled'")
Index("ux_bookings_live_form", bookings.c.form_key, unique=True, sqlite_where=LIVE_FORM, postgresql_where=LIVE_FORM)
Index("ix_bookings_created", bookings.c.created_at)
Index("ix_bookings_urgency", bookings.c.urgency, bookings.c.created_at)
Index("ix_bookings_conversation", bookings.c.conversation_id)

debug_records = Table(
    "debug_records", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(80), nullable=True),  # may name a conversation not (yet) stored
    Column("created_at", String(32), nullable=False),
    Column("owner", String(200), nullable=False, default=""),
    Column("flow", String(16), nullable=True),
    Column("step", String(60), nullable=True),
    Column("provider", String(40), nullable=True),
    Column("model", String(200), nullable=True),
    Column("strategy", String(40), nullable=True),
    Column("outcome", String(80), nullable=True),
    Column("record", Text, nullable=False),                # the masked record (JSON)
    # Read from the record once, when it is stored (core.debuglog.record_columns): what デバッグログ filters
    # on and 分析 groups by, so neither parses the JSON.
    Column("task", String(100), nullable=True),
    Column("method", String(40), nullable=True),
    Column("error_type", String(80), nullable=True),
    Column("prompt_version", String(64), nullable=True),
    Column("kind", String(20), nullable=True),
    Column("attempt", Integer, nullable=True),
    Column("latency_ms", Float, nullable=True),
)
Index("ix_debug_records_conv", debug_records.c.conversation_id, debug_records.c.id)
Index("ix_debug_records_time", debug_records.c.created_at)
# One index per filter of the debug log (each with id, so "newest first" reads the index in order).
DEBUG_FILTER_COLUMNS = ("flow", "step", "task", "provider", "model", "method", "outcome", "error_type")
for _name in DEBUG_FILTER_COLUMNS:
    Index(f"ix_debug_records_{_name}", debug_records.c[_name], debug_records.c.id)

audit_log = Table(
    "audit_log", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", String(32), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("actor_label", String(200), nullable=False, default=""),
    Column("actor_roles", String(100), nullable=False, default=""),   # comma separated, as held at the time
    Column("verified", Boolean, nullable=False, default=False),
    Column("action", String(60), nullable=False),          # e.g. entry.confirm, booking.cancel, debug.clear
    Column("target_type", String(40), nullable=False),
    Column("target_id", String(80), nullable=False),
    Column("detail", Text, nullable=True),
)
Index("ix_audit_target", audit_log.c.target_type, audit_log.c.target_id)

prompt_versions = Table(
    "prompt_versions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False),           # the prompt file's name (prompts/<name>.md)
    Column("version", String(64), nullable=False),         # core.prompts.prompt_version of the content
    Column("content", Text, nullable=False),
    Column("previous_version", String(64), nullable=True),  # the version it replaced
    Column("note", Text, nullable=False, default=""),
    Column("created_by", String(200), nullable=False, default=""),
    Column("created_by_label", String(200), nullable=False, default=""),
    Column("created_at", String(32), nullable=False),
)
Index("ix_prompt_versions_name", prompt_versions.c.name, prompt_versions.c.id)

admin_attempts = Table(
    "admin_attempts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", String(32), nullable=False),
    Column("key", String(200), nullable=False),            # session:… / ip:… / user:… (one row per key per attempt)
    Column("ok", Boolean, nullable=False),
)
Index("ix_admin_attempts_key", admin_attempts.c.key, admin_attempts.c.at)

heartbeat = Table(
    "heartbeat", metadata,
    Column("id", Integer, primary_key=True),               # one row (id 1), rewritten by every health check
    Column("at", String(32), nullable=False),
)

integrity_write_probe = Table(  # 0006: rows added and removed by the health check after a failed write
    "integrity_write_probe", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("payload", Text, nullable=False),
)

# Change stamps: a number per table that grows with every insert, update or delete of its rows, so a page
# can cache what it read until the data changes (``Store.change_stamp``). SQLite: this table, bumped by
# triggers; PostgreSQL: one sequence per table (``stamp_<table>``), bumped by deferred constraint
# triggers at commit (no row lock, so writers never wait on each other for it).
store_stamps = Table(
    "store_stamps", metadata,
    Column("name", String(40), primary_key=True),
    Column("value", Integer, nullable=False, default=0),
)
STAMPED_TABLES = ("conversations", "turns", "knowledge_entries", "entry_history", "bookings", "debug_records")

# 分析's rollups (core.store.rollups): what the figures need, kept per conversation and per Japan day, so a
# write costs the next visitor the conversations and days it touched instead of the whole period.
# ``rollup_dirty`` is an append-only log of what changed (written by triggers with every write), read and
# emptied by ``Store.refresh_rollups``; no unique key, so writers never wait on each other for it.
rollup_dirty = Table(
    "rollup_dirty", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(80), nullable=True),  # a conversation whose figures may have changed
    Column("day", String(10), nullable=True),              # a Japan day (YYYY-MM-DD) whose model calls changed
    Column("record_id", Integer, nullable=True),  # with a day: the debug record inserted (its calls are added), 0010
)
# A backlog of marks (writes no refresh has taken yet: after an upgrade, or days of API traffic while nobody
# opened 分析) is not scanned once per batch or per record (0012): a refresh takes a batch's marks by these
# indexes, and a day's records still marked are left out of its recount by one lookup each.
Index("ix_rollup_dirty_conversation", rollup_dirty.c.conversation_id,
      sqlite_where=rollup_dirty.c.conversation_id.isnot(None),
      postgresql_where=rollup_dirty.c.conversation_id.isnot(None))
Index("ix_rollup_dirty_day", rollup_dirty.c.day, sqlite_where=rollup_dirty.c.day.isnot(None),
      postgresql_where=rollup_dirty.c.day.isnot(None))
Index("ix_rollup_dirty_record", rollup_dirty.c.record_id, sqlite_where=rollup_dirty.c.record_id.isnot(None),
      postgresql_where=rollup_dirty.c.record_id.isnot(None))
rollup_conversations = Table(  # one row per conversation: what 分析 shows of it (core.analytics.Frames.conversations)
    "rollup_conversations", metadata,
    Column("id", String(40), primary_key=True),
    Column("flow", String(16), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("started", Integer, nullable=False),
    Column("provider", String(40), nullable=False),
    Column("max_rank", Integer, nullable=True),
    Column("last_phase", String(40), nullable=True),
    Column("finalized", Integer, nullable=True),
    Column("confirmed", Integer, nullable=False),
    Column("to_draft", Integer, nullable=True),
    Column("to_finalize", Integer, nullable=True),
    Column("final_step", String(40), nullable=True),
    Column("urgency", String(16), nullable=True),
    Column("booked", Integer, nullable=False),
    Column("answers", Integer, nullable=True),
    Column("cited", Integer, nullable=True),
    Column("citing", Integer, nullable=True),
    Column("entries", Integer, nullable=False),
    Column("entries_draft", Integer, nullable=False),
    Column("entries_confirmed", Integer, nullable=False),
    Column("entries_archived", Integer, nullable=False),
    Column("entries_ever", Integer, nullable=False),        # entries of it ever confirmed
)
Index("ix_rollup_conversations_created", rollup_conversations.c.created_at)
rollup_faq = Table(  # per FAQ conversation, outcome and (for not_found) question: exchanges
    "rollup_faq", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(40), nullable=False),
    Column("outcome", String(40), nullable=False),
    Column("question", Text, nullable=True),
    Column("exchanges", Integer, nullable=False),
    Column("last_asked", String(32), nullable=True),
    Column("created_at", String(32), nullable=True),  # the conversation's (0011): a range reads this table alone
    Column("provider", String(40), nullable=True),  # the conversation's (0011)
)
Index("ix_rollup_faq_conversation", rollup_faq.c.conversation_id)
Index("ix_rollup_faq_created", rollup_faq.c.created_at)
rollup_tasks = Table(  # per Japan day, hour, task, provider, prompt version: model tasks (a first call and its repairs)
    "rollup_tasks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("day", String(10), nullable=False),
    Column("hour", String(13), nullable=False, server_default=""),  # today: UTC ``YYYY-MM-DDTHH``, else "" (0013)
    Column("task", String(120), nullable=False),
    Column("provider", String(40), nullable=False),
    Column("prompt_version", String(64), nullable=False),
    Column("tasks", Integer, nullable=False),
    Column("calls", Integer, nullable=False),
    Column("first_try_valid", Integer, nullable=False),
    Column("valid", Integer, nullable=False),
    Column("repairs", Integer, nullable=False),
    Column("error_calls", Integer, nullable=False),
)
Index("ix_rollup_tasks_day_hour", rollup_tasks.c.day, rollup_tasks.c.hour)
rollup_methods = Table(  # per Japan day, hour, task, provider and method (the last strategy of a task): tasks
    "rollup_methods", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("day", String(10), nullable=False),
    Column("hour", String(13), nullable=False, server_default=""),  # today: UTC ``YYYY-MM-DDTHH``, else "" (0013)
    Column("task", String(120), nullable=False),
    Column("provider", String(40), nullable=False),
    Column("method", String(40), nullable=False),
    Column("tasks", Integer, nullable=False),
)
Index("ix_rollup_methods_day_hour", rollup_methods.c.day, rollup_methods.c.hour)
rollup_errors = Table(  # per Japan day, hour, provider and outcome of the failed calls: calls
    "rollup_errors", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("day", String(10), nullable=False),
    Column("hour", String(13), nullable=False, server_default=""),  # today: UTC ``YYYY-MM-DDTHH``, else "" (0013)
    Column("provider", String(40), nullable=False),
    Column("error_type", String(80), nullable=True),
    Column("calls", Integer, nullable=False),
)
Index("ix_rollup_errors_day_hour", rollup_errors.c.day, rollup_errors.c.hour)
rollup_latency = Table(  # per Japan day, hour, task, provider, prompt version, latency bucket (≈2 % wide): calls
    "rollup_latency", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("day", String(10), nullable=False),
    Column("hour", String(13), nullable=False, server_default=""),  # today: UTC ``YYYY-MM-DDTHH``, else "" (0013)
    Column("task", String(120), nullable=False),
    Column("provider", String(40), nullable=False),
    Column("prompt_version", String(64), nullable=False),
    Column("bucket", Integer, nullable=False),
    Column("calls", Integer, nullable=False),
)
Index("ix_rollup_latency_day_hour", rollup_latency.c.day, rollup_latency.c.hour)
rollup_versions = Table(  # bumped by a refresh that changed the conversation rollups / the call rollups
    "rollup_versions", metadata,
    Column("name", String(40), primary_key=True),
    Column("value", Integer, nullable=False, default=0),
)

# ---- the reviewers' loop (issue #22): feedback on answers, review items, labels, stored regression cases ----
# An answer is addressed by its conversation and ``turn``: the index of its entry among the conversation's live
# chat entries (``Store.chat_entries``; ナレッジに質問 answers, which are not stored conversations, use the page's
# own ``ask-…`` id and the answer's number in it).
review_feedback = Table(
    "review_feedback", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(80), nullable=False),
    Column("turn", Integer, nullable=False),
    Column("flow", String(16), nullable=False),            # knowledge / diagnosis / faq / ask
    Column("prompt_version", String(120), nullable=False, default=""),  # "<prompt>@<version>" that produced it
    Column("model", String(200), nullable=False, default=""),
    Column("rating", String(4), nullable=False),           # up / down
    Column("comment", Text, nullable=False, default=""),
    Column("given_by", String(200), nullable=False, default=""),
    Column("given_by_label", String(200), nullable=False, default=""),
    Column("verified", Boolean, nullable=False, default=False),
    Column("created_at", String(32), nullable=False),
)
Index("ix_review_feedback_answer", review_feedback.c.conversation_id, review_feedback.c.turn)
Index("ix_review_feedback_created", review_feedback.c.created_at)

review_items = Table(
    "review_items", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(80), nullable=False),
    Column("turn", Integer, nullable=False),
    Column("flow", String(16), nullable=False),
    Column("reason", String(20), nullable=False),          # thumbs_down / failed_call / repaired_call / faq_not_found / critical / sample
    Column("status", String(12), nullable=False, default="pending"),  # pending / claimed / done / skipped
    Column("prompt_version", String(120), nullable=False, default=""),
    Column("model", String(200), nullable=False, default=""),
    Column("snapshot", Text, nullable=False, default="{}"),  # JSON: the question, the answer and its facts when queued
    Column("reviews_wanted", Integer, nullable=False, default=1),  # 2 for the double-reviewed sample
    Column("review_count", Integer, nullable=False, default=0),
    Column("claimed_by", String(200), nullable=True),
    Column("claimed_by_label", String(200), nullable=True),
    Column("claim_until", String(32), nullable=True),      # a claim lapses then (UTC ISO)
    Column("verdict", String(12), nullable=True),          # correct / partial / incorrect (the first review's)
    Column("labels", Text, nullable=False, default="[]"),  # JSON list
    Column("comment", Text, nullable=False, default=""),
    Column("corrected_answer", Text, nullable=True),       # JSON: {text, urgency, outcome, citations, fields, must_include}
    Column("reviewed_by", String(200), nullable=True),
    Column("reviewed_by_label", String(200), nullable=True),
    Column("reviewed_at", String(32), nullable=True),
    Column("scenario_id", Integer, nullable=True),         # the regression case made from it
    Column("created_at", String(32), nullable=False),
    Column("updated_at", String(32), nullable=False),
)
Index("ux_review_items_answer", review_items.c.conversation_id, review_items.c.turn, unique=True)
Index("ix_review_items_status", review_items.c.status, review_items.c.id)
Index("ix_review_items_claims", review_items.c.status, review_items.c.claim_until)  # lapsed claims, found at once
Index("ix_review_items_flow", review_items.c.flow, review_items.c.status, review_items.c.id)
Index("ix_review_items_prompt", review_items.c.prompt_version, review_items.c.id)
Index("ix_review_items_reviewer", review_items.c.reviewed_by, review_items.c.id)
Index("ix_review_items_created", review_items.c.created_at, review_items.c.id)
Index("ix_review_items_reviewed", review_items.c.reviewed_at)

review_item_labels = Table(                              # one row per label of an item's verdict: the label filter
    "review_item_labels", metadata,
    Column("item_id", Integer, ForeignKey("review_items.id", ondelete="CASCADE"), primary_key=True),
    Column("label", String(60), primary_key=True),
)
Index("ix_review_item_labels_label", review_item_labels.c.label, review_item_labels.c.item_id)

review_verdicts = Table(                                 # every review of an item (two for the double-reviewed sample)
    "review_verdicts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("review_items.id", ondelete="CASCADE"), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("reviewer_label", String(200), nullable=False, default=""),
    Column("verdict", String(12), nullable=False),
    Column("labels", Text, nullable=False, default="[]"),
    Column("comment", Text, nullable=False, default=""),
    Column("corrected_answer", Text, nullable=True),
    Column("created_at", String(32), nullable=False),
)
Index("ux_review_verdicts_item_reviewer", review_verdicts.c.item_id, review_verdicts.c.reviewer, unique=True)
Index("ix_review_verdicts_created", review_verdicts.c.created_at)

review_labels = Table(                                   # the score configuration an admin edits
    "review_labels", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(60), nullable=False, unique=True),
    Column("description", Text, nullable=False, default=""),
    Column("position", Integer, nullable=False, default=0),
    Column("active", Boolean, nullable=False, default=True),
    Column("updated_by", String(200), nullable=False, default=""),
    Column("updated_by_label", String(200), nullable=False, default=""),
    Column("updated_at", String(32), nullable=False),
)

review_scenarios = Table(                                # regression cases made from reviewed items (core.eval scenarios)
    "review_scenarios", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("review_items.id", ondelete="SET NULL"), nullable=True),
    Column("flow", String(16), nullable=False),
    Column("name", Text, nullable=False),
    Column("scenario", Text, nullable=False),              # JSON of the scenario (name, flow, vehicle?, turns, expect)
    Column("active", Boolean, nullable=False, default=True),
    Column("created_by", String(200), nullable=False, default=""),
    Column("created_by_label", String(200), nullable=False, default=""),
    Column("created_at", String(32), nullable=False),
)
Index("ix_review_scenarios_item", review_scenarios.c.item_id)
