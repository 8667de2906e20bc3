"""A store whose writes fail as on a full disk, on either engine: while switched on, every statement of
the kinds given (all writes by default; ``("INSERT",)`` for a disk that still lets a row be rewritten in
place but not a new one added, as a real full SQLite disk does) raises SQLAlchemy's ``OperationalError``
wrapping SQLite's "database or disk is full"; reads go on working. Used for the turn lease, ``/healthz``
and the pages' outage notice."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator, Sequence

from sqlalchemy import event
from sqlalchemy.exc import OperationalError

DISK_FULL = "database or disk is full"
WRITES = ("INSERT", "UPDATE", "DELETE")


class FailingWrites:
    """``on()`` / ``off()`` switch the store's writes between failing and working."""

    def __init__(self, store, kinds: Sequence[str] = WRITES):
        self.engine = store.engine
        self.kinds = tuple(kinds)
        self.failing = False
        event.listen(self.engine, "before_cursor_execute", self._check)

    def _check(self, conn, cursor, statement, parameters, context, executemany):
        if self.failing and statement.lstrip().upper().startswith(self.kinds):
            raise OperationalError(statement, parameters, sqlite3.OperationalError(DISK_FULL))

    def on(self) -> None:
        self.failing = True

    def off(self) -> None:
        self.failing = False

    def restore(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._check)


@contextmanager
def failing_writes(store, kinds: Sequence[str] = WRITES) -> Iterator[FailingWrites]:
    switch = FailingWrites(store, kinds)
    try:
        yield switch
    finally:
        switch.restore()
