"""Loading spec files: parse, validate at load time, resolve cross-file references.

Errors are :class:`SpecError` listing ``file:line:col: field: message`` for every issue found.
References to other files resolve relative to the referring file; a bare name resolves to the
shipped catalog.
"""

from __future__ import annotations

import os
import types
import typing
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ValidationError

from omniplane.errors import unknown_name
from omniplane.spec.catalog import (
    catalog_gpus_path,
    find_catalog_layout,
    find_catalog_model,
    find_catalog_workload,
)
from omniplane.spec.crosscheck import check_plan, check_trace_file, check_workload
from omniplane.spec.errors import Loc, SpecError, SpecFieldError, SpecIssue
from omniplane.spec.gpu import GPUCatalog, GPUKind
from omniplane.spec.layout import VllmOmniLayout
from omniplane.spec.model import ModelSpec
from omniplane.spec.plan import COLLECT, PlanSpec
from omniplane.spec.workload import TraceArrivals, WorkloadSpec
from omniplane.spec.yamlio import Positions, dump_yaml, read_yaml

T = TypeVar("T", bound=BaseModel)
Document = ModelSpec | WorkloadSpec | GPUCatalog | PlanSpec | VllmOmniLayout
KINDS: dict[str, type[BaseModel]] = {
    "model": ModelSpec,
    "workload": WorkloadSpec,
    "gpus": GPUCatalog,
    "plan": PlanSpec,
    "vllm-omni-layout": VllmOmniLayout,
}


# ---- validation of parsed data ------------------------------------------------------------
def parse(cls: type[T], data: Any, file: str | None = None, positions: Positions | None = None) -> T:
    """Validate ``data`` as ``cls``; raise :class:`SpecError` naming file, field and position."""
    if not isinstance(data, dict):
        raise SpecError(file, [_not_a_mapping(cls, data)])
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        issues = [_issue_from_pydantic(cls, data, err) for err in exc.errors()]
    except SpecFieldError as exc:
        issues = exc.issues
    raise SpecError(file, [_place(i, data, positions or {}) for i in issues])


def _document_kind(cls: type[BaseModel]) -> str | None:
    field = cls.model_fields.get("kind")
    return str(field.default) if field is not None and isinstance(field.default, str) else None


def _not_a_mapping(cls: type[BaseModel], data: Any) -> SpecIssue:
    kind = _document_kind(cls)
    want = f"a {kind} spec: a mapping with 'kind: {kind}' at the top" if kind else "a mapping"
    got = "an empty file" if data is None else f"a {_yaml_type(data)}"
    return SpecIssue((), f"expected {want}, got {got}", 1, 1)


def _yaml_type(data: Any) -> str:
    if isinstance(data, list):
        return "list"
    if isinstance(data, bool):
        return "boolean"
    if isinstance(data, int | float):
        return "number"
    return "string" if isinstance(data, str) else type(data).__name__


def _clean_loc(loc: tuple[Any, ...], data: Any, keep_last: bool) -> Loc:
    """Drop union tags and validator names that pydantic inserts into locations."""
    out: list[str | int] = []
    cur = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(cur, dict):
            if part in cur:
                out.append(part)
                cur = cur[part]
            elif last and keep_last:
                out.append(part)
            continue
        if isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
            continue
        if last and keep_last and isinstance(part, str | int):
            out.append(part)
    return tuple(out)


def _issue_from_pydantic(cls: type[BaseModel], data: Any, err: Any) -> SpecIssue:
    kind = err["type"]
    keep_last = kind in ("missing", "extra_forbidden")
    loc = _clean_loc(tuple(err["loc"]), data, keep_last)
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "missing":
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        allowed = _allowed_fields(cls, loc[:-1], data)
        close = get_close_matches(str(loc[-1]), allowed or [], n=1, cutoff=0.75)
        msg = (f"unknown field {loc[-1]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
               + (f"; allowed: {', '.join(allowed)}" if allowed else ""))
    elif kind == "too_short" and "min_length" in err.get("ctx", {}):
        ctx = err["ctx"]
        msg = f"expected at least {ctx['min_length']} item(s), got {ctx.get('actual_length', 0)}"
    elif kind == "union_tag_not_found":
        tag = str(err.get("ctx", {}).get("discriminator", "")).strip("'")
        tags = _tags(cls, loc, data, tag)
        msg = f"needs a {tag!r} field saying which kind it is" + (
            f": one of {', '.join(tags)}" if tags else "")
    else:
        given = err.get("input")
        if isinstance(given, str | int | float | bool) or given is None:
            msg += f" (got {given!r})"
    return SpecIssue(loc, msg)


