"""A store whose writes fail as on a full disk, on either engine: every write transaction of the store
(``Store._write``) raises SQLAlchemy's ``OperationalError`` wrapping SQLite's "database or disk is full",
while reads go on working. Used for the turn lease, ``/healthz`` and the pages' outage notice."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

from sqlalchemy.exc import OperationalError

DISK_FULL = "database or disk is full"


def disk_full() -> OperationalError:
    return OperationalError("INSERT", {}, sqlite3.OperationalError(DISK_FULL))


class FailingWrites:
    """``on()`` / ``off()`` switch the store's writes between failing and working."""

    def __init__(self, store):
        self.store = store
        self.failing = False
        self._original = store._write

        def write():
            if self.failing:
                raise disk_full()
            return self._original()

        store._write = write

    def on(self) -> None:
        self.failing = True

    def off(self) -> None:
        self.failing = False

    def restore(self) -> None:
        self.store._write = self._original


@contextmanager
def failing_writes(store) -> Iterator[FailingWrites]:
    switch = FailingWrites(store)
    try:
        yield switch
    finally:
        switch.restore()
