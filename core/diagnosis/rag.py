"""Manual retrieval for the diagnosis flow (seed 000 §10): search, filter, cite, format.

Hits with ``score > keep_score`` (0.3) are kept, one per section (long sections come back as
several chunks), and only for the session's vehicle: the search is filtered by ``vehicle_id`` (when
only make / model / year are known, by the catalogue vehicles that match them), and a hit whose
own metadata names another vehicle, make, model or year is dropped. ``rag_context`` is the text
embedded in the prompts (each excerpt in its own ``core.text.untrusted`` data block: manual text is
data, never instructions), ``to_sources`` the citations put on the response. A failing retriever
means no hits, never an exception. Queries are read up to ``MAX_QUERY_CHARS`` characters, without
the symptoms they deny, and expanded by reading when the retriever can (kana and homophone slips
reach the manual's own words).

Ranking: a section whose whole title the question names (「スマートキーの電池交換の方法は？」 → 「スマート
キーの電池交換」, 「エンジン警告灯がついた」 → 「エンジン警告灯（チェックエンジン）」, the bracketed part aside)
gains :data:`TITLE_BONUS`, so a sibling that merely shares a word (「スマートキーが反応しないときの始動
方法」, 「充電警告灯」) no longer outranks it. When no chunk passes ``keep_score``, a chunk
above half of it that contains a distinctive word of the query verbatim (「ジャッキアップ」) is kept
(:func:`_literal_rescue`): a rare word the fused score underrates still finds its section.

:func:`warning_lines` is a section's ⚠ warnings and cautions, which an answer quoting that section
must carry (seed 000 §3's safety gate applied to information answers too).

Citation hygiene lives here, in one place:

* :func:`relative_cut` — citations drop hits scoring below ``CITATION_RATIO`` × the top score
  (tuned with ``python -m bench.citation_cut`` on ``bench/data/rag_queries.yaml``: see the constant);
* :func:`excerpt` — an excerpt is whole sentences (ending at 「。」「！」「？」 or a line end), never
  cut mid-sentence, without a trailing heading whose content was left out (「季節による影響」).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import re2

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.denials import strip_denials
from core.diagnosis.models import RagSource
from core.diagnosis.urgency_semantic import text_normal_case
from core.text.quoting import is_heading, join, quote, tokens
from core.text.untrusted import data_block

logger = logging.getLogger(__name__)

SPEC_TYPES = frozenset({"procedure", "specification", "general"})
DANGER_TYPES = frozenset({"danger", "warning"})
# Citations keep hits scoring at least this share of the top hit's score. Measured with
# ``python -m bench.citation_cut`` (103 manual queries, hybrid, keep_score 0.3, top 5), as citation
# precision / recall (queries still citing an expected section) / citations per query:
#   no cut 0.299 / 1.000 / 3.64;  0.70 0.459 / 0.990 / 2.31;  0.75 0.515 / 0.980 / 2.02;
#   0.80 0.580 / 0.960 / 1.72;  0.90 0.730 / 0.909 / 1.25.
# 0.70 is the highest ratio that loses at most one query's expected section (recall 0.99) while it
# drops 1.3 of the 3.6 citations a query and raises precision from 0.30 to 0.46.
CITATION_RATIO = 0.7
EXCERPT_CHARS = 200  # citation excerpt: whole sentences up to about this many characters
EXCERPT_MEMO = 1024  # excerpts remembered (manual sections: a few hundred per vehicle)
MAX_QUERY_CHARS = 1000  # a query longer than this is searched by its beginning
TITLE_BONUS = 0.3  # added when every word of the section's title is in the query
RESCUE_MIN_CHARS = 4  # a verbatim query word that can rescue a low-scoring section: katakana / kanji run this long
WARNING_CHARS = 360
_SENTENCE = re2.compile(r"[^。！？!?\n]+(?:[。！？!?]+|\n|$)|[。！？!?]+")
_PARENTHESES = re2.compile(r"（[^）]*）|\([^)]*\)")  # a section title's parenthesised part
_CONTENT_WORD = re2.compile(r"[\p{Han}\p{Katakana}ー]{2,}|[A-Za-z0-9]{2,}")


@dataclass
class RagHit:
    section_id: str
    section: str
    chapter: str
    page: int
    content_type: str
    has_warning: bool
    text: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hit_from(chunk: Any) -> RagHit:
    get = (lambda k, d=None: chunk.get(k, d)) if isinstance(chunk, dict) else (lambda k, d=None: getattr(chunk, k, d))
    return RagHit(section_id=str(get("section_id") or get("chunk_id") or ""), section=str(get("section", "")),
                  chapter=str(get("chapter", "")), page=int(get("page", 0) or 0),
                  content_type=str(get("content_type", "general")), has_warning=bool(get("has_warning", False)),
                  text=str(get("text", "")), score=float(get("score", 0.0) or 0.0))


@dataclass(frozen=True)
class VehicleFilter:
    """Which manuals a search may use: the session's vehicle id, else the catalogue vehicles
    matching its make / model / year (``ids`` empty = no restriction known)."""

    ids: tuple[str, ...] = ()
    make: str | None = None
    model: str | None = None
    year: int | None = None

    @classmethod
    def of(cls, ctx: DiagnosisContext, vehicle_id: str | None, make: str | None = None, model: str | None = None,
           year: int | None = None) -> "VehicleFilter":
        if vehicle_id:
            return cls((vehicle_id,), make, model, year)
        matching = tuple(v.vehicle_id for v in ctx.catalog
                         if (not make or v.make == make) and (not model or v.model == model) and (not year or v.year == year))
        return cls(matching if (make or model or year) else (), make, model, year)

    def allows(self, chunk: Any) -> bool:
        """False when the chunk's own metadata names another vehicle, make, model or year."""
        get = chunk.get if isinstance(chunk, dict) else (lambda k, d=None: getattr(chunk, k, d))
        vid = get("vehicle_id", None)
        if self.ids and vid and str(vid) not in self.ids:
            return False
        for name, wanted in (("make", self.make), ("model", self.model), ("year", self.year)):
            value = get(name, None)
            if wanted and value not in (None, "") and str(value) != str(wanted):
                return False
        return True