def _annotation_at(cls: type[BaseModel], loc: Loc, data: Any) -> tuple[Any, Any]:
    """Best effort: (the type annotation, the data) at ``loc``; (None, None) when it cannot be
    told. Unions are left unresolved at ``loc`` itself."""
    ann: Any = cls
    cur = data
    for part in loc:
        ann = _resolve(ann, cur)
        if ann is None:
            return None, None
        if isinstance(ann, type) and issubclass(ann, BaseModel) and isinstance(part, str):
            field = ann.model_fields.get(part)
            if field is None:
                return None, None
            ann = field.annotation
        else:
            origin, args = typing.get_origin(ann), typing.get_args(ann)
            if origin is list and args:
                ann = args[0]
            elif origin is dict and len(args) == 2:
                ann = args[1]
            else:
                return None, None
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            cur = cur[part]
        else:
            cur = None
    return ann, cur


def _allowed_fields(cls: type[BaseModel], loc: Loc, data: Any) -> list[str] | None:
    """Best effort: the field names accepted at ``loc`` (None when it cannot be told)."""
    ann, cur = _annotation_at(cls, loc, data)
    ann = _resolve(ann, cur)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [f.alias or name for name, f in ann.model_fields.items()]
    return None


def _tags(cls: type[BaseModel], loc: Loc, data: Any, tag: str) -> list[str]:
    """The values the discriminator field ``tag`` may take at ``loc`` (empty when unknown)."""
    ann, _ = _annotation_at(cls, loc, data)
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    out: list[str] = []
    for member in typing.get_args(ann):
        field = member.model_fields.get(tag) if isinstance(member, type) and issubclass(member, BaseModel) \
            else None
        if field is not None:
            out += [str(v) for v in typing.get_args(field.annotation)]
    return out


