"""Command line: build or update the manual index (Chroma) from data/manuals and uploaded PDFs.

    python -m core.rag.ingest                       # index manuals that changed since last time
    python -m core.rag.ingest --reset               # drop the collection and rebuild everything
    python -m core.rag.ingest --vehicle ID          # re-index that vehicle's manual
    python -m core.rag.ingest --pdf FILE --vehicle ID [--password PW] [--user NAME]   # add a PDF

The store is the one the app uses (``KAIWA_CHROMA_PATH`` / ``CHROMA_HOST``, embedder from
``KAIWA_EMBEDDINGS``). Prints chunk counts per vehicle. Whoever can run this on the server holds
the admin role: a PDF goes through :mod:`core.rag.manual_admin` like an upload on the page, bound
to a vehicle of the catalogue (or of the manuals directory) and attributed to ``--user`` (default:
the login name, recorded as unverified).
"""
from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from pathlib import Path

from core.identity import ADMIN, OPERATOR, Identity
from core.rag import manual_admin
from core.rag import manual_retriever as mr
from core.vehicles import default_catalog


def _cli_user(name: str | None) -> Identity:
    if not name:
        try:
            name = getpass.getuser()
        except Exception:  # noqa: BLE001 - no login name in some containers
            name = "cli"
    return Identity(name=name, source="local", roles=frozenset({OPERATOR, ADMIN}))


def _known_vehicles(manuals_dir: Path) -> set[str]:
    return {v.vehicle_id for v in default_catalog()} | {p.stem for p in Path(manuals_dir).glob("*.json")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.rag.ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--vehicle", help="vehicle_id: re-index only this manual, or the target of --pdf")
    parser.add_argument("--pdf", type=Path, help="PDF (or DOCX/TXT) file to add to --vehicle")
    parser.add_argument("--password", help="password of an encrypted PDF")
    parser.add_argument("--user", help="who adds the PDF (recorded with it; default: the login name)")
    parser.add_argument("--reset", action="store_true", help="delete the collection first, then rebuild")
    parser.add_argument("--manuals", type=Path, default=None, help="manuals directory (default data/manuals)")
    args = parser.parse_args(argv)
    if args.pdf and not args.vehicle:
        parser.error("--pdf needs --vehicle")
    manuals_dir = args.manuals or mr.MANUALS_DIR
    started = time.perf_counter()
    retriever = mr.ManualRetriever()
    store = retriever.store
    print(f"collection {store.name} ({type(store.client).__name__}), {len(retriever)} chunks before")
    if args.reset:
        store.client.delete_collection(store.name)
        retriever = mr.ManualRetriever(embedder=retriever.embedder, tokenizer=retriever.tokenizer)
        print("collection reset")
    status = 0
    if args.vehicle and not args.pdf:
        path = Path(manuals_dir) / f"{args.vehicle}.json"
        if not path.exists():
            print(f"no manual {path}", file=sys.stderr)
            return 2
        n = retriever.index_manual(json.loads(path.read_text(encoding="utf-8")))
        retriever.store.set_meta(**{mr._HASH_KEY + args.vehicle: mr.manual_hash(path.read_bytes())})
        print(f"{args.vehicle}: {n} manual chunks indexed")
    elif not args.pdf or args.reset:
        done = retriever.sync_manuals(manuals_dir)
        for vehicle_id, n in sorted(done.items()):
            print(f"{vehicle_id}: {n} manual chunks indexed")
        if not done:
            print("manuals up to date")
    if args.pdf:
        report = manual_admin.add_manual(retriever, _cli_user(args.user), args.vehicle, args.pdf.name,
                                         args.pdf.read_bytes(), args.password, catalog=_known_vehicles(manuals_dir))
        for warning in report.warnings:
            print(f"warning: {warning}")
        if report.error:
            print(f"{args.pdf.name}: {report.error}", file=sys.stderr)
            status = 1
        else:
            print(f"{args.pdf.name}: {report.chunks} chunks from {report.pages or '?'} pages -> {args.vehicle}")
    counts: dict[str, int] = {}
    for chunk in retriever.store.all_chunks():
        counts[chunk.vehicle_id] = counts.get(chunk.vehicle_id, 0) + 1
    for vehicle_id, n in sorted(counts.items()):
        print(f"  {vehicle_id}: {n} chunks")
    print(f"total {sum(counts.values())} chunks, {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
