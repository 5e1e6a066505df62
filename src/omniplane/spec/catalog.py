"""The catalog shipped inside the package: GPU kinds, model specs and example workloads."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def catalog_dir() -> Path:
    return Path(str(files("omniplane") / "catalog"))


def catalog_gpus_path() -> Path:
    return catalog_dir() / "gpus.yaml"


def catalog_model_paths() -> list[Path]:
    return sorted((catalog_dir() / "models").glob("*.yaml"))


def catalog_workload_paths() -> list[Path]:
    return sorted((catalog_dir() / "workloads").glob("*.yaml"))


def find_catalog_model(name: str) -> Path | None:
    path = catalog_dir() / "models" / f"{name.lower()}.yaml"
    return path if path.is_file() else None


def find_catalog_workload(name: str) -> Path | None:
    path = catalog_dir() / "workloads" / f"{name.lower()}.yaml"
    return path if path.is_file() else None


def all_catalog_files() -> list[Path]:
    return [catalog_gpus_path(), *catalog_model_paths(), *catalog_workload_paths()]
