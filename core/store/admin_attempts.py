"""Admin-password attempts, shared by every process through the store: who tried, when and from where,
so :func:`core.identity.unlock_wait` can slow down and then lock repeated failures per browser session,
per address and per verified user, and a new tab or another replica does not start the count afresh.

One row per key per attempt (``session:…``, ``ip:…``, ``user:…``); each attempt also leaves one audit
row (``admin.unlock``, ``admin.unlock_failed``, or ``admin.unlock_refused`` for an attempt made while
waiting or locked, which is not checked and not counted).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from sqlalchemy import insert, select

from core.store import tables as t


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


class AdminAttemptsStore:
    """The admin-password attempts part of :class:`~core.store.store.Store`."""

    def admin_failures(self, keys: Iterable[str], *, now: float, window: float) -> dict[str, list[float]]:
        """``{key: [epoch seconds of each failure]}``: the failures of each key within ``window`` seconds
        before ``now``, after that key's latest success."""
        keys = [k[:200] for k in keys if k]
        if not keys:
            return {}
        since = _stamp(now - window)
        a = t.admin_attempts.c
        with self._read() as conn:
            rows = conn.execute(select(a.key, a.at, a.ok).where(a.key.in_(keys), a.at >= since)
                                .order_by(a.at, a.id)).all()
        failures: dict[str, list[float]] = {k: [] for k in keys}
        for row in rows:
            if row.ok:
                failures[row.key] = []
            else:
                failures[row.key].append(_epoch(row.at))
        return failures

    def record_admin_attempt(self, keys: Iterable[str], ok: bool, actor: Any, *, now: float,
                             where: Mapping[str, Any]) -> None:
        """One checked attempt: a row per key and its audit row (who, when, from where)."""
        stamp = _stamp(now)
        with self._write() as conn:
            for key in {k[:200] for k in keys if k}:
                conn.execute(insert(t.admin_attempts).values(at=stamp, key=key, ok=ok))
            self._audit(conn, actor, "admin.unlock" if ok else "admin.unlock_failed", "admin", "password", dict(where))
        if ok:
            self.prune_admin_attempts(now=now)

    def record_admin_refused(self, actor: Any, *, where: Mapping[str, Any], wait_seconds: float, locked: bool) -> None:
        """An attempt made while waiting or locked: audited, not checked, not counted."""
        with self._write() as conn:
            self._audit(conn, actor, "admin.unlock_refused", "admin", "password",
                        {**dict(where), "locked": locked, "wait_seconds": round(wait_seconds, 1)})

    def prune_admin_attempts(self, *, now: float, keep: float = 7 * 24 * 3600) -> None:
        """Forget attempt rows older than ``keep`` seconds (the audit log keeps its own rows)."""
        with self._write() as conn:
            conn.execute(t.admin_attempts.delete().where(t.admin_attempts.c.at < _stamp(now - keep)))


__all__ = ["AdminAttemptsStore"]
