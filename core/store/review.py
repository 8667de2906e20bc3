"""The reviewers' loop in the store (issue #22): feedback on answers, the review queue, claims, verdicts,
the score configuration (labels an admin edits) and the regression cases made from reviews.

* **Feedback** (``review_feedback``): 👍/👎 and an optional comment on one answer, with the flow, the prompt
  version and model that produced it and who gave it (from the verified identity; a typed name is kept as
  unverified).
* **Review items** (``review_items``): one per answer, whatever number of reasons put it in the queue (the
  strongest reason is kept, :data:`REASONS` in order). A reviewer **claims** an item with one conditional
  ``UPDATE`` (free, or its claim lapsed, or already theirs), so two reviewers never hold the same item, on
  SQLite and PostgreSQL, across processes; a claim lapses after ``KAIWA_REVIEW_CLAIM_MINUTES`` (30). A
  verdict is recorded under the same condition, in the same transaction as its ``review_verdicts`` row, its
  labels and its audit row. An item of the double-reviewed sample (``reviews_wanted`` 2) goes back to the
  queue after its first verdict, for a *different* reviewer.
* **Labels** (``review_labels``): the score configuration; only ``review.config`` (admins) changes it.
* **Regression cases** (``review_scenarios``): ``core.eval`` scenarios made from reviewed items.

Every change that a person makes leaves an audit row (``feedback.give``, ``review.claim``, ``review.verdict``,
``review.skip``, ``review.release``, ``review.labels``, ``review.scenario``). The queue is read a page at a
time (:class:`ReviewQuery`, :meth:`ReviewStore.review_page`, :meth:`ReviewStore.count_review_items`): every
filter is a ``WHERE`` on an indexed column, the label filter an ``IN`` over ``review_item_labels``' label index.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import and_, delete, exists, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from core.store import tables as t
from core.store.base import distinct_values, dumps, loads, require, who

RATINGS = ("up", "down")
VERDICTS = ("correct", "partial", "incorrect")
VERDICT_JA = {"correct": "正しい", "partial": "一部誤り", "incorrect": "誤り"}
STATUSES = ("pending", "claimed", "done", "skipped")
STATUS_JA = {"pending": "未着手", "claimed": "作業中", "done": "レビュー済み", "skipped": "スキップ"}
# Why an answer is in the queue, strongest first: a second reason replaces a weaker one of a pending item.
REASONS = ("thumbs_down", "failed_call", "critical", "repaired_call", "faq_not_found", "sample")
REASON_JA = {"thumbs_down": "👎 評価", "failed_call": "モデル呼び出しの失敗", "critical": "緊急度 critical",
             "repaired_call": "修復した呼び出し", "faq_not_found": "FAQ 該当なし", "sample": "無作為抽出"}
REVIEW_FLOWS = ("diagnosis", "faq", "knowledge", "ask")
MAX_COMMENT_CHARS = 2000
MAX_LABELS = 20
MAX_LABEL_CHARS = 60
CLAIM_MINUTES_ENV = "KAIWA_REVIEW_CLAIM_MINUTES"
DEFAULT_CLAIM_MINUTES = 30.0


class ReviewInputError(ValueError):
    """A verdict, label, rating or comment that is not allowed (Japanese message; the API's 422)."""


class ReviewConflict(RuntimeError):
    """The item is held by another reviewer, or already reviewed or skipped (Japanese message; the API's 409)."""


def claim_minutes(environ: Mapping[str, str] | None = None) -> float:
    """How long a claim holds (``KAIWA_REVIEW_CLAIM_MINUTES``, 1–1440, default 30)."""
    raw = (os.environ if environ is None else environ).get(CLAIM_MINUTES_ENV, "")
    try:
        return min(1440.0, max(1.0, float(raw))) if str(raw).strip() else DEFAULT_CLAIM_MINUTES
    except ValueError:
        return DEFAULT_CLAIM_MINUTES


@dataclass(frozen=True)
class ReviewQuery:
    """The queue's filters; an empty one matches every item. ``statuses`` are effective statuses (a lapsed
    claim is ``pending``); ``since`` / ``until`` bound ``created_at`` (UTC ISO, ``until`` exclusive);
    ``reviewers`` are ``reviewed_by`` user ids."""

    flows: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    prompt_versions: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None


def _item(row: Any, now: str | None = None) -> dict[str, Any]:
    data = row._asdict() if hasattr(row, "_asdict") else dict(row)
    for key, default in (("snapshot", {}), ("labels", []), ("corrected_answer", None)):
        if key in data:
            data[key] = loads(data[key], default) if isinstance(data[key], str) else data[key]
    if now is not None and data.get("status") == "claimed" and str(data.get("claim_until") or "") < now:
        data["status"] = "pending"  # the claim lapsed
    return data


class ReviewStore:
    """The review part of :class:`~core.store.store.Store`."""

    def _later(self, minutes: float) -> str:
        return (datetime.fromisoformat(self.now()) + timedelta(minutes=minutes)).isoformat(timespec="milliseconds")

    # ---- feedback ------------------------------------------------------------------------------------
    def add_feedback(self, conversation_id: str, turn: int, flow: str, rating: str, actor: Any, *,
                     comment: str = "", prompt_version: str = "", model: str = "") -> int:
        """Store one 👍/👎 on the answer ``turn`` of ``conversation_id``; returns its id (audited)."""
        if rating not in RATINGS:
            raise ReviewInputError("評価は up（👍）か down（👎）で指定してください。")
        if flow not in REVIEW_FLOWS:
            raise ReviewInputError(f"フロー {flow!r} の回答には評価を付けられません。")
        user_id, label, _, verified = who(actor)
        with self._write() as conn:
            feedback_id = conn.execute(insert(t.review_feedback).values(
                conversation_id=str(conversation_id)[:80], turn=int(turn), flow=flow,
                prompt_version=str(prompt_version or "")[:120], model=str(model or "")[:200], rating=rating,
                comment=str(comment or "")[:MAX_COMMENT_CHARS], given_by=user_id, given_by_label=label,
                verified=verified, created_at=self.now())).inserted_primary_key[0]
            self._audit(conn, actor, "feedback.give", "answer", f"{conversation_id}#{turn}",
                        {"rating": rating, "feedback_id": feedback_id})
        return int(feedback_id)

    def set_feedback_comment(self, feedback_id: int, comment: str, actor: Any) -> bool:
        """Add or change the comment of one's own feedback (False when it is not the actor's)."""
        user_id = who(actor)[0]
        with self._write() as conn:
            changed = conn.execute(update(t.review_feedback).where(
                t.review_feedback.c.id == int(feedback_id), t.review_feedback.c.given_by == user_id)
                .values(comment=str(comment or "")[:MAX_COMMENT_CHARS])).rowcount
            if changed:
                self._audit(conn, actor, "feedback.comment", "feedback", feedback_id)
        return bool(changed)

    def list_feedback(self, conversation_id: str | None = None, *, limit: int = 1000) -> list[dict[str, Any]]:
        c = t.review_feedback.c
        query = select(t.review_feedback).order_by(c.id).limit(limit)
        if conversation_id:
            query = query.where(c.conversation_id == conversation_id)
        with self._read() as conn:
            return [row._asdict() for row in conn.execute(query)]

    # ---- the queue -----------------------------------------------------------------------------------
    def enqueue_review(self, conversation_id: str, turn: int, flow: str, reason: str, *,
                       snapshot: Mapping[str, Any] | None = None, prompt_version: str = "", model: str = "",
                       reviews_wanted: int = 1) -> tuple[int, bool]:
        """Put the answer in the queue for ``reason``: ``(item id, whether it is new)``. An answer already
        queued keeps its item; a stronger reason (:data:`REASONS`) replaces the reason of a pending one."""
        if reason not in REASONS:
            raise ReviewInputError(f"不明な理由です: {reason}")
        c = t.review_items.c
        where = and_(c.conversation_id == str(conversation_id)[:80], c.turn == int(turn))
        for _ in range(3):
            try:  # one transaction: the item read, then updated or inserted (a turn's intake: one write)
                with self._write() as conn:
                    row = conn.execute(select(c.id, c.reason, c.status).where(where)).first()
                    if row is not None:
                        if row.status == "pending" and REASONS.index(reason) < REASONS.index(row.reason):
                            conn.execute(update(t.review_items).where(c.id == row.id)
                                         .values(reason=reason, updated_at=self.now()))
                        return int(row.id), False
                    stamp = self.now()
                    item_id = conn.execute(insert(t.review_items).values(
                        conversation_id=str(conversation_id)[:80], turn=int(turn), flow=flow, reason=reason,
                        status="pending", prompt_version=str(prompt_version or "")[:120],
                        model=str(model or "")[:200], snapshot=dumps(dict(snapshot or {})),
                        reviews_wanted=2 if reviews_wanted >= 2 else 1, review_count=0, labels="[]", comment="",
                        created_at=stamp, updated_at=stamp)).inserted_primary_key[0]
                return int(item_id), True
            except IntegrityError:  # queued by another process at the same moment: read it again
                continue
        raise ReviewConflict("レビュー項目を登録できませんでした。もう一度お試しください。")

    def _review_where(self, query: ReviewQuery, now: str) -> list[Any]:
        c = t.review_items.c
        where: list[Any] = []
        for column, wanted in (("flow", query.flows), ("reason", query.reasons), ("verdict", query.verdicts),
                               ("prompt_version", query.prompt_versions), ("model", query.models),
                               ("reviewed_by", query.reviewers)):
            if wanted:
                where.append(c[column].in_(list(wanted)))
        if query.statuses:
            parts = []
            for status in query.statuses:
                if status == "pending":  # lapsed claims were put back first (_release_lapsed)
                    parts.append(c.status == "pending")
                elif status == "claimed":
                    parts.append(and_(c.status == "claimed", c.claim_until >= now))
                elif status in STATUSES:
                    parts.append(c.status == status)
            where.append(or_(*parts) if parts else c.id < 0)
        if query.labels:  # read from the label index (ix_review_item_labels_label), not item by item
            il = t.review_item_labels.c
            where.append(c.id.in_(select(il.item_id).where(il.label.in_(list(query.labels)))))
        if query.since:
            where.append(c.created_at >= query.since)
        if query.until:
            where.append(c.created_at < query.until)
        return where

    def _release_lapsed(self, query: ReviewQuery) -> None:
        """Put items whose claim lapsed back to ``pending`` before the queue is read by status, so a status is
        one index range read in order (no ``OR``, no sort of the whole queue). Looks first (one indexed read of
        the few claimed items) and writes only when a claim did lapse."""
        if not query.statuses:
            return
        c = t.review_items.c
        now = self.now()
        lapsed = and_(c.status == "claimed", c.claim_until < now)
        with self._read() as conn:
            if conn.execute(select(c.id).where(lapsed).limit(1)).first() is None:
                return
        with self._write() as conn:
            conn.execute(update(t.review_items).where(lapsed).values(
                status="pending", claimed_by=None, claimed_by_label=None, claim_until=None))

    def review_page(self, query: ReviewQuery = ReviewQuery(), *, limit: int = 50, offset: int = 0
                    ) -> list[dict[str, Any]]:
        """One page of the items ``query`` matches, oldest first (a queue), without their snapshots."""
        self._release_lapsed(query)
        c = t.review_items.c
        now = self.now()
        columns = [col for col in t.review_items.c if col.name != "snapshot"]
        stmt = (select(*columns).where(*self._review_where(query, now)).order_by(c.id)
                .limit(max(0, int(limit))).offset(max(0, int(offset))))
        with self._read() as conn:
            return [_item(row, now) for row in conn.execute(stmt)]

    def count_review_items(self, query: ReviewQuery = ReviewQuery()) -> int:
        self._release_lapsed(query)
        with self._read() as conn:
            stmt = select(func.count()).select_from(t.review_items).where(*self._review_where(query, self.now()))
            return int(conn.execute(stmt).scalar() or 0)

    def review_position(self, item_id: int, query: ReviewQuery = ReviewQuery()) -> int | None:
        """The 0-based place of ``item_id`` in the filtered queue (None when the filters leave it out)."""
        self._release_lapsed(query)
        c = t.review_items.c
        with self._read() as conn:
            where = self._review_where(query, self.now())
            if conn.execute(select(c.id).where(c.id == int(item_id), *where)).first() is None:
                return None
            return int(conn.execute(select(func.count()).select_from(t.review_items)
                                    .where(c.id < int(item_id), *where)).scalar() or 0)

    def review_values(self, column: str) -> list[str]:
        """The distinct values of a filter column (flow, reason, prompt_version, model, reviewed_by)."""
        if column not in ("flow", "reason", "prompt_version", "model", "reviewed_by"):
            raise ValueError(column)
        with self._read() as conn:
            return [str(v) for v in distinct_values(conn, "review_items", column) if str(v) != ""]

    def reviewer_names(self) -> dict[str, str]:
        """``{reviewed_by: label}`` of everyone who reviewed something (for the filter's labels)."""
        c = t.review_verdicts.c
        with self._read() as conn:
            rows = conn.execute(select(c.reviewer, func.max(c.reviewer_label)).group_by(c.reviewer)).all()
        return {str(r[0]): str(r[1] or r[0]) for r in rows}

    def get_review_item(self, item_id: int) -> dict[str, Any] | None:
        """The item with its snapshot and every verdict (oldest first); None when unknown."""
        with self._read() as conn:
            row = conn.execute(select(t.review_items).where(t.review_items.c.id == int(item_id))).first()
            if row is None:
                return None
            verdicts = conn.execute(select(t.review_verdicts).where(t.review_verdicts.c.item_id == int(item_id))
                                    .order_by(t.review_verdicts.c.id)).all()
        item = _item(row, self.now())
        item["verdicts"] = [_item(v) for v in verdicts]
        return item

    def find_review_item(self, conversation_id: str, turn: int) -> dict[str, Any] | None:
        c = t.review_items.c
        with self._read() as conn:
            row = conn.execute(select(c.id).where(c.conversation_id == conversation_id, c.turn == int(turn))).first()
        return None if row is None else self.get_review_item(int(row.id))

    # ---- claims --------------------------------------------------------------------------------------
    def _open_to(self, user_id: str, now: str) -> Any:
        """The item is free for ``user_id``: pending, or claimed by them, or its claim lapsed; and not yet
        reviewed by them (the double-reviewed sample wants a second reviewer)."""
        c = t.review_items.c
        v = t.review_verdicts.c
        return and_(or_(c.status == "pending",
                        and_(c.status == "claimed", or_(c.claimed_by == user_id, c.claim_until < now))),
                    ~exists(select(v.id).where(v.item_id == c.id, v.reviewer == user_id)))

    def _why_not(self, conn: Any, item_id: int, user_id: str, now: str) -> Exception:
        row = conn.execute(select(t.review_items).where(t.review_items.c.id == item_id)).first()
        if row is None:
            return LookupError("レビュー項目が見つかりません。")
        if row.status in ("done", "skipped"):
            return ReviewConflict(f"この項目は{STATUS_JA[row.status]}です。")
        if row.status == "claimed" and row.claimed_by != user_id and str(row.claim_until or "") >= now:
            return ReviewConflict(f"この項目は {row.claimed_by_label or row.claimed_by} さんが作業中です。")
        return ReviewConflict("この項目はあなたがすでにレビューしています（2 人目のレビューを待っています）。")

    def claim_review_item(self, item_id: int, actor: Any, *, minutes: float | None = None) -> dict[str, Any]:
        """Take the item for ``minutes`` (``KAIWA_REVIEW_CLAIM_MINUTES``): one conditional UPDATE, so of two
        reviewers claiming at once exactly one gets it. ReviewConflict / LookupError otherwise."""
        require(actor, "review.work")
        user_id, label, _, _ = who(actor)
        now = self.now()
        until = self._later(claim_minutes() if minutes is None else minutes)
        c = t.review_items.c
        with self._write() as conn:
            taken = conn.execute(update(t.review_items).where(c.id == int(item_id), self._open_to(user_id, now))
                                 .values(status="claimed", claimed_by=user_id, claimed_by_label=label,
                                         claim_until=until, updated_at=now)).rowcount
            if not taken:
                raise self._why_not(conn, int(item_id), user_id, now)
            self._audit(conn, actor, "review.claim", "review_item", item_id, {"until": until})
        return self.get_review_item(int(item_id)) or {}

    def claim_next_review_item(self, actor: Any, query: ReviewQuery = ReviewQuery(), *,
                               minutes: float | None = None) -> dict[str, Any] | None:
        """Claim the oldest item open to the actor that ``query`` matches (None when there is none)."""
        require(actor, "review.work")
        user_id = who(actor)[0]
        c = t.review_items.c
        v = t.review_verdicts.c
        pending = replace(query, statuses=("pending",))  # lapsed claims are put back first
        for _ in range(10):  # another reviewer may take the one we picked: pick again
            self._release_lapsed(pending)
            now = self.now()
            with self._read() as conn:
                where = self._review_where(pending, now)
                mine = exists(select(v.id).where(v.item_id == c.id, v.reviewer == user_id))
                row = conn.execute(select(c.id).where(*where, ~mine).order_by(c.id).limit(1)).first()
            if row is None:
                return None
            try:
                return self.claim_review_item(int(row.id), actor, minutes=minutes)
            except ReviewConflict:
                continue
        return None

    def release_review_item(self, item_id: int, actor: Any) -> bool:
        """Give one's claim back (the item is pending again)."""
        require(actor, "review.work")
        user_id = who(actor)[0]
        c = t.review_items.c
        with self._write() as conn:
            done = conn.execute(update(t.review_items).where(c.id == int(item_id), c.status == "claimed",
                                                             c.claimed_by == user_id)
                                .values(status="pending", claimed_by=None, claimed_by_label=None, claim_until=None,
                                        updated_at=self.now())).rowcount
            if done:
                self._audit(conn, actor, "review.release", "review_item", item_id)
        return bool(done)

    def skip_review_item(self, item_id: int, actor: Any, *, comment: str = "") -> None:
        require(actor, "review.work")
        user_id = who(actor)[0]
        now = self.now()
        c = t.review_items.c
        with self._write() as conn:
            done = conn.execute(update(t.review_items).where(c.id == int(item_id), self._open_to(user_id, now))
                                .values(status="skipped", claimed_by=None, claimed_by_label=None, claim_until=None,
                                        comment=str(comment or "")[:MAX_COMMENT_CHARS], updated_at=now)).rowcount
            if not done:
                raise self._why_not(conn, int(item_id), user_id, now)
            self._audit(conn, actor, "review.skip", "review_item", item_id)

    # ---- verdicts ------------------------------------------------------------------------------------
    def check_review_input(self, verdict: Any, labels: Any) -> list[str]:
        """The labels, validated: ReviewInputError for an unknown verdict or a label the score configuration
        does not hold (active labels only)."""
        if verdict not in VERDICTS:
            raise ReviewInputError("判定は correct（正しい）・partial（一部誤り）・incorrect（誤り）のいずれかです。")
        if not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) for x in labels):
            raise ReviewInputError("ラベルは文字列のリストで指定してください。")
        chosen = list(dict.fromkeys(labels))
        if len(chosen) > MAX_LABELS:
            raise ReviewInputError(f"ラベルは {MAX_LABELS} 個までです。")
        known = {label["name"] for label in self.review_labels()}
        unknown = [x for x in chosen if x not in known]
        if unknown:
            raise ReviewInputError(f"スコア設定にないラベルです: {'、'.join(x[:MAX_LABEL_CHARS] for x in unknown)}")
        return chosen

    def record_review(self, item_id: int, actor: Any, *, verdict: str, labels: Sequence[str] = (),
                      comment: str = "", corrected_answer: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Record the actor's verdict on the item (claiming it on the way when it is free): one transaction
        for the claim check, the verdict row, the item, its labels and the audit row. The first verdict is
        the item's; an item that wants two reviews goes back to the queue for another reviewer."""
        require(actor, "review.work")
        chosen = self.check_review_input(verdict, list(labels))
        user_id, label, _, _ = who(actor)
        now = self.now()
        c = t.review_items.c
        corrected = dumps(dict(corrected_answer)) if corrected_answer else None
        note = str(comment or "")[:MAX_COMMENT_CHARS]
        try:
            with self._write() as conn:
                taken = conn.execute(update(t.review_items).where(c.id == int(item_id), self._open_to(user_id, now))
                                     .values(claimed_by=user_id, claimed_by_label=label, updated_at=now,
                                             review_count=c.review_count + 1)).rowcount
                if not taken:
                    raise self._why_not(conn, int(item_id), user_id, now)
                row = conn.execute(select(c.review_count, c.reviews_wanted).where(c.id == int(item_id))).one()
                conn.execute(insert(t.review_verdicts).values(
                    item_id=int(item_id), reviewer=user_id, reviewer_label=label, verdict=verdict,
                    labels=dumps(chosen), comment=note, corrected_answer=corrected, created_at=now))
                values: dict[str, Any] = {"claimed_by": None, "claimed_by_label": None, "claim_until": None,
                                          "status": "done" if row.review_count >= row.reviews_wanted else "pending"}
                if row.review_count == 1:  # the first verdict is the item's
                    values.update(verdict=verdict, labels=dumps(chosen), comment=note, corrected_answer=corrected,
                                  reviewed_by=user_id, reviewed_by_label=label, reviewed_at=now)
                    conn.execute(delete(t.review_item_labels).where(t.review_item_labels.c.item_id == int(item_id)))
                    if chosen:
                        conn.execute(insert(t.review_item_labels),
                                     [{"item_id": int(item_id), "label": x} for x in chosen])
                conn.execute(update(t.review_items).where(c.id == int(item_id)).values(**values))
                self._audit(conn, actor, "review.verdict", "review_item", item_id,
                            {"verdict": verdict, "labels": chosen, "corrected": bool(corrected)})
        except IntegrityError as exc:  # the same reviewer twice at the same moment
            raise ReviewConflict("この項目はあなたがすでにレビューしています。") from exc
        return self.get_review_item(int(item_id)) or {}

    def reviewed_items(self, query: ReviewQuery = ReviewQuery(), *, limit: int = 10_000, offset: int = 0
                       ) -> list[dict[str, Any]]:
        """Items with a verdict (with their snapshots), in review order: what the export writes."""
        c = t.review_items.c
        stmt = (select(t.review_items).where(c.verdict.is_not(None), *self._review_where(query, self.now()))
                .order_by(c.reviewed_at, c.id).limit(max(0, int(limit))).offset(max(0, int(offset))))
        with self._read() as conn:
            return [_item(row) for row in conn.execute(stmt)]

    def review_verdict_rows(self, *, since: str | None = None, until: str | None = None) -> list[dict[str, Any]]:
        """Every verdict (of the period, by its time) joined with its item's flow, prompt version and model:
        what quality figures and reviewer agreement are computed from."""
        v, c = t.review_verdicts.c, t.review_items.c
        stmt = (select(v.item_id, v.reviewer, v.verdict, v.labels, v.created_at, c.flow, c.prompt_version, c.model)
                .join(t.review_items, c.id == v.item_id).order_by(v.id))
        if since:
            stmt = stmt.where(v.created_at >= since)
        if until:
            stmt = stmt.where(v.created_at < until)
        with self._read() as conn:
            return [_item(row) for row in conn.execute(stmt)]

    def feedback_rows(self, *, since: str | None = None, until: str | None = None) -> list[dict[str, Any]]:
        c = t.review_feedback.c
        stmt = select(c.flow, c.prompt_version, c.model, c.rating, c.created_at).order_by(c.id)
        if since:
            stmt = stmt.where(c.created_at >= since)
        if until:
            stmt = stmt.where(c.created_at < until)
        with self._read() as conn:
            return [row._asdict() for row in conn.execute(stmt)]

    # ---- the score configuration ---------------------------------------------------------------------
    def review_labels(self, *, include_inactive: bool = False) -> list[dict[str, Any]]:
        c = t.review_labels.c
        query = select(t.review_labels).order_by(c.active.desc(), c.position, c.id)
        if not include_inactive:
            query = query.where(c.active.is_(True))
        with self._read() as conn:
            return [row._asdict() for row in conn.execute(query)]

    def save_review_labels(self, labels: Iterable[Mapping[str, Any]], actor: Any) -> list[dict[str, Any]]:
        """Replace the score configuration with ``labels`` (``{name, description?, active?}`` in order): an
        admin action, audited. A label left out is deactivated (past verdicts keep it), never deleted."""
        require(actor, "review.config")
        wanted: list[dict[str, Any]] = []
        for raw in labels:
            name = " ".join(str(raw.get("name") or "").split())[:MAX_LABEL_CHARS]
            if name and name not in {w["name"] for w in wanted}:
                wanted.append({"name": name, "description": str(raw.get("description") or "")[:500],
                               "active": bool(raw.get("active", True))})
        if not any(w["active"] for w in wanted):
            raise ReviewInputError("ラベルを 1 つ以上有効にしてください。")
        user_id, label, _, _ = who(actor)
        now = self.now()
        c = t.review_labels.c
        with self._write() as conn:
            existing = {row.name: row.id for row in conn.execute(select(c.id, c.name))}
            for position, item in enumerate(wanted):
                values = {**item, "position": position, "updated_by": user_id, "updated_by_label": label,
                          "updated_at": now}
                if item["name"] in existing:
                    conn.execute(update(t.review_labels).where(c.id == existing[item["name"]]).values(**values))
                else:
                    conn.execute(insert(t.review_labels).values(**values))
            gone = [n for n in existing if n not in {w["name"] for w in wanted}]
            if gone:
                conn.execute(update(t.review_labels).where(c.name.in_(gone)).values(
                    active=False, updated_by=user_id, updated_by_label=label, updated_at=now))
            self._audit(conn, actor, "review.labels", "review_labels", "*",
                        {"labels": [w["name"] for w in wanted if w["active"]]})
        return self.review_labels(include_inactive=True)

    # ---- regression cases ----------------------------------------------------------------------------
    def add_review_scenario(self, item_id: int | None, scenario: Mapping[str, Any], actor: Any) -> int:
        """Store a ``core.eval`` scenario made from a reviewed item (``review.work``; audited); the item
        remembers it. A second one for the same item replaces the first (deactivated)."""
        require(actor, "review.work")
        user_id, label, _, _ = who(actor)
        s = t.review_scenarios.c
        with self._write() as conn:
            if item_id is not None:
                conn.execute(update(t.review_scenarios).where(s.item_id == int(item_id)).values(active=False))
            scenario_id = conn.execute(insert(t.review_scenarios).values(
                item_id=item_id, flow=str(scenario.get("flow") or ""), name=str(scenario.get("name") or "")[:500],
                scenario=dumps(dict(scenario)), active=True, created_by=user_id, created_by_label=label,
                created_at=self.now())).inserted_primary_key[0]
            if item_id is not None:
                conn.execute(update(t.review_items).where(t.review_items.c.id == int(item_id))
                             .values(scenario_id=scenario_id, updated_at=self.now()))
            self._audit(conn, actor, "review.scenario", "review_item", item_id if item_id is not None else "-",
                        {"scenario_id": scenario_id, "name": str(scenario.get("name") or "")[:200]})
        return int(scenario_id)

    def list_review_scenarios(self, *, active_only: bool = True, limit: int = 10_000) -> list[dict[str, Any]]:
        """Stored regression cases, oldest first: ``{id, item_id, flow, name, scenario, created_by_label, …}``."""
        s = t.review_scenarios.c
        query = select(t.review_scenarios).order_by(s.id).limit(limit)
        if active_only:
            query = query.where(s.active.is_(True))
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [{**row._asdict(), "scenario": loads(row.scenario, {})} for row in rows]
