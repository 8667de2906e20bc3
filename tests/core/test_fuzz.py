"""Property tests on hostile text: parsing and validation never raise and never accept invalid
output; masking never raises, is idempotent, leaves nothing it would find, and stays linear."""
import json
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from core.knowledge.turn import entry_schema, turn_schema
from core.parsing import parse_structured_output, parse_with_stage
from core.schemas import load_schema
from core.text.pii import find_pii, find_spans, mask_text, scrub
from core.validation import parse_and_validate_turn, validate_json

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- text that looks like model output -----------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
noise = st.lists(st.sampled_from(list('{}[]"`\\:,\n jsonあ。') + ["```", "```json\n", "null"]), max_size=20).map("".join)
model_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda pre, value, post: f"{pre}{json.dumps(value, ensure_ascii=False)}{post}", noise, json_values, noise),
    st.builds(lambda pre, value: f"{pre}```json\n{json.dumps(value)}\n```", noise, json_values),
    st.lists(noise, max_size=6).map("".join),
)


@FUZZ
@given(model_text)
def test_parse_structured_output_never_raises_and_returns_only_real_objects(text):
    data = parse_structured_output(text)
    outcome = parse_with_stage(text)
    assert data == outcome.data
    if data is None:
        assert outcome.stage is None
        return
    assert isinstance(data, dict)
    # whatever was returned is a JSON object written somewhere in the text
    assert outcome.stage in ("direct", "code_block", "brace_extraction")
    assert json.loads(json.dumps(data)) == data


@FUZZ
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_a_json_object_is_found_directly_and_inside_prose(value):
    text = json.dumps(value, ensure_ascii=False)
    assert parse_structured_output(text) == value
    assert parse_structured_output(f"以下です。\n{text}\nよろしく") == value


INTENT = load_schema("faq_intent")
intent_like = st.fixed_dictionaries(
    {"intent_type": st.sampled_from(["faq", "procedure", "question", "oos", "other", ""]),
     "confidence": st.one_of(st.floats(allow_nan=False), st.text(max_size=3)),
     "query": st.text(max_size=10), "keywords": st.lists(st.text(max_size=5), max_size=10),
     "reason": st.text(max_size=10)},
    optional={"extra": json_values})
intent_text = st.one_of(intent_like.map(json.dumps), intent_like.map(lambda d: json.dumps(d)[:-1]), model_text)


@FUZZ
@given(intent_text)
def test_validation_never_raises_and_never_accepts_invalid(text):
    result = validate_json(text, INTENT)
    if result.ok:
        parsed = json.loads(text)
        assert isinstance(parsed, dict) and Draft202012Validator(INTENT).is_valid(parsed)
        assert result.data == parsed
    else:
        assert result.error_type and result.errors


TURN, ENTRY = turn_schema(), entry_schema()


@FUZZ
@given(model_text)
def test_turn_validation_never_raises(text):
    result = parse_and_validate_turn(text, TURN, ENTRY)
    if result.ok:
        assert Draft202012Validator(TURN).is_valid(json.loads(text)) and result.assistant_message.strip()


# ---- text that looks like personal data ----------------------------------------------------------

FRAGMENTS = ["090", "1234", "5678", "03", "0120", "4111", "81", "+", "〒", "-", "‐", "ー", "−", "－", " ", "  ",
             ".", "(", ")", "（", "）", "０", "９", "１２３４", "@", "＠", "(at)", "taro", ".com", "example", "ｊｐ",
             "\u200b", "\u2060", "\n", "東京都", "渋谷区", "神南", "六丁目", "十番", "一号", "丁目", "番地", "市", "区",
             "sk-", "ｓｋ－", "abcdefgh", "Bearer ", "Basic ", "dXNlcjpwYXNz", "Authorization: ", "api_key=",
             "password: ", "\"", "'", "https://", "u:p@", "?api-key=", "[秘匿]", "[電話番号]", "[住所]", "あ", "。",
             "e", "f", "a456-", "12d3-"]
pii_text = st.one_of(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join), st.text(max_size=80))


@FUZZ
@given(pii_text)
def test_masking_is_idempotent_and_leaves_nothing_it_would_find(text):
    once = scrub(text)
    assert scrub(once) == once
    assert find_pii(once) == []
    assert mask_text(text) == once


@FUZZ
@given(pii_text)
def test_findings_are_ordered_spans_of_the_original(text):
    spans = find_spans(text)
    assert all(0 <= f.start < f.end <= len(text) for f in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join))
def test_masking_stays_linear_on_long_repetitions(seed):
    text = (seed * (100_000 // len(seed) + 1))[:100_000]
    start = time.perf_counter()
    masked = mask_text(text)
    assert time.perf_counter() - start < 10  # linear: well under a second; quadratic patterns took minutes
    assert mask_text(masked) == masked
