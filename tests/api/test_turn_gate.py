"""The API worker's turn gate: at most N chat turns in the thread pool at once, the rest waiting in the event
loop first come first served; a session's turns enter one at a time, a second one waiting at most the turn
wait (then the 409 a held lease gives), never holding a place meanwhile."""
from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

import api.main as api_main
from api.main import app, get_client, get_retriever, get_store, get_turn_wait
from api.turn_gate import TURNS_IN_FLIGHT, TurnGate, turns_in_flight
from core.llm.offline import OfflineClient
from core.rag.embeddings import REQUESTS
from core.store.conversations import TurnBusy
from core.store.store import Store
from tests.core.diagnosis.diagnosis_fakes import KeywordManualRetriever


# ---- the gate alone ----------------------------------------------------------------------------
def test_at_most_the_limit_of_turns_run_and_the_others_enter_in_their_order():
    async def scenario():
        gate = TurnGate(limit=2)
        release = asyncio.Event()
        running, most, order = [0], [0], []

        async def turn(k: int) -> None:
            async with gate.enter(f"s{k}", wait=5):
                order.append(k)
                running[0] += 1
                most[0] = max(most[0], running[0])
                await release.wait()
                running[0] -= 1

        tasks = []
        for k in range(6):
            tasks.append(asyncio.create_task(turn(k)))
            await asyncio.sleep(0)  # each asks in turn
        await asyncio.sleep(0.05)
        assert (gate.running, gate.waiting, order) == (2, 4, [0, 1])
        release.set()
        await asyncio.gather(*tasks)
        assert most[0] == 2 and order == [0, 1, 2, 3, 4, 5]
        assert (gate.running, gate.waiting, gate.sessions()) == (0, 0, 0)

    asyncio.run(scenario())


def test_a_sessions_second_turn_waits_without_a_place_and_another_session_goes_ahead():
    async def scenario():
        gate = TurnGate(limit=2)
        first_in, release, entered = asyncio.Event(), asyncio.Event(), []

        async def turn(sid: str, name: str, hold: bool) -> None:
            async with gate.enter(sid, wait=5):
                entered.append(name)
                if hold:
                    first_in.set()
                    await release.wait()

        first = asyncio.create_task(turn("a", "a1", True))
        await first_in.wait()
        second = asyncio.create_task(turn("a", "a2", False))
        await asyncio.sleep(0.02)
        assert entered == ["a1"] and gate.running == 1 and gate.waiting == 0  # a2 holds no place
        await turn("b", "b1", False)  # the free place is another session's at once
        assert entered == ["a1", "b1"]
        release.set()
        await asyncio.gather(first, second)
        assert entered == ["a1", "b1", "a2"] and gate.sessions() == 0

    asyncio.run(scenario())


def test_a_sessions_turn_that_waits_longer_than_the_wait_is_turn_busy_and_leaves_nothing_behind():
    async def scenario():
        gate = TurnGate(limit=1)
        first_in, release = asyncio.Event(), asyncio.Event()

        async def held() -> None:
            async with gate.enter("a", wait=5):
                first_in.set()
                await release.wait()

        first = asyncio.create_task(held())
        await first_in.wait()
        with pytest.raises(TurnBusy) as busy:
            async with gate.enter("a", wait=0.05):
                raise AssertionError("entered while the session's turn runs")
        assert busy.value.conversation_id == "a"
        with pytest.raises(TurnBusy):
            async with gate.enter("a", wait=0):  # no wait at all: busy at once
                raise AssertionError("entered while the session's turn runs")
        release.set()
        await first
        assert (gate.running, gate.waiting, gate.sessions()) == (0, 0, 0)
        async with gate.enter("a", wait=0):  # free: taken at once even with no wait
            assert gate.running == 1
        async with gate.enter(None, wait=0):  # a new session has no id to wait for
            assert gate.running == 1

    asyncio.run(scenario())


