"""Opening the store's database: one SQLAlchemy engine URL for SQLite and PostgreSQL.

``KAIWA_DB_URL`` picks the database (``postgresql+psycopg://user:pw@host/db`` for several replicas);
unset, it is an SQLite file ``var/kaiwa.db`` created on first use. SQLite is opened in WAL mode with a
busy timeout, and write transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue on
the lock instead of failing with "database is locked" half way. Migrations (Alembic, ``migrations/``)
are applied on open, under an advisory lock on PostgreSQL so replicas starting together do not race.

A pooled PostgreSQL connection is pinged before use only when it sat idle in the pool for
:data:`PING_AFTER_IDLE_S` or longer (:func:`_ping_when_idle`): SQLAlchemy's ``pool_pre_ping`` pinged it on
every checkout, a round trip before each of a chat turn's transactions (≈ 5 a turn, 6–15 % of its CPU
besides the e5 vector). A connection used a moment ago is alive; one that waited (a restarted server, an
idle timeout) is pinged and replaced when dead, as before; a statement that still meets a dropped
connection fails its request and SQLAlchemy drops the whole pool.

PostgreSQL text cannot hold the NUL character (U+0000), and one in a message, a title or an id made the
whole write fail. Every string parameter the store sends is scrubbed of NUL on both engines (so they
store the same text): the HTTP API refuses NUL outright (422), this keeps any other path from failing.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError

from core.ids import new_id
from core.paths import ROOT

MIGRATIONS = Path(__file__).with_name("migrations")
_MIGRATION_LOCK_KEY = 0x4B41_4957  # "KAIW": pg_advisory_lock key for migrations
_lock = threading.Lock()
PING_AFTER_IDLE_S = 2.0  # a pooled PostgreSQL connection idle this long is pinged before use


def default_url(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    url = (env.get("KAIWA_DB_URL") or "").strip()
    if url:
        return url
    return f"sqlite:///{ROOT / 'var' / 'kaiwa.db'}"


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # noqa: ANN001
        dbapi_connection.isolation_level = None  # let "begin" below emit BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        # straight to the driver (SQLAlchemy's statement machinery cost more than the BEGIN: every transaction)
        conn.connection.dbapi_connection.execute(
            "BEGIN IMMEDIATE" if conn.get_execution_options().get("kaiwa_write") else "BEGIN")


def _scrub(value: object) -> object:
    return value.replace("\x00", "") if isinstance(value, str) and "\x00" in value else value


def _no_nul_parameters(engine: Engine) -> None:
    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _before(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        if isinstance(parameters, dict):
            parameters = {k: _scrub(v) for k, v in parameters.items()}
        elif isinstance(parameters, (list, tuple)):
            parameters = type(parameters)(
                {k: _scrub(v) for k, v in p.items()} if isinstance(p, dict)
                else type(p)(_scrub(v) for v in p) if isinstance(p, (list, tuple)) else _scrub(p)
                for p in parameters)
        return statement, parameters


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection on checkout only when it was checked in :data:`PING_AFTER_IDLE_S` ago or
    more (or never: a new connection); a dead one is replaced (``DisconnectionError``: the pool retries)."""
    @event.listens_for(engine, "checkin")
    def _checkin(dbapi_connection, record):
        record.info["kaiwa_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection, record, proxy):
        since = record.info.pop("kaiwa_idle_since", None)
        if since is not None and time.monotonic() - since < PING_AFTER_IDLE_S:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError("the pooled connection did not answer") from exc
        if not alive:
            raise DisconnectionError("the pooled connection did not answer")


GENERIC_PLANS_OPTION = "-c plan_cache_mode=force_generic_plan"


def create_store_engine(url: str, *, planned: bool = False) -> Engine:
    """An engine for ``url`` with the SQLite pragmas set; the SQLite file's folder is created. ``planned``
    (PostgreSQL): a small pool whose connections prepare every statement on its first execution and plan it
    once (generic plans: ``plan_cache_mode``, added to the URL's own ``options``), for the same few small
    reads made again and again (:meth:`StoreBase.planned_read_connection`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        _sqlite_setup(engine)
    elif planned:
        options = " ".join(filter(None, [parsed.query.get("options"), GENERIC_PLANS_OPTION]))
        engine = create_engine(parsed.difference_update_query(["options"]), pool_size=1, max_overflow=4,
                               connect_args={"options": options, "prepare_threshold": 0})
        _ping_when_idle(engine)
    else:
        engine = create_engine(url, pool_size=5, max_overflow=10)
        _ping_when_idle(engine)
    _no_nul_parameters(engine)
    return engine


def migrate(engine: Engine) -> None:
    """``alembic upgrade head`` from code, on one connection (advisory-locked on PostgreSQL)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with _lock, engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            conn.commit()
        try:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            conn.commit()
        finally:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK_KEY})
                conn.commit()


def redact_url(url: str) -> str:
    """The URL with its password hidden (for the UI and logs)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: show nothing of it
        return "（URL を表示できません）"


def create_scratch_database(admin_url: str, prefix: str = "kaiwa") -> str:
    """A new, empty PostgreSQL database in the cluster ``admin_url`` reaches (``<prefix>_<random>``),
    for a test or a benchmark run; returns its URL. :func:`drop_database` removes it."""
    name = f"{prefix}_{new_id(10)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, database_url: str) -> None:
    """Drop the database ``database_url`` names, through the cluster ``admin_url`` reaches, closing the
    connections an engine still holds to it (``WITH (FORCE)``, PostgreSQL 13+)."""
    name = make_url(database_url).database
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