# Sound words that spell a part's name: 「キーキー」 is a squeal, not the key (「スマートキー」), 「カチカチ」 a click.
# They are searched as what they describe (issue #26: a brake squeal once found the smart-key section).
_SOUND_WORD = re2.compile(r"(キー|きー|キィ|きぃ){2,}ッ?|キーッ|きーっ|キィー|キュッ|きゅっ|キュルキュル|きゅるきゅる")


def _query_text(query: str) -> str:
    """What is searched: the query without the symptoms it denies (「警告灯は点いていないけど」 must not
    find the warning-lamp sections), with sound words read as sounds (:data:`_SOUND_WORD`), capped."""
    query = (query or "").strip()[:MAX_QUERY_CHARS]
    query = strip_denials(query).kept or query
    return _SOUND_WORD.sub(lambda _: " 鳴き 金属音 ", query).strip()  # (re2: a str replacement is bytes)


_CONTENT_WORD = re2.compile(r"[\p{Han}\p{Katakana}ー]{2,}|[A-Za-z0-9]{2,}")


def _expanded(retriever: Any, query: str) -> list[str]:
    """What to search for ``query``: the query itself, or — when the retriever's reading expansion
    (:mod:`core.rag.reading`) found manual words the query writes in kana or as a homophone — the
    expanded query and its content words alone (「ふゆのあさ まふらーから ゆげ」 → 「マフラー 湯気 …」),
    whose hits are merged (best score per section)."""
    expand = getattr(retriever, "expand_query", None)
    if expand is None:
        return [query]
    try:
        expanded = expand(query) or query
    except Exception as exc:  # noqa: BLE001 - an expansion failure costs recall, never the search
        logger.warning("query expansion failed: %s", exc)
        return [query]
    if expanded == query:
        return [query]
    words = _CONTENT_WORD.findall(query) + expanded[len(query):].split()
    return [expanded, " ".join(dict.fromkeys(words))]


