"""The console's memory stays bounded however many sessions come and go (issue #25), checked by counting:
every shared cache has a bound (entries and time), the bound holds when more distinct keys come than it
allows, and a closed session leaves none of its objects behind (``bench.memory`` measures the server's RSS)."""
from __future__ import annotations

import ast
import gc
import tomllib
from pathlib import Path

from streamlit.runtime.caching.cache_data_api import _data_caches
from streamlit.testing.v1 import AppTest

from core.llm.registry import ProviderRegistry
from core.store.debug_sink import StoredDebugLog
from tests.pages.conftest import APP

ROOT = Path(APP).parent
STREAMLIT_CODE = [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py")), *sorted((ROOT / "pages").glob("*.py"))]
ALL_CODE = [*STREAMLIT_CODE, *sorted((ROOT / "core").rglob("*.py")), *sorted((ROOT / "api").rglob("*.py"))]


def _decorators(paths: list[Path]):
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    yield f"{path.relative_to(ROOT)}:{node.name}", decorator


def _name(node: ast.AST) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target)


def test_every_streamlit_cache_has_a_bound_in_entries_and_time():
    found, unbounded = 0, []
    for where, decorator in _decorators(STREAMLIT_CODE):
        if _name(decorator) not in ("st.cache_data", "st.cache_resource"):
            continue
        found += 1
        keywords = {k.arg for k in decorator.keywords} if isinstance(decorator, ast.Call) else set()
        if not {"max_entries", "ttl"} <= keywords:
            unbounded.append(where)
    assert found >= 10 and not unbounded, unbounded


def test_the_shared_caches_have_a_bound_in_bytes_together():
    """``server.maxCacheDataSize``: however the entries are spread over the functions, all of them together
    stay under one budget the server reads at start."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    size = config["server"]["maxCacheDataSize"].lower()
    assert size.endswith("mb") and 0 < int(size[:-2]) <= 256


def test_every_lru_cache_has_a_size():
    found, unbounded = 0, []
    for where, decorator in _decorators(ALL_CODE):
        name = _name(decorator)
        if name in ("functools.cache", "cache"):
            unbounded.append(where)
        if name not in ("lru_cache", "functools.lru_cache"):
            continue
        found += 1
        size = next((k.value for k in getattr(decorator, "keywords", []) if k.arg == "maxsize"), None)
        if not isinstance(decorator, ast.Call) or isinstance(size, ast.Constant) and size.value is None:
            unbounded.append(where)
    assert found >= 10 and not unbounded, unbounded


def _entries(function: str) -> int:
    """How many entries the ``st.cache_data`` caches of functions named ``function`` hold now."""
    with _data_caches._caches_lock:
        caches = [c for per_session in _data_caches._function_caches.values() for c in per_session.values()]
    return sum(len(stats) for c in caches for stats in c.get_stats().values()
               if any(s.cache_name.endswith(f".{function}") or s.cache_name == function for s in stats))


def test_a_shared_cache_keeps_no_more_entries_than_its_bound(app):
    """70 different searches of the library (each a key of ``ui.cache._entries``, bound 64): the cache holds
    at most 64 entries, not one per search ever made."""
    app.switch_page("pages/library.py").run()
    for n in range(70):
        app.text_input(key="lib_query").set_value(f"賠償{n}").run()
    assert not app.exception
    assert 60 <= _entries("_entries") <= 64


def test_a_closed_session_leaves_none_of_its_objects_behind():
    """Sessions that chatted and visited the store's pages, then closed: none of their registries, LLM
    clients or debug logs is still alive (nothing shared keeps a session's objects)."""
    for n in range(3):
        at = AppTest.from_file(APP, default_timeout=90).run()
        at.switch_page("pages/faq.py").run()
        at.chat_input(key="faq_input").set_value(f"オイル交換の目安は？{n}").run()
        for page in ("library", "debug_log", "bookings"):
            at.switch_page(f"pages/{page}.py").run()
        assert not at.exception
        assert sum(isinstance(o, StoredDebugLog) for o in gc.get_objects()) >= 1  # alive while it is open
        del at
    gc.collect()
    assert sum(isinstance(o, (ProviderRegistry, StoredDebugLog)) for o in gc.get_objects()) == 0