def _resolve(ann: Any, cur: Any) -> Any:
    """Unwrap Annotated/Optional; pick a union member by its ``dist``/``process``/``policy`` tag."""
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    origin = typing.get_origin(ann)
    if origin is Union or origin is types.UnionType:
        members = [a for a in typing.get_args(ann) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if isinstance(cur, dict):
            for m in models:
                for tag in ("dist", "process", "policy"):
                    f = m.model_fields.get(tag)
                    if f is not None and tag in cur and cur[tag] in typing.get_args(f.annotation):
                        return m
        if len(members) == 1:
            return _resolve(members[0], cur)
        return models[0] if len(models) == 1 else None
    return ann


def _place(issue: SpecIssue, data: Any, positions: Positions) -> SpecIssue:
    """Attach the line/column of the issue's field, or of its nearest present parent."""
    loc = issue.loc
    for n in range(len(loc), -1, -1):
        if loc[:n] in positions:
            line, col = positions[loc[:n]]
            return SpecIssue(loc, issue.message, line, col)
    return issue


# ---- files ------------------------------------------------------------------------------------
def load_document(path: str | Path) -> Document:
    """Load any spec file by its top-level ``kind``, validating cross-file references too."""
    path = Path(path)
    data, positions = read_yaml(path)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {_yaml_type(data)}"
        raise SpecError(str(path), [SpecIssue((), f"expected a spec: a mapping with a top-level "
                                                  f"kind ({', '.join(sorted(KINDS))}), got {got}", 1, 1)])
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        where = positions.get(("kind",), positions.get((), (1, 1)))
        raise SpecError(
            str(path),
            [SpecIssue(("kind",), f"expected kind to be one of {sorted(KINDS)} (got {kind!r})",
                       *where)],
        )
    if kind == "workload":
        return load_workload(path).spec
    if kind == "plan":
        return load_plan(path).spec
    return typing.cast(Document, parse(KINDS[kind], data, str(path), positions))


def _load(cls: type[T], path: Path) -> tuple[T, Positions]:
    data, positions = read_yaml(path)
    want = _document_kind(cls)
    kind = data.get("kind") if isinstance(data, dict) else None
    if want is not None and isinstance(kind, str) and kind in KINDS and kind != want:
        line, col = positions.get(("kind",), (1, 1))
        raise SpecError(str(path), [SpecIssue(("kind",), f"this is a {kind} spec; expected a {want} "
                                                         f"spec (kind: {want})", line, col)])
    return parse(cls, data, str(path), positions), positions


def load_model(ref: str | Path, base_dir: Path | None = None) -> ModelSpec:
    """A model by catalog name (``qwen3-omni``) or by file path (relative to ``base_dir``)."""
    return _load(ModelSpec, _resolve_model_path(ref, base_dir))[0]


def _resolve_model_path(ref: str | Path, base_dir: Path | None) -> Path:
    text = str(ref)
    if text.endswith((".yaml", ".yml")) or "/" in text:
        p = Path(text)
        return p if p.is_absolute() or base_dir is None else base_dir / p
    found = find_catalog_model(text)
    if found is None:
        from omniplane.spec.catalog import catalog_model_paths

        known = [p.stem for p in catalog_model_paths()]
        msg = str(unknown_name("catalog model", text, known)).replace("unknown catalog model",
                                                                        "no catalog model named", 1)
        raise KeyError(f"{msg} (omniplane models)")
    return found


def load_gpus(path: str | Path | None = None) -> GPUCatalog:
    return _load(GPUCatalog, Path(path) if path else catalog_gpus_path())[0]


def load_layout(model: str) -> VllmOmniLayout | None:
    """The catalog's stock vLLM-Omni layout of ``model`` (None: vLLM-Omni has none;
    :mod:`omniplane.spec.layout`)."""
    path = find_catalog_layout(model)
    if path is None:
        return None
    layout = _load(VllmOmniLayout, path)[0]
    if layout.model != model.lower():
        raise ValueError(f"{path}: model: expected {model.lower()!r}, got {layout.model!r}")
    return layout


@dataclass(frozen=True)
class ResolvedWorkload:
    spec: WorkloadSpec
    model: ModelSpec
    path: Path | None

    @property
    def base_dir(self) -> Path | None:
        return self.path.parent if self.path else None


@dataclass(frozen=True)
class ResolvedPlan:
    spec: PlanSpec
    model: ModelSpec
    gpu: GPUKind
    path: Path | None


def _model_ref(spec_model: str, path: Path | None, positions: Positions, file: str) -> ModelSpec:
    line, col = positions.get(("model",), (None, None))
    try:
        model_path = _resolve_model_path(spec_model, path.parent if path else None)
    except KeyError as exc:
        raise SpecError(file, [SpecIssue(("model",), str(exc.args[0]), line, col)]) from None
    if not model_path.is_file():
        raise SpecError(file, [SpecIssue(("model",), f"no model file {model_path} (a path is relative "
                                                     "to this file) and no catalog model of that name",
                                         line, col)])
    return _load(ModelSpec, model_path)[0]


def load_workload(path: str | Path) -> ResolvedWorkload:
    path = Path(path)
    spec, positions = _load(WorkloadSpec, path)
    model = _model_ref(spec.model, path, positions, str(path))
    return resolve_workload(spec, model, path, positions)


def resolve_workload(
    spec: WorkloadSpec, model: ModelSpec, path: Path | None = None, positions: Positions | None = None
) -> ResolvedWorkload:
    issues = check_workload(spec, model)
    if isinstance(spec.arrival, TraceArrivals):
        issues += check_trace_file(spec.arrival, path.parent if path else None)
    if issues:
        raise SpecError(str(path) if path else None, [_place(i, None, positions or {}) for i in issues])
    return ResolvedWorkload(spec, model, path)


def load_plan(path: str | Path, gpus: GPUCatalog | None = None) -> ResolvedPlan:
    path = Path(path)
    try:
        spec, positions = _load(PlanSpec, path)
    except SpecError as exc:
        raise _every_plan_issue(path, exc, gpus) from None
    model = _model_ref(spec.model, path, positions, str(path))
    return resolve_plan(spec, model, gpus or load_gpus(), path, positions)


def _every_plan_issue(path: Path, first: SpecError, gpus: GPUCatalog | None) -> SpecError:
    """A plan whose own checks failed (route sums, unknown nodes, the budget) is checked against
    its model too, so a hand-edited plan gets every problem at once; ``first`` when its fields
    themselves are invalid (nothing more can be checked then)."""
    data, positions = read_yaml(path)
    own: list[tuple[Loc, str]] = []
    try:
        spec = PlanSpec.model_validate(data, context={COLLECT: own})
    except (ValidationError, SpecFieldError, TypeError, ValueError):
        return first
    if not own:
        return first
    issues = [SpecIssue(tuple(loc), msg) for loc, msg in own]
    try:
        model = _model_ref(spec.model, path, positions, str(path))
        issues += check_plan(spec, model, gpus or load_gpus())
    except SpecError as exc:
        issues += exc.issues
    except (KeyError, ValueError, TypeError):  # a check that needs the plan's own issues fixed
        pass
    placed = [_place(i, data, positions) for i in issues]
    return SpecError(str(path), sorted(placed, key=lambda i: (i.line or 0, i.column or 0)))


def resolve_plan(
    spec: PlanSpec,
    model: ModelSpec,
    gpus: GPUCatalog,
    path: Path | None = None,
    positions: Positions | None = None,
) -> ResolvedPlan:
    issues = check_plan(spec, model, gpus)
    if issues:
        raise SpecError(str(path) if path else None, [_place(i, None, positions or {}) for i in issues])
    return ResolvedPlan(spec, model, gpus.get(spec.gpu), path)


def workload_ref(workload: ResolvedWorkload, relative_to: Path | None = None) -> str:
    """How a plan file names its workload: the catalog name of a catalog workload, else the
    file's path (relative to ``relative_to``, the plan file's folder, when given)."""
    path = workload.path
    if path is None:
        return workload.spec.name
    found = find_catalog_workload(path.stem)
    if found is not None and found.resolve() == path.resolve():
        return path.stem
    if relative_to is not None:
        return os.path.relpath(path.resolve(), relative_to.resolve())
    return str(path.resolve())


def plan_workload(plan: ResolvedPlan) -> ResolvedWorkload | None:
    """The workload a plan file names in ``prediction.workload`` (catalog name, or a file
    relative to the plan file), checked to be for the plan's model; None when the plan names
    none. Errors name the plan file and the field."""
    if plan.spec.prediction is None:
        return None
    ref = plan.spec.prediction.workload
    file = str(plan.path) if plan.path else None
    found = find_catalog_workload(ref)
    path = found if found is not None else Path(ref)
    if found is None and not path.is_absolute() and plan.path is not None:
        path = plan.path.parent / path
    if not path.is_file():
        raise SpecError(file, [SpecIssue(("prediction", "workload"),
                                         f"no catalog workload or file named {ref!r} (a path is "
                                         "relative to the plan file)")])
    workload = load_workload(path)
    if workload.model.name != plan.model.name:
        raise SpecError(file, [SpecIssue(("prediction", "workload"),
                                         f"{ref!r} is for model {workload.model.name!r}, the plan for "
                                         f"{plan.model.name!r}")])
    return workload


@dataclass(frozen=True)
class PlanLoad:
    """The load a command runs a plan under: the workload, and (when it is the plan's own) the
    offered rate and type mix the plan was evaluated at; None means the workload's own."""

    workload: ResolvedWorkload
    rate: float | None
    mix: dict[str, float] | None

    @property
    def on_plan(self) -> bool:
        return self.rate is not None


def plan_load(plan: ResolvedPlan, workload: str | None = None) -> PlanLoad:
    """``workload`` (a catalog name or file; default: the plan's ``prediction.workload``) with the
    plan's offered rate and mix when it is the workload the plan was evaluated on."""
    planned = plan_workload(plan)
    if workload is None:
        if planned is None:
            raise SpecError(str(plan.path) if plan.path else None, [SpecIssue(
                ("prediction", "workload"), "the plan names no workload it was made for: give --workload")])
        chosen = planned
    else:
        found = find_catalog_workload(workload)
        chosen = load_workload(found if found is not None else Path(workload))
    pred = plan.spec.prediction
    if pred is None or planned is None or chosen.path != planned.path:
        return PlanLoad(chosen, None, None)
    mix = {t: f for t, f in (pred.mix or {}).items() if f > 0} or None
    return PlanLoad(chosen, pred.offered_rps, mix)


def dump(spec: BaseModel) -> str:
    """YAML text that loads back into an equal spec."""
    return dump_yaml(spec.model_dump(mode="json", by_alias=True, exclude_none=True))


def validate_file(path: str | Path) -> list[SpecIssue]:
    """All issues in a spec file (empty when valid)."""
    try:
        load_document(path)
    except SpecError as exc:
        return exc.issues
    return []
