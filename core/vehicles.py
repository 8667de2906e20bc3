"""The vehicle catalog (``data/vehicles.json``): listing, lookup and display labels."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.paths import DATA_DIR

CATALOG_PATH = DATA_DIR / "vehicles.json"


@dataclass(frozen=True)
class Vehicle:
    vehicle_id: str
    make: str
    model: str
    year: int
    grade: str = ""
    powertrain: str = ""
    image: str = ""
    manual: str = ""

    @property
    def label(self) -> str:
        grade = f" {self.grade}" if self.grade else ""
        return f"{self.make} {self.model}（{self.year}年式{grade}）"


def load_catalog(path: Path | str = CATALOG_PATH) -> list[Vehicle]:
    items = json.loads(Path(path).read_text(encoding="utf-8"))
    fields = Vehicle.__dataclass_fields__
    return [Vehicle(**{k: v for k, v in item.items() if k in fields}) for item in items]


@lru_cache(maxsize=1)
def default_catalog() -> tuple[Vehicle, ...]:
    return tuple(load_catalog())


def find_vehicle(catalog: list[Vehicle] | tuple[Vehicle, ...], vehicle_id: str | None) -> Vehicle | None:
    return next((v for v in catalog if v.vehicle_id == vehicle_id), None)
