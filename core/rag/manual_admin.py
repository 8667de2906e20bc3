"""Managing the shared manual index for a user: upload, replace, delete, rebuild — admin only.

Every diagnosis cites what is in the index, so changing it needs the ``manual.write`` permission
(:mod:`core.identity`); the check lives here, not in the page, so an API or CLI going through these
functions cannot skip it (:class:`PermissionError` otherwise). An uploaded manual must be bound to a
vehicle of the catalogue and is attributed on every chunk's metadata (``records.ATTRIBUTION_KEYS``:
uploader's user_id and label, UTC time, file sha256), so every replica sharing the index sees who
added it. :func:`list_manuals` (no permission needed) reads the store fresh and groups chunks into
one :class:`ManualInfo` per (vehicle, source).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from core.identity import Identity, clean_value
from core.rag.records import IngestReport
from core.vehicles import default_catalog

PERMISSION = "manual.write"
MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # the page's server.maxUploadSize too
MAX_NAME_CHARS = 120
NOT_ALLOWED = "マニュアルの追加・置き換え・削除・再構築は管理者だけが行えます。"
NO_VEHICLE = "登録先の車両をカタログから選んでください。"
TOO_LARGE = f"ファイルが大きすぎます（上限 {MAX_UPLOAD_BYTES // (1024 * 1024)} MB）。"
BAD_NAME = "ファイル名が空か、使えない文字だけでできています。"


@dataclass(frozen=True)
class ManualInfo:
    """One indexed manual: the vehicle's manual data (``kind="manual"``) or an uploaded file."""

    vehicle_id: str
    source: str  # "manual" or "pdf:<name>" (as in the chunk metadata)
    chunks: int
    uploaded_by: str | None = None  # Identity.user_id
    uploaded_by_label: str | None = None
    uploaded_at: str | None = None  # UTC ISO 8601
    sha256: str | None = None

    @property
    def kind(self) -> str:
        return "manual" if self.source == "manual" else "upload"

    @property
    def name(self) -> str:
        """The uploaded file name ("" for the vehicle's manual data)."""
        return self.source.split(":", 1)[1] if self.source.startswith("pdf:") else ""


def require(identity: Identity, permission: str = PERMISSION) -> None:
    can = None if identity is None or isinstance(identity, str) else getattr(identity, "can", None)
    if not callable(can) or can(permission) is not True:  # fail closed: None, a string, no role
        raise PermissionError(NOT_ALLOWED)


def _catalog_ids(catalog: Iterable[Any] | None) -> set[str]:
    if catalog is None:
        catalog = default_catalog()
    return {str(getattr(v, "vehicle_id", v)) for v in catalog}


def clean_file_name(name: str) -> str:
    """The last path component of an uploaded file name, control characters removed, capped."""
    raw = str(name or "")[-2000:].replace("\\", "/").rsplit("/", 1)[-1]
    suffix = clean_value(Path(raw).suffix[:12]).replace(" ", "")
    stem = clean_value(raw[:len(raw) - len(Path(raw).suffix)] if Path(raw).suffix else raw)
    base = (stem[:MAX_NAME_CHARS - len(suffix)] + suffix).strip()
    return base if base.strip(".") else ""


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def add_manual(retriever: Any, identity: Identity, vehicle_id: str | None, name: str, data: bytes,
               password: str | None = None, *, replaces: str | None = None, catalog: Iterable[Any] | None = None,
               clock: Callable[[], datetime] = _utc_now) -> IngestReport:
    """Index an uploaded document for ``vehicle_id`` (which must be in the catalogue), attributed
    to ``identity``. Re-uploading the same file name for the vehicle replaces it; ``replaces`` (the
    ``source`` of another upload of that vehicle) is deleted once the new file is indexed.
    Problems with the file or the vehicle come back on the report; missing permission raises."""
    require(identity)
    clean = clean_file_name(name)
    report = IngestReport(vehicle_id=str(vehicle_id or ""), name=clean or str(name or "")[:MAX_NAME_CHARS])
    if not vehicle_id or str(vehicle_id) not in _catalog_ids(catalog):
        report.error = NO_VEHICLE
        return report
    if not clean:
        report.error = BAD_NAME
        return report
    if len(data) > MAX_UPLOAD_BYTES:
        report.error = TOO_LARGE
        return report
    attribution = {"uploaded_by": identity.user_id, "uploaded_by_label": identity.label,
                   "uploaded_at": clock().astimezone(timezone.utc).isoformat(timespec="seconds"),
                   "sha256": hashlib.sha256(data).hexdigest()}
    report = retriever.index_pdf(str(vehicle_id), clean, data, password, attribution=attribution)
    if report.ok and replaces and replaces.startswith("pdf:") and replaces != f"pdf:{clean}":
        retriever.remove_source(str(vehicle_id), replaces)
    return report


def delete_manual(retriever: Any, identity: Identity, vehicle_id: str, source: str) -> int:
    """Remove an uploaded manual (``source`` ``"pdf:<name>"``) of ``vehicle_id``; returns the
    number of chunks removed. The vehicles' manual data is not deletable here (rebuild instead)."""
    require(identity)
    if not str(source).startswith("pdf:"):
        raise ValueError("only uploaded manuals (source 'pdf:<name>') can be deleted")
    return retriever.remove_source(str(vehicle_id), str(source))


def rebuild_index(retriever: Any, identity: Identity, *, force: bool = False,
                  manuals_dir: Path | None = None) -> dict[str, int]:
    """Re-index the manual data files that changed (all with ``force``); uploads stay."""
    require(identity)
    return retriever.sync_manuals(manuals_dir, force=force)


def list_manuals(retriever: Any) -> list[ManualInfo]:
    """Every indexed manual, read fresh from the store (sorted by vehicle, data before uploads).
    Raises :class:`~core.rag.store.IndexUnavailable` while the collection is being rebuilt."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for meta in retriever.store.metadatas():
        key = (str(meta.get("vehicle_id", "")), str(meta.get("source", "manual")))
        groups.setdefault(key, []).append(meta)
    out = []
    for (vehicle_id, source), metas in groups.items():
        first = next((m for m in metas if m.get("uploaded_by")), {})
        out.append(ManualInfo(vehicle_id=vehicle_id, source=source, chunks=len(metas),
                              uploaded_by=first.get("uploaded_by"), uploaded_by_label=first.get("uploaded_by_label"),
                              uploaded_at=first.get("uploaded_at"), sha256=first.get("sha256")))
    out.sort(key=lambda m: (m.vehicle_id, m.source != "manual", m.source))
    return out
