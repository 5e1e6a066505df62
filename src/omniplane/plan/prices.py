"""GPU prices per hour for capacity planning (the catalog's ``prices.yaml``, or ``--prices FILE``)
and the cost of a plan: per hour, and per 1,000 requests of each type.

A price file (``kind: prices``) lists ``prices``: each entry a ``gpu`` (a catalog kind or alias),
``usd_per_gpu_hour`` (> 0), and its ``source`` and ``date``; a user's file may instead give
``prices`` as a mapping ``GPU: USD``, its source being the file itself.

Cost per type (attribution, labelled in the output): the plan's hourly cost is split between the
types by the GPU-seconds their requests cost in the plan at full batch (cost model,
:func:`omniplane.plan.capacity.gpu_seconds`) times their share of the traffic; idle capacity is
spread in the same proportion. A type's cost per 1,000 requests is its part of the hourly cost
over its requests per hour (``R x pi_t x 3600``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omniplane.errors import InputError
from omniplane.spec import PlanSpec, load_gpus
from omniplane.spec.catalog import catalog_dir
from omniplane.spec.yamlio import load_yaml

MAX_PRICE = 1e4  # USD per GPU-hour: an assumption far above any list price


@dataclass(frozen=True)
class Price:
    gpu: str  # catalog name
    usd_per_gpu_hour: float
    source: str
    date: str


ATTRIBUTION = ("by the GPU-seconds each type's requests cost in the plan at full batch (cost model) times "
               "its share of the traffic; idle capacity spread in the same proportion")


def catalog_prices_path() -> Path:
    return catalog_dir() / "prices.yaml"


def load_prices(path: Path | None = None) -> dict[str, Price]:
    """Prices by catalog GPU name; ``path`` None: the catalog's. Errors name the file and field."""
    file = path or catalog_prices_path()
    data = load_yaml(file, "price file")
    return parse_prices(data, str(file), user=path is not None)


def _fail(file: str, field: str, what: str) -> InputError:
    return InputError(f"{file}: {field}: {what}")


def _number(file: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < float(value) <= MAX_PRICE:
        raise _fail(file, field, f"expected a price in USD per GPU-hour, a number > 0 and <= {MAX_PRICE:g}, "
                                 f"got {value!r}")
    return float(value)


def _gpu(file: str, field: str, value: Any) -> str:
    catalog = load_gpus()
    try:
        return catalog.get(str(value).strip()).name
    except KeyError:
        raise _fail(file, field, f"expected a catalog GPU kind or alias (omniplane gpus), got {value!r}; "
                                 f"kinds: {', '.join(catalog.names())}") from None


def parse_prices(data: Any, file: str, user: bool = True) -> dict[str, Price]:
    if not isinstance(data, Mapping):
        raise _fail(file, "(top level)", "expected a mapping with 'prices'")
    if data.get("kind", "prices") != "prices":
        raise _fail(file, "kind", f"expected 'prices', got {data.get('kind')!r}")
    unknown = sorted(set(data) - {"kind", "prices", "note"})
    if unknown:
        raise _fail(file, unknown[0], "unknown field; expected kind, prices, note")
    items = data.get("prices")
    out: dict[str, Price] = {}
    if isinstance(items, Mapping) and user:
        for key, value in items.items():
            name = _gpu(file, f"prices.{key}", key)
            out[name] = Price(name, _number(file, f"prices.{key}", value), f"user file {file}", "as given")
        if not out:
            raise _fail(file, "prices", "expected at least one GPU: USD entry")
        return out
    if not isinstance(items, list) or not items:
        raise _fail(file, "prices", "expected a list of entries (gpu, usd_per_gpu_hour, source, date)"
                                    + (" or a mapping GPU: USD" if user else ""))
    for k, item in enumerate(items):
        where = f"prices[{k}]"
        if not isinstance(item, Mapping):
            raise _fail(file, where, "expected a mapping with gpu, usd_per_gpu_hour, source, date")
        extra = sorted(set(item) - {"gpu", "usd_per_gpu_hour", "source", "date", "note"})
        if extra:
            raise _fail(file, f"{where}.{extra[0]}", "unknown field; expected gpu, usd_per_gpu_hour, source, "
                                                     "date, note")
        for need in ("gpu", "usd_per_gpu_hour", "source", "date"):
            if need not in item:
                if need in ("source", "date") and user:
                    continue
                raise _fail(file, f"{where}.{need}", "missing (every price needs its source and date)")
        name = _gpu(file, f"{where}.gpu", item["gpu"])
        if name in out:
            raise _fail(file, f"{where}.gpu", f"{name} priced twice")
        out[name] = Price(name, _number(file, f"{where}.usd_per_gpu_hour", item["usd_per_gpu_hour"]),
                          str(item.get("source", f"user file {file}")), str(item.get("date", "as given")))
    return out


def plan_hourly(spec: PlanSpec, prices: Mapping[str, Price]) -> tuple[float | None, dict[str, float]]:
    """``(USD per hour, {kind: USD per hour})`` of a plan's GPUs, each executor group at its own
    kind's price (a mixed fleet); None when a kind it uses has no price."""
    catalog = load_gpus()
    per: dict[str, float] = {}
    for kind, n in spec.gpus_by_kind().items():
        name = catalog.get(kind).name
        if name not in prices:
            return None, {}
        per[name] = per.get(name, 0.0) + prices[name].usd_per_gpu_hour * n
    return sum(per.values()), per


def costs(price: Price | None, gpus: int, rate: float, mix: Mapping[str, float],
          gpu_seconds: Mapping[str, float],
          hourly: float | None = None) -> tuple[float | None, dict[str, float | None]]:
    """``(USD per hour, {type: USD per 1,000 requests})`` of ``gpus`` GPUs serving ``rate``
    requests/s of ``mix`` (see the module docstring); None without a price. ``hourly`` (a mixed
    plan's :func:`plan_hourly`) replaces ``price x gpus``."""
    active = [t for t, f in mix.items() if f > 0]
    if hourly is None:
        if price is None:
            return None, dict.fromkeys(active, None)
        hourly = price.usd_per_gpu_hour * gpus
    weight = {t: mix[t] * gpu_seconds.get(t, 0.0) for t in active}
    total = sum(weight.values())
    per: dict[str, float | None] = {}
    for t in active:
        part = hourly * (weight[t] / total if total > 0 else mix[t])
        per[t] = part / (rate * mix[t] * 3600.0) * 1000.0
    return hourly, per