def rag_search(ctx: DiagnosisContext, query: str, vehicle_id: str | None, *, make: str | None = None,
               model: str | None = None, year: int | None = None) -> list[RagHit]:
    """Kept hits for ``query`` (best first, one per section) from the vehicle's manuals; cached
    for the current request."""
    query = _query_text(query)
    if not query:
        return []
    vehicles = VehicleFilter.of(ctx, vehicle_id, make, model, year)
    if (make or model or year) and not vehicle_id and not vehicles.ids:
        return []  # the catalogue has no such vehicle: no manual applies
    key = (query, vehicle_id) if not (make or model or year) else (query, f"{vehicle_id}|{make}|{model}|{year}")
    if key in ctx.rag_cache:
        return list(ctx.rag_cache[key])
    retriever = ctx.get_retriever()
    hits: list[RagHit] = []
    if retriever is not None:
        chunks: list[Any] = []
        texts = _expanded(retriever, query)
        _prefetch(retriever, texts[1:])  # the second phrasing's vector is embedded beside the first's
        for vid in vehicles.ids or (None,):
            for text in texts:
                try:
                    chunks += list(retriever.search(text, vehicle_id=vid, n_results=ctx.thresholds.n_results))
                except Exception as exc:  # noqa: BLE001 - retrieval failure = no excerpts
                    logger.warning("manual search failed: %s", exc)
        asked = tokens(query)
        found = [_titled(_hit_from(chunk), asked) for chunk in chunks if vehicles.allows(chunk)]
        found.sort(key=lambda h: -h.score)
        seen: set[str] = set()
        for hit in found:
            if hit.score <= ctx.thresholds.keep_score or hit.section_id in seen:
                continue
            seen.add(hit.section_id)
            hits.append(hit)
        if not hits:
            hits = _literal_rescue(found, query, ctx.thresholds.keep_score)
        hits = sorted(hits, key=lambda h: -h.score)[:ctx.thresholds.n_results]
    ctx.rag_cache[key] = hits
    return list(hits)


def _prefetch(retriever: Any, texts: list[str]) -> None:
    """Let the retriever start the query vectors of searches about to run (``prefetch``, when it has one)."""
    prefetch = getattr(retriever, "prefetch", None)
    if prefetch is None or not texts:
        return
    try:
        prefetch(texts)
    except Exception as exc:  # noqa: BLE001 - the search embeds them itself
        logger.warning("query vectors not prefetched: %s", exc)


def _title_words(title: str) -> set[str]:
    return tokens(_PARENTHESES.sub("", title or ""))


def _titled(hit: RagHit, asked: set[str]) -> RagHit:
    """``hit`` with :data:`TITLE_BONUS` added when the query names its whole title."""
    words = _title_words(hit.section)
    if not words or not asked:
        return hit
    if words <= asked:
        hit.score = round(hit.score + TITLE_BONUS, 4)
    return hit


_DISTINCT = re2.compile(rf"[\p{{Katakana}}ー]{{{RESCUE_MIN_CHARS},}}|\p{{Han}}{{{RESCUE_MIN_CHARS - 1},}}")


def _literal_rescue(found: list[RagHit], query: str, keep_score: float) -> list[RagHit]:
    """The best chunk above half of ``keep_score`` whose text has a distinctive query word verbatim."""
    words = [w for w in _DISTINCT.findall(query or "")]
    for hit in found:
        if hit.score > keep_score / 2 and any(w in hit.text for w in words):
            return [hit]
    return []


_ITEM_LINE = re2.compile(r"^(?:・|[0-9０-９]{1,2}[\.．、)）]|[①-⑳]|【)")