def test_a_turn_that_fails_gives_its_place_and_its_session_back():
    async def scenario():
        gate = TurnGate(limit=1)
        with pytest.raises(RuntimeError):
            async with gate.enter("a", wait=1):
                raise RuntimeError("the flow failed")
        async with gate.enter("a", wait=0):
            assert gate.running == 1
        assert gate.sessions() == 0

    asyncio.run(scenario())


def test_the_limit_comes_from_the_environment_within_its_bounds(monkeypatch):
    assert turns_in_flight() == TURNS_IN_FLIGHT == 4
    monkeypatch.setenv("KAIWA_API_TURNS_IN_FLIGHT", "2")
    assert turns_in_flight() == 2
    for unusable in ("0", "65", "many", "1.5"):
        monkeypatch.setenv("KAIWA_API_TURNS_IN_FLIGHT", unusable)
        assert turns_in_flight() == TURNS_IN_FLIGHT


# ---- the route ---------------------------------------------------------------------------------
@pytest.fixture
def slow_api(tmp_path, monkeypatch):
    """The real app over SQLite, its turn function held on an event; counts turns inside it at once."""
    store = Store(f"sqlite:///{tmp_path / 'gate.db'}")
    app.dependency_overrides[get_retriever] = KeywordManualRetriever
    app.dependency_overrides[get_client] = OfflineClient
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_turn_wait] = lambda: 0.3
    monkeypatch.setattr(api_main, "TURN_GATE", TurnGate(limit=2))
    state = {"inside": 0, "most": 0, "calls": 0, "release": threading.Event(), "requests": []}
    lock = threading.Lock()
    turn = api_main._chat_turn

    def held_turn(*args):
        with lock:
            state["inside"] += 1
            state["calls"] += 1
            state["most"] = max(state["most"], state["inside"])
        try:
            state["requests"].append(REQUESTS.count())  # what e5 sees: the requests the worker serves now
            state["release"].wait(10)
            return turn(*args)
        finally:
            with lock:
                state["inside"] -= 1

    monkeypatch.setattr(api_main, "_chat_turn", held_turn)
    yield state
    app.dependency_overrides.clear()
    store.engine.dispose()


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gate.test", timeout=30)


def test_the_route_hands_at_most_the_limit_of_turns_to_the_pool_and_answers_every_one(slow_api):
    async def scenario():
        async with _client() as http:
            posts = [asyncio.create_task(http.post("/api/chat", json={})) for _ in range(6)]
            await asyncio.sleep(0.3)
            assert slow_api["inside"] == 2 and api_main.TURN_GATE.waiting == 4
            slow_api["release"].set()
            answers = await asyncio.gather(*posts)
        assert [r.status_code for r in answers] == [200] * 6
        assert len({r.json()["session_id"] for r in answers}) == 6
        assert slow_api["most"] == 2 and slow_api["calls"] == 6
        assert set(slow_api["requests"]) <= {1, 2} and 2 in slow_api["requests"] and REQUESTS.count() == 0

    asyncio.run(scenario())


def test_the_route_answers_a_sessions_second_turn_409_without_running_it(slow_api):
    async def scenario():
        async with _client() as http:
            slow_api["release"].set()
            sid = (await http.post("/api/chat", json={})).json()["session_id"]
            assert slow_api["requests"] == [1]  # a lone turn: its query vector may use both cores
            slow_api["release"].clear()
            calls = slow_api["calls"]
            body = {"session_id": sid, "action": "select_vehicle", "action_value": "kaiwa-mirai-hv-2022"}
            first = asyncio.create_task(http.post("/api/chat", json=body))
            await asyncio.sleep(0.1)
            second = await http.post("/api/chat", json=body)  # waits 0.3 s, then busy
            assert second.status_code == 409 and "処理しています" in second.json()["detail"]
            assert slow_api["calls"] == calls + 1  # the second never reached the pool
            slow_api["release"].set()
            assert (await first).status_code == 200
        assert api_main.TURN_GATE.sessions() == 0

    asyncio.run(scenario())
