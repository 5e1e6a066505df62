"""The catalog shipped inside the package: GPU kinds, model specs and example workloads."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from types import MappingProxyType

# Traces shipped in ``omniplane/data`` (see data/README.md for sources and licences):
# name -> (path under data/, format).
SHIPPED_TRACES = MappingProxyType({
    "azure-conv": ("azure-llm-2023/AzureLLMInferenceTrace_conv.csv", "azure"),
    "azure-code": ("azure-llm-2023/AzureLLMInferenceTrace_code.csv", "azure"),
    "mooncake-conversation": ("mooncake/conversation_trace.jsonl", "mooncake"),
    "servegen-mm-image": ("servegen-mm-image", "servegen"),
})


def catalog_dir() -> Path:
    return Path(str(files("omniplane") / "catalog"))


def catalog_gpus_path() -> Path:
    return catalog_dir() / "gpus.yaml"


def catalog_model_paths() -> list[Path]:
    return sorted((catalog_dir() / "models").glob("*.yaml"))


def catalog_workload_paths() -> list[Path]:
    return sorted((catalog_dir() / "workloads").glob("*.yaml"))


def catalog_plan_paths() -> list[Path]:
    return sorted((catalog_dir() / "plans").glob("*.yaml"))


def find_catalog_model(name: str) -> Path | None:
    path = catalog_dir() / "models" / f"{name.lower()}.yaml"
    return path if path.is_file() else None


def find_catalog_workload(name: str) -> Path | None:
    path = catalog_dir() / "workloads" / f"{name.lower()}.yaml"
    return path if path.is_file() else None


def data_dir() -> Path:
    return Path(str(files("omniplane") / "data"))


def find_trace(ref: str, base_dir: Path | None = None) -> tuple[Path, str | None]:
    """A trace by shipped name (with its format) or by path relative to ``base_dir`` (format
    None: the caller says it). Raises FileNotFoundError naming what was looked for."""
    if ref in SHIPPED_TRACES:
        rel, fmt = SHIPPED_TRACES[ref]
        return data_dir() / rel, fmt
    path = Path(ref)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists():
        raise FileNotFoundError(
            f"no trace {ref!r}: not a shipped trace ({', '.join(SHIPPED_TRACES)}) and no file {path}"
        )
    return path, None


def catalog_layout_paths() -> list[Path]:
    """vLLM-Omni's stock stage layouts (omniplane.spec.layout)."""
    return sorted((catalog_dir() / "layouts" / "vllm-omni").glob("*.yaml"))


def find_catalog_layout(model: str) -> Path | None:
    """The stock vLLM-Omni layout file of catalog model ``model`` (None: vLLM-Omni has none)."""
    path = catalog_dir() / "layouts" / "vllm-omni" / f"{model.lower()}.yaml"
    return path if path.is_file() else None


def all_catalog_files() -> list[Path]:
    return [catalog_gpus_path(), *catalog_model_paths(), *catalog_workload_paths(),
            *catalog_plan_paths(), *catalog_layout_paths()]