def warning_lines(text: str, limit: int = WARNING_CHARS) -> str:
    """The section's ⚠ blocks: each 「⚠警告」/「⚠注意」 line with what it announces — the sentence right
    under a bare header, then its 「・」 items, numbered steps and 【…】 headings (with the sentence under
    a heading) — within ``limit`` characters (whole lines); empty when the section has none."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    picked: list[str] = []
    size = 0
    block = False
    previous = ""
    for line in lines:
        if line.startswith("⚠"):
            block, entry = True, line
        elif block and (_ITEM_LINE.match(line) or previous.startswith(("⚠", "【"))):
            entry = line
        else:
            block = False
            previous = line
            continue
        previous = line
        if size + len(entry) > limit:
            break
        picked.append(entry)
        size += len(entry)
    return "\n".join(picked)


def with_warnings(message: str, hit: RagHit | None) -> str:
    """``message`` with the ⚠ warnings and cautions of the section it answers from (``hit``) that it
    does not already carry, under the section's citation."""
    if hit is None:
        return message
    said = _normal(message)
    missing = [line for line in warning_lines(hit.text).splitlines() if _normal(line) not in said]
    if not missing:
        return message
    block = "\n".join(missing)
    return f"{message.rstrip()}\n\n取扱説明書「{hit.section}」の警告・注意:\n{block}\n{citation(hit.section, hit.page)}"


def shares_subject(hit: RagHit, question: str) -> bool:
    """Does the section speak of the question's subject: a word of the question other than kana
    (「4WD」「ジャッキ」「給油」) in its title or text?"""
    asked = {w for w in tokens(question) if _CONTENT_WORD.fullmatch(w)}
    if not asked:
        return True
    return bool(asked & tokens(f"{hit.section}\n{hit.text}"))


def rag_search_many(ctx: DiagnosisContext, queries: list[str], vehicle_id: str | None, limit: int = 8) -> list[RagHit]:
    """Hits of several queries merged (best score per section), best first, at most ``limit``.
    The diagnosing loop searches with the refined query *and* the original symptom, so that
    narrowing answers ("点灯したまま消えない") do not push the section about the symptom out."""
    best: dict[str, RagHit] = {}
    for query in dict.fromkeys(q for q in queries if q and q.strip()):
        for hit in rag_search(ctx, query, vehicle_id):
            if hit.section_id not in best or hit.score > best[hit.section_id].score:
                best[hit.section_id] = hit
    return sorted(best.values(), key=lambda h: -h.score)[:limit]


def with_named_case(ctx: DiagnosisContext, hits: list[RagHit], text: str, vehicle_id: str | None,
                    limit: int = 8) -> list[RagHit]:
    """``hits`` plus the manual's own section for the normal behaviour ``text`` names (「信号で止まると
    エンジンが切れて」 → 「停車中にエンジンが自動でかかる」 / 「アイドリングストップ…」), searched by the
    case's section titles when the text's own search missed it: the case can then be confirmed (or
    not) by the section itself."""
    case = text_normal_case(text)
    if case is None or any(any(w in h.section for w in case.sections) for h in hits):
        return hits
    extra = [h for h in rag_search(ctx, " ".join(case.sections), vehicle_id) if any(w in h.section for w in case.sections)]
    merged = {h.section_id: h for h in hits}
    for hit in extra[:1]:
        merged.setdefault(hit.section_id, hit)
    return sorted(merged.values(), key=lambda h: -h.score)[:limit]


# --- citation hygiene ------------------------------------------------------------------------------

def relative_cut(hits: list[RagHit], ratio: float = CITATION_RATIO) -> list[RagHit]:
    """``hits`` (best first) without those scoring below ``ratio`` × the top score."""
    if not hits:
        return []
    top = max(h.score for h in hits)
    return [h for h in hits if h.score >= ratio * top]


def sentences(text: str) -> list[str]:
    """Whole sentences of ``text``: each ends at 「。」「！」「？」 (or !, ?) or a line end."""
    return [m.strip() for m in _SENTENCE.findall(text or "") if m.strip()]


