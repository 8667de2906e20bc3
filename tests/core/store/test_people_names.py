"""People by name, not by internal id (issue #15): who confirmed an entry and who last changed a booking
are stored as display names, and the migration fills them in for rows written before it."""
from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

from core.store.db import MIGRATIONS
from core.store.store import Store


def _alembic(url: str, target: str, *, down: bool = False) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, target)
    engine.dispose()


def test_confirmer_and_booking_changer_are_stored_by_name(store, operator):
    cid = store.create_conversation("knowledge", operator)
    (entry,) = store.record_knowledge(cid, [{"knowledge_title": "t"}], operator)
    assert store.get_entry(entry)["confirmed_by_label"] is None
    store.set_entry_status(entry, "confirm", operator)
    got = store.get_entry(entry)
    assert got["confirmed_by"] == "yamada@example.jp" and got["confirmed_by_label"] == "山田"
    number = store.create_booking(None, booking_type="visit", contact={"name": "客"}, actor="api")
    assert store.get_booking(number)["updated_by_label"] == "api"
    store.set_booking_status(number, "confirmed", operator)
    assert store.get_booking(number)["updated_by_label"] == "山田"


def test_the_migration_fills_names_for_rows_written_before_it(store_url, operator):
    store = Store(store_url)
    cid = store.create_conversation("knowledge", operator)
    (entry,) = store.record_knowledge(cid, [{"knowledge_title": "t"}], operator)
    store.set_entry_status(entry, "confirm", operator)
    number = store.create_booking(None, booking_type="visit", contact={"name": "客"}, actor="api")
    store.set_booking_status(number, "confirmed", operator)
    untouched = store.create_booking(None, booking_type="dispatch", contact={"name": "別の客"}, actor="api")
    store.engine.dispose()
    _alembic(store_url, "0003", down=True)  # the database as it was before: no name columns
    _alembic(store_url, "head")
    store = Store(store_url)
    assert store.get_entry(entry)["confirmed_by_label"] == "山田"
    assert store.get_booking(number)["updated_by_label"] == "山田"
    assert store.get_booking(untouched)["updated_by_label"] == "api"
    store.engine.dispose()
