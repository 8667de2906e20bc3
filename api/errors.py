"""Japanese 422s for the API's routers: which parameter or body field is wrong and why, never the input
itself. A router names its fields (``labels``: only those are echoed back, anything else is ``body``) and
adds or overrides the texts of the validation error types it uses; ``japanese_errors(labels, texts)`` is its
``route_class``."""
from __future__ import annotations

from typing import Callable, Mapping

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

# pydantic's error types → what to fix, in Japanese ({…}: the error's context)
TEXTS = {
    "missing": "必須です",
    "string_too_short": "空にはできません",
    "string_too_long": "{max_length} 文字以内にしてください",
    "string_type": "文字列で指定してください",
    "int_type": "整数で指定してください",
    "int_parsing": "整数で指定してください",
    "literal_error": "{expected} のいずれかを指定してください",
    "list_type": "リストで指定してください",
    "too_long": "{max_length} 個以内にしてください",
    "greater_than_equal": "{ge} 以上にしてください",
    "less_than_equal": "{le} 以下にしてください",
    "extra_forbidden": "不明な項目です",
    "model_attributes_type": "JSON オブジェクトで送ってください",
    "model_type": "JSON オブジェクトで送ってください",
    "json_invalid": "JSON として読めません",
    "nul_character": "NUL 文字（U+0000）は使えません",
}


def describe(error: Mapping, texts: Mapping[str, str] = TEXTS) -> str:
    """One validation error as Japanese text (never the value sent)."""
    template = texts.get(str(error.get("type", "")))
    if template:
        try:
            return template.format(**(error.get("ctx") or {}))
        except (KeyError, IndexError, ValueError):
            pass
    return "不正な値です"


def invalid(fields: list[dict[str, str]], labels: Mapping[str, str]) -> JSONResponse:
    """422 naming each field (``{"field", "message", "type"}``) with its label."""
    listed = "、".join(f"{labels.get(f['field'], f['field'])}（{f['message']}）" for f in fields)
    return JSONResponse({"detail": f"リクエストの内容に誤りがあります: {listed}", "errors": fields}, status_code=422)


def invalid_request(exc: RequestValidationError, labels: Mapping[str, str],
                    texts: Mapping[str, str] = TEXTS) -> JSONResponse:
    """A request's validation errors, the first per field, as :func:`invalid`."""
    fields: dict[str, dict[str, str]] = {}
    for error in exc.errors():
        loc = tuple(error.get("loc") or ())
        name = loc[1] if len(loc) > 1 else ""
        name = name if isinstance(name, str) and name in labels else "body"  # an unknown key is not echoed
        fields.setdefault(name, {"field": name, "message": describe(error, texts), "type": str(error.get("type", ""))})
    return invalid(list(fields.values()), labels)


def japanese_errors(labels: Mapping[str, str], texts: Mapping[str, str] = TEXTS) -> type[APIRoute]:
    """A ``route_class`` whose validation errors are :func:`invalid_request`'s Japanese 422s."""

    class JapaneseErrors(APIRoute):
        def get_route_handler(self) -> Callable:
            handler = super().get_route_handler()

            async def route(request: Request):
                try:
                    return await handler(request)
                except RequestValidationError as exc:
                    return invalid_request(exc, labels, texts)

            return route

    return JapaneseErrors