def excerpt(text: str, max_chars: int = EXCERPT_CHARS) -> str:
    """The opening of ``text`` in whole sentences, about ``max_chars`` long: never cut inside a
    sentence (the first sentence is kept whole even when longer), line breaks kept, and without a
    trailing heading whose content did not fit. Remembered per (section text, length) (bounded:
    :data:`EXCERPT_MEMO`): every turn quotes the same few sections of the manual again."""
    return _excerpt(text or "", max_chars)


@lru_cache(maxsize=EXCERPT_MEMO)
def _excerpt(text: str, max_chars: int) -> str:
    kept_lines: list[str] = []
    size = 0
    full = False
    for line in (text or "").splitlines():
        kept: list[str] = []
        for sentence in sentences(line):
            if (kept_lines or kept) and size + len(sentence) > max_chars:
                full = True
                break
            kept.append(sentence)
            size += len(sentence)
        if kept:
            kept_lines.append("".join(kept))
        if full:
            break
    while len(kept_lines) > 1 and is_heading(kept_lines[-1]):
        kept_lines.pop()
    return "\n".join(kept_lines)


def to_sources(hits: list[RagHit], *, ratio: float = CITATION_RATIO, contents: dict[str, str] | None = None) -> list[RagSource]:
    """Citations: the hits that survive :func:`relative_cut`, each with a whole-sentence excerpt
    (``contents[section_id]`` when given: the sentences an answer quoted)."""
    contents = contents or {}
    return [RagSource(section_id=h.section_id, section=h.section, page=h.page, score=round(h.score, 3),
                      chapter=h.chapter, content_type=h.content_type, has_warning=h.has_warning,
                      content=contents.get(h.section_id) or excerpt(h.text)) for h in relative_cut(hits, ratio)]


def cited_first(sources: list[RagSource], hits: list[RagHit], message: str) -> list[RagSource]:
    """``sources`` with the sections the ``message`` names (「取扱説明書「節」」) first — taken from
    ``hits`` when the relative cut dropped them: the section an answer quotes is always its first
    citation."""
    named = [h for h in hits if h.section and f"「{h.section}」" in (message or "")]
    have = {s.section_id for s in sources}
    extra = to_sources([h for h in named if h.section_id not in have], ratio=0.0)
    ordered = extra + list(sources)
    names = {h.section_id for h in named}
    return sorted(ordered, key=lambda s: 0 if s.section_id in names else 1)


def rag_context(hits: list[RagHit], max_chars: int = 900) -> str:
    if not hits:
        return "（該当する記載は見つかりませんでした）"
    blocks = []
    for h in hits:
        warn = " ⚠警告あり" if h.has_warning else ""
        blocks.append(data_block(f"[{h.section} p.{h.page} {h.content_type}{warn}] {h.section_id}\n"
                                 f"{excerpt(h.text, max_chars)}"))
    return "\n\n".join(blocks)


def citation(section: str, page: int | None) -> str:
    """「（取扱説明書「節」p.N）」"""
    return f"（取扱説明書「{section}」p.{page}）" if page else f"（取扱説明書「{section}」）"


# --- the RAG answer (seed 000 §10: RAG_ANSWER_PROMPT / NO_RAG_ANSWER_PROMPT → {answer, sources}) ---

NO_RECORD_ANSWER = "取扱説明書には該当する記載が見つかりませんでした。"
NO_RAG_ANSWER = (NO_RECORD_ANSWER + "症状が続く場合や不安な場合は、無理に運転を続けず、"
                 "いつ・どんなときに起きるかをメモして販売店にご相談ください。")


@dataclass
class RagAnswer:
    """The answer call's result: ``answer`` text and the cited ``sources`` (only retrieved sections,
    each with the whole sentences quoted from it). ``ok`` False = the call failed (no answer)."""

    ok: bool
    answer: str = ""
    sources: list[RagSource] | None = None
    grounded: bool = False  # True when made with RAG_ANSWER_PROMPT from retrieved sections
    error_type: str | None = None
    hits: list[RagHit] | None = None  # what the search found (set by ``llm_calls.query``)


def _normal(text: str) -> str:
    return "".join((text or "").split())


