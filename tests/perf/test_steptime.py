"""The step model of one profiled engine: fitted to its table, it prices every iteration."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniplane.perf import ProfileRow
from omniplane.perf.steptime import (
    FEATURES,
    EngineLimits,
    MixedRow,
    StepModel,
    features,
    fit_step_model,
    holdout_fits,
)

LIMITS = EngineLimits(max_batch=64, token_budget=2048, kv_tokens=100_000)
# a known engine: 12 ms per step, 0.2 ms per prompt token, 3 ms per prompt, attention 1e-7 s per
# query-key pair, 0.5 ms per decoding sequence, 2 us per KV token read
TRUE = (0.012, 2e-4, 3e-3, 1e-7, 5e-4, 2e-6)


def rows(coef: tuple[float, ...] = TRUE) -> list[ProfileRow]:
    truth = StepModel("llm", coef, LIMITS)
    out = [ProfileRow("llm", "cpu", 1, "prefill", 1, s, truth.time(prefill_tokens=s) * 1e3)
           for s in (16, 64, 256, 1024)]
    for ctx in (80, 1056):
        out += [ProfileRow("llm", "cpu", 1, "decode", b, ctx,
                           truth.time(decode_batch=b, decode_context=b * ctx) * 1e3) for b in (1, 4, 16, 64)]
    return out


def test_the_fit_recovers_a_known_engine() -> None:
    model = fit_step_model(rows(), "llm", LIMITS)
    assert model.coef_s == pytest.approx(TRUE, rel=1e-6)
    assert model.fit_errors()["max"] < 1e-9
    assert model.fit_errors()["rows"] == 12


def test_a_mixed_iteration_counts_the_step_once() -> None:
    model = StepModel("llm", TRUE, LIMITS)
    pre = model.time(prefill_tokens=100)
    dec = model.time(decode_batch=8, decode_context=800)
    assert model.time(prefill_tokens=100, decode_batch=8, decode_context=800) == pytest.approx(
        pre + dec - TRUE[0])


def test_decode_span_is_the_sum_of_its_iterations() -> None:
    model = StepModel("llm", TRUE, LIMITS)
    span = model.llm_decode_span("llm", LIMITS, 8, 800, 20)
    t = 0.0
    for i in range(20):
        t += model.llm_iteration_time("llm", LIMITS, decode_batch=8, decode_context=800 + 8 * i)
        assert span.end(i + 1) == pytest.approx(t)
    assert model.kv_capacity_tokens(["llm"], LIMITS) == 100_000


def test_one_decode_context_leaves_the_context_term_out_and_says_so() -> None:
    some = [r for r in rows() if r.op == "prefill" or r.size == 80]
    model = fit_step_model(some, "llm", LIMITS)
    assert model.coefficients()["decode_ctx"] == 0.0
    assert any("decode_ctx" in n for n in model.notes)
    # the decode rows it saw are still priced right (their context cost moved into decode_seq)
    assert model.fit_errors()["max"] < 1e-6


def test_a_table_without_prefill_or_decode_rows_cannot_be_fitted() -> None:
    with pytest.raises(ValueError, match="no prefill rows"):
        fit_step_model([r for r in rows() if r.op == "decode"], "llm", LIMITS)
    with pytest.raises(ValueError, match="prices one LLM engine"):
        StepModel("llm", TRUE, LIMITS).encoder_time("enc", LIMITS, 1, 10)
    with pytest.raises(KeyError, match="not 'talker'"):
        StepModel("llm", TRUE, LIMITS).llm_iteration_time("talker", LIMITS, decode_batch=1)
    with pytest.raises(ValueError, match="numbers >= 0"):
        StepModel("llm", (-1.0,) * len(FEATURES), LIMITS)


def test_noisy_rows_give_a_nonnegative_fit_with_errors_reported() -> None:
    noisy = [ProfileRow(r.component, r.gpu, r.tp, r.op, r.batch, r.size,
                        r.latency_ms * (1.2 if i % 2 else 0.85)) for i, r in enumerate(rows())]
    model = fit_step_model(noisy, "llm", LIMITS)
    assert all(c >= 0 for c in model.coef_s)
    assert 0.05 < model.fit_errors()["median"] < 0.3
    assert len(model.to_json()["rows"]) == len(noisy)


@given(n=st.integers(0, 4096), r=st.integers(1, 16), b=st.integers(0, 256), c=st.integers(0, 4096),
       extra=st.integers(1, 64))
def test_more_work_never_takes_less_time(n: int, r: int, b: int, c: int, extra: int) -> None:
    model = StepModel("llm", TRUE, LIMITS)
    t = model.time(n, 0, r, b, b * c)
    assert t >= TRUE[0] > 0
    assert model.time(n + extra, 0, r, b, b * c) >= t
    assert model.time(n, 0, r, b + extra, (b + extra) * c) >= t
    assert features(n, 0, r, b, b * c)[0] == 1.0


def test_inside_the_measured_batches_the_decode_table_is_the_model() -> None:
    # an engine whose per-sequence cost grows with the batch (a CPU host streaming every token)
    per_seq = {1: 5e-4, 8: 5e-4, 32: 8e-4, 128: 1.6e-3}
    base = rows()
    table = [r for r in base if r.op == "prefill"] + [
        ProfileRow("llm", "cpu", 1, "decode", b, ctx, (TRUE[0] + b * k + TRUE[5] * b * ctx) * 1e3)
        for b, k in per_seq.items() for ctx in (80, 1056)]
    model = fit_step_model(table, "llm", LIMITS)
    assert [b for b, _ in model.decode_curve] == [1, 8, 32, 128]
    assert model.fit_errors()["max"] < 0.05  # a single linear decode_seq misses these by far more
    linear = StepModel("llm", model.coef_s, LIMITS)
    at128 = [r for r in table if r.op == "decode" and r.batch == 128]
    assert all(abs(linear.time(decode_batch=128, decode_context=round(128 * r.size)) * 1e3 / r.latency_ms - 1)
               > 0.1 for r in at128)
    t32, t128 = 32 * model.per_seq(32), 128 * model.per_seq(128)
    assert 64 * model.per_seq(64) == pytest.approx(t32 + (t128 - t32) * 32 / 96)  # totals interpolate
    assert model.per_seq(500) == model.per_seq(128) and model.per_seq(0.5) == model.per_seq(1)


def test_a_noisy_decode_table_still_gives_times_that_grow_with_the_batch() -> None:
    noisy = [r for r in rows() if r.op == "prefill"] + [
        ProfileRow("llm", "cpu", 1, "decode", b, 80, ms) for b, ms in ((1, 14.0), (4, 15.0), (8, 39.0),
                                                                       (16, 31.0), (32, 38.0), (64, 85.0))]
    model = fit_step_model(noisy, "llm", LIMITS)
    times = [model.time(decode_batch=b, decode_context=80 * b) for b in range(1, 129)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(times))


def test_held_out_points_are_predicted_by_the_others() -> None:
    exact = holdout_fits(rows(), "llm", LIMITS)
    # every point of a known linear engine is predicted by the rest, except the extrapolated
    # end of the decode table (held at its nearest batch's per-sequence cost)
    assert len(exact) == 12
    inner = [f for f in exact if not (f.op == "decode" and f.batch in (1, 64))]
    assert inner and max(abs(f.error) for f in inner) < 0.05
    stalled = rows()
    stalled[1] = ProfileRow("llm", "cpu", 1, "prefill", 1, 64, stalled[1].latency_ms * 5)  # a host stall
    [held] = [f for f in holdout_fits(stalled, "llm", LIMITS) if (f.op, f.size) == ("prefill", 64)]
    assert held.error == pytest.approx(1 / 5 - 1, abs=0.05)  # the others still know the engine


# a known engine whose mixed iterations cost 4 ms + 0.05 ms per prompt token + 0.2 ms per decode
# more than the sum of their parts
MIXED = (0.004, 5e-5, 2e-4)


def mixed_rows(truth: StepModel, chunks: tuple[int, ...] = (16, 64, 256)) -> list[MixedRow]:
    return [MixedRow(n, k, 40.0, truth.time(k, 0, 1, n, 40 * n) * 1e3) for n in (4, 16, 64) for k in chunks]


def test_mixed_terms_recover_a_known_engines_mixed_iterations() -> None:
    truth = StepModel("llm", TRUE, LIMITS, mixed_s=MIXED)
    model = fit_step_model(rows(), "llm", LIMITS, mixed=mixed_rows(truth))
    assert model.coef_s == pytest.approx(TRUE, rel=1e-6)  # the rest of the model is not moved
    assert model.mixed_s == pytest.approx(MIXED, rel=1e-4)
    assert max(abs(f.error) for f in model.mixed_fit) < 1e-6
    assert model.to_json()["mixed_coefficients_s"]["mixed_seq"] == pytest.approx(MIXED[2], rel=1e-4)
    # only an iteration holding both prefill and decode pays them
    additive = StepModel("llm", TRUE, LIMITS)
    assert model.time(prefill_tokens=64) == pytest.approx(additive.time(prefill_tokens=64))
    assert model.time(decode_batch=8, decode_context=320) == pytest.approx(
        additive.time(decode_batch=8, decode_context=320))
    both = additive.time(64, 0, 1, 8, 320)
    assert model.time(64, 0, 1, 8, 320) == pytest.approx(both + MIXED[0] + 64 * MIXED[1] + 8 * MIXED[2])


def test_without_mixed_rows_the_model_is_additive_and_one_chunk_size_is_said() -> None:
    assert fit_step_model(rows(), "llm", LIMITS).mixed_s == (0.0, 0.0, 0.0)
    truth = StepModel("llm", TRUE, LIMITS, mixed_s=MIXED)
    model = fit_step_model(rows(), "llm", LIMITS, mixed=mixed_rows(truth, chunks=(64,)))
    assert model.mixed_s[1] == 0.0 and any("mixed_token not determined" in n for n in model.notes)
    assert max(abs(f.error) for f in model.mixed_fit) < 0.05  # 64-token chunks are still priced


def test_cheaper_mixed_iterations_refund_at_most_the_parts() -> None:
    additive = StepModel("llm", TRUE, LIMITS)
    # an engine whose mixed iterations take a tenth of the sum of their parts
    cheap = [MixedRow(n, k, 40.0, 0.1 * additive.time(k, 0, 1, n, 40 * n) * 1e3)
             for n in (4, 16, 64) for k in (16, 64, 256)]
    model = fit_step_model(rows(), "llm", LIMITS, mixed=cheap)
    m0, m1, m2 = model.mixed_s
    cheapest = min(model.per_seq(b) for b in (1, 64))
    assert m0 >= -TRUE[0] - 1e-12 and m1 >= -TRUE[1] - 1e-12 and m2 >= -cheapest - 1e-12
    assert m0 < 0 or m1 < 0 or m2 < 0
    assert all(0 < f.fitted_ms < additive.time(int(f.size), 0, 1, f.batch, 40 * f.batch) * 1e3
               for f in model.mixed_fit)  # it moved toward the measurement, and stayed above zero


def test_held_out_mixed_points_are_predicted_by_the_other_mixed_points() -> None:
    truth = StepModel("llm", TRUE, LIMITS, mixed_s=MIXED)
    held = [f for f in holdout_fits(rows(), "llm", LIMITS, mixed_rows(truth)) if f.op == "mixed"]
    assert len(held) == 9
    assert max(abs(f.error) for f in held) < 0.05
