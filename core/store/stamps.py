"""Change stamps: one number per table that grows whenever a row of it is inserted, updated or deleted,
by any process. Pages cache what they read keyed by these numbers (``ui.cache``), so a rerun with nothing
new reads nothing, and the first rerun after a change reads afresh. Reading the stamps is one tiny query.

* SQLite: the ``store_stamps`` table (one row per table), bumped by ``AFTER`` triggers inside the
  writing transaction; writers are serialised by SQLite anyway.
* PostgreSQL: a sequence ``stamp_<table>`` per table, bumped by a deferred constraint trigger when the
  writing transaction commits. A sequence takes no row lock, so concurrent writers never wait on each
  other (a counter row would serialise them, and could deadlock two transactions that touch two tables
  in opposite orders). A reader may see the new number a moment before the commit is visible; the
  caches' TTL bounds what that race can cost.
* Another engine: no stamps (``None``); caches then rely on their TTL alone.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import text

from core.store.tables import STAMPED_TABLES


def create(conn: Any) -> None:
    """The stamps and their triggers for this connection's engine (used by the migration)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        for name in STAMPED_TABLES:
            conn.execute(text("INSERT OR IGNORE INTO store_stamps(name, value) VALUES (:n, 0)"), {"n": name})
            for event in ("INSERT", "UPDATE", "DELETE"):
                conn.exec_driver_sql(
                    f"CREATE TRIGGER IF NOT EXISTS stamp_{name}_{event.lower()} AFTER {event} ON {name} "
                    f"BEGIN UPDATE store_stamps SET value = value + 1 WHERE name = '{name}'; END")
    elif dialect == "postgresql":
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION kaiwa_bump_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN PERFORM nextval(('stamp_' || TG_TABLE_NAME)::regclass); RETURN NULL; END $$")
        for name in STAMPED_TABLES:
            conn.exec_driver_sql(f"CREATE SEQUENCE IF NOT EXISTS stamp_{name}")
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS stamp_{name} ON {name}")
            conn.exec_driver_sql(
                f"CREATE CONSTRAINT TRIGGER stamp_{name} AFTER INSERT OR UPDATE OR DELETE ON {name} "
                f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kaiwa_bump_stamp()")


def count_triggers(conn: Any, prefix: str) -> int | None:
    """How many of the database's triggers are named ``prefix…`` (None on an engine the store does not
    keep triggers on)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        query = "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE :pattern"
    elif dialect == "postgresql":
        query = "SELECT count(*) FROM pg_trigger WHERE tgname LIKE :pattern AND NOT tgisinternal"
    else:
        return None
    return conn.execute(text(query), {"pattern": f"{prefix}%"}).scalar()


def ensure(conn: Any) -> None:
    """Create whatever stamp trigger is missing (cheap when none is): SQLite drops a table's triggers when a
    migration copies the table to change it."""
    found = count_triggers(conn, "stamp")
    wanted = 3 * len(STAMPED_TABLES) if conn.dialect.name == "sqlite" else len(STAMPED_TABLES)
    if found is not None and found != wanted:
        create(conn)


def drop(conn: Any) -> None:
    dialect = conn.dialect.name
    if dialect == "sqlite":
        for name in STAMPED_TABLES:
            for event in ("insert", "update", "delete"):
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS stamp_{name}_{event}")
    elif dialect == "postgresql":
        for name in STAMPED_TABLES:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS stamp_{name} ON {name}")
            conn.exec_driver_sql(f"DROP SEQUENCE IF EXISTS stamp_{name}")
        conn.exec_driver_sql("DROP FUNCTION IF EXISTS kaiwa_bump_stamp()")


def read(conn: Any) -> dict[str, int] | None:
    """``{table: stamp}`` of every stamped table, or None on an engine without stamps."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return {name: int(value) for name, value in conn.execute(text("SELECT name, value FROM store_stamps"))}
    if dialect == "postgresql":
        columns = ", ".join(f"(SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM stamp_{name})"
                            for name in STAMPED_TABLES)
        row = conn.execute(text(f"SELECT {columns}")).one()
        return {name: int(value) for name, value in zip(STAMPED_TABLES, row)}
    return None