def grounded_sources(data: dict[str, Any], hits: list[RagHit]) -> list[RagSource]:
    """The model's ``sources`` kept only when they name a retrieved section (unknown ids are dropped,
    duplicates merged), scored from retrieval, in the model's order; ``content`` is kept only when
    each of its sentences really is in that section (else the section's own excerpt is shown)."""
    by_id = {h.section_id: h for h in hits}
    out: list[RagSource] = []
    for item in data.get("sources") or []:
        hit = by_id.get(str(item.get("section_id") or ""))
        if hit is None or any(s.section_id == hit.section_id for s in out):
            continue
        body = _normal(hit.text)
        quoted = [s for s in sentences(str(item.get("content") or "")) if s]
        content = "\n".join(quoted) if quoted and all(_normal(s) in body for s in quoted) else excerpt(hit.text)
        out.append(RagSource(section_id=hit.section_id, section=hit.section, page=hit.page, score=round(hit.score, 3),
                             chapter=hit.chapter, content_type=hit.content_type, has_warning=hit.has_warning,
                             content=content))
    return out


def merge_sources(answer_sources: list[RagSource] | None, sources: list[RagSource]) -> list[RagSource]:
    """The answer's sources first (with the sentences it quoted), then the other citations."""
    first = list(answer_sources or [])
    seen = {s.section_id for s in first}
    return first + [s for s in sources if s.section_id not in seen]


def _title_share(question_tokens: set[str], title: str) -> float:
    words = tokens(title)
    return len(words & question_tokens) / len(words) if words else 0.0


_HOW_TO = re2.compile(r"やり方|やりかた|方法|手順|仕方|しかた|どうやって|どうすれば|どうしたら|交換|入れ方|使い方")
_STEP_LINE = re2.compile(r"^(?:[0-9０-９]{1,2}[\.．、)）]|[①-⑳])")
PROCEDURE_CHARS = 600


def procedure_lines(text: str, limit: int = PROCEDURE_CHARS) -> list[str]:
    """The section's first run of numbered steps with the line just before it (what the steps need:
    「使用電池：リチウム電池 CR2032」), within ``limit`` characters; empty when it has none."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if _STEP_LINE.match(line)), None)
    if start is None:
        return []
    picked = [lines[start - 1]] if start > 0 and not lines[start - 1].startswith("⚠") else []
    size = sum(len(p) for p in picked)
    for line in lines[start:]:
        if not _STEP_LINE.match(line) or size + len(line) > limit:
            break
        picked.append(line)
        size += len(line)
    return picked


def offline_answer(request: Any) -> dict[str, Any]:
    """Offline policy of the ``rag_answer`` task: the whole sentences of the best section (score, plus
    a bonus for title words in the question) that answer the question (``core.text.quoting``), with the
    citation; the NO_RAG answer when nothing was found."""
    ctx = request.context or {}
    question = str(ctx.get("question") or "")
    hits = [h for h in ctx.get("hits") or [] if h.get("text")]
    if not hits:
        return {"answer": NO_RAG_ANSWER, "sources": []}
    asked = tokens(question[:MAX_QUERY_CHARS])
    # retrieval score, plus up to 0.5 when the section title's words are in the question
    preferred = [h for h in hits if h.get("section_id") and h.get("section_id") == ctx.get("preferred_section_id")]
    top = preferred[0] if preferred else max(
        hits, key=lambda h: h.get("score", 0) + 0.5 * _title_share(asked, str(h.get("section") or "")))
    lines = quote(top["text"], question, limit=2)
    if not lines:
        return {"answer": NO_RECORD_ANSWER, "sources": []}
    if _HOW_TO.search(question):  # a how-to question is answered with the section's steps
        lines += [line for line in procedure_lines(top["text"]) if line not in lines]
    quoted = join(lines)
    answer = f"取扱説明書「{top['section']}」（p.{top['page']}）には、次のように記載されています。\n{quoted}"
    return {"answer": answer, "sources": [{"section_id": top["section_id"], "section": top["section"],
                                           "page": top.get("page"), "content": "\n".join(lines)}]}
