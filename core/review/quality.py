"""Quality figures from the reviewers' loop, for 分析: the 👍 rate and the reviewers' verdicts over time by
flow, prompt version and model; how often each label was given; and the agreement of two reviewers on the
double-reviewed sample (percent agreement and Cohen's kappa, ``sklearn.metrics.cohen_kappa_score``).

Read from the store over one period (``since`` / ``until``, UTC ISO); pandas does the grouping. No Streamlit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.store.review import VERDICT_JA, VERDICTS
from core.text.jst import jst_date

GROUP_COLUMNS = {"flow": "フロー", "prompt_version": "プロンプト版", "model": "モデル"}


def _period(frame: pd.DataFrame, column: str, freq: str) -> pd.Series:
    days = pd.to_datetime(frame[column].map(jst_date))
    return days.dt.to_period(freq).dt.start_time.dt.date if freq != "D" else days.dt.date


def feedback_rates(store: Any, *, since: str | None = None, until: str | None = None, freq: str = "D",
                   by: tuple[str, ...] = ("flow", "prompt_version", "model")) -> pd.DataFrame:
    """期間 × ``by``: 👍, 👎 and 👍率 (share of thumbs-up among the ratings)."""
    rows = store.feedback_rows(since=since, until=until)
    columns = ["期間", *[GROUP_COLUMNS[b] for b in by], "👍", "👎", "👍率"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    frame["期間"] = _period(frame, "created_at", freq)
    frame["up"] = (frame["rating"] == "up").astype(int)
    frame["down"] = (frame["rating"] == "down").astype(int)
    out = frame.groupby(["期間", *by], dropna=False)[["up", "down"]].sum().reset_index()
    out["rate"] = (out["up"] / (out["up"] + out["down"])).round(3)
    out = out.rename(columns={**GROUP_COLUMNS, "up": "👍", "down": "👎", "rate": "👍率"})
    return out[columns]


def verdict_rates(store: Any, *, since: str | None = None, until: str | None = None, freq: str = "D",
                  by: tuple[str, ...] = ("flow", "prompt_version", "model")) -> pd.DataFrame:
    """期間 × ``by``: how many answers each verdict got, and the share judged 正しい."""
    rows = store.review_verdict_rows(since=since, until=until)
    names = [VERDICT_JA[v] for v in VERDICTS]
    columns = ["期間", *[GROUP_COLUMNS[b] for b in by], *names, "正答率"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    frame["期間"] = _period(frame, "created_at", freq)
    for verdict in VERDICTS:
        frame[VERDICT_JA[verdict]] = (frame["verdict"] == verdict).astype(int)
    out = frame.groupby(["期間", *by], dropna=False)[names].sum().reset_index()
    out["正答率"] = (out[VERDICT_JA["correct"]] / out[names].sum(axis=1)).round(3)
    return out.rename(columns=GROUP_COLUMNS)[columns]


def label_counts(store: Any, *, since: str | None = None, until: str | None = None) -> pd.DataFrame:
    """How many verdicts gave each label (most first)."""
    counts: dict[str, int] = {}
    for row in store.review_verdict_rows(since=since, until=until):
        for label in row.get("labels") or []:
            counts[label] = counts.get(label, 0) + 1
    frame = pd.DataFrame(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])), columns=["ラベル", "件数"])
    return frame


@dataclass(frozen=True)
class Agreement:
    items: int                    # answers reviewed by two reviewers
    agreed: int
    percent: float | None         # share of those where both gave the same verdict
    kappa: float | None           # Cohen's kappa over the verdicts (None when it is undefined)


def agreement(store: Any, *, since: str | None = None, until: str | None = None) -> Agreement:
    """Two reviewers on the same answers: the first two verdicts of each double-reviewed item."""
    from sklearn.metrics import cohen_kappa_score

    firsts: dict[int, list[str]] = {}
    for row in store.review_verdict_rows(since=since, until=until):
        firsts.setdefault(int(row["item_id"]), []).append(str(row["verdict"]))
    pairs = [v[:2] for v in firsts.values() if len(v) >= 2]
    if not pairs:
        return Agreement(0, 0, None, None)
    first, second = [p[0] for p in pairs], [p[1] for p in pairs]
    agreed = sum(a == b for a, b in pairs)
    kappa = None
    if len(set(first) | set(second)) > 1:
        kappa = float(cohen_kappa_score(first, second, labels=list(VERDICTS)))
    elif agreed == len(pairs):
        kappa = None  # one verdict only: chance agreement is total, kappa is undefined
    return Agreement(len(pairs), agreed, round(agreed / len(pairs), 3), None if kappa is None else round(kappa, 3))
