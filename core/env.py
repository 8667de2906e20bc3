"""Numbers read from environment variables within bounds: an unset, unreadable or out-of-range value is
the default, never an error (a typo in a deployment's settings must not stop the console)."""
from __future__ import annotations

import os
from typing import Callable, Mapping, TypeVar

N = TypeVar("N", int, float)


def bounded(name: str, default: N, low: N, high: N, *, cast: Callable[[str], N] = float,
            environ: Mapping[str, str] | None = None) -> N:
    """``environ[name]`` (default ``os.environ``) as ``cast`` when ``low <= value <= high``, else ``default``."""
    raw = ((os.environ if environ is None else environ).get(name) or "").strip()
    try:
        value = cast(raw) if raw else default
    except ValueError:
        return default
    return value if low <= value <= high else default
