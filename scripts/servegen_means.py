"""Request-weighted means of the ServeGen mm-image fields (the Table 2 request sizes).

ServeGen publishes, per client and 600 s window, an arrival rate, and per client and 6-hour
window the PMF of each request field. A request drawn from the whole trace comes from a
(client, window) in proportion to its rate, so the mean of a field over requests is the
rate-weighted mean of the PMF means. Printed as JSON; ``repro/data/table2_conditions.json``
quotes it (tests/repro/test_capacity.py checks that it still matches the data).

    .venv/bin/python scripts/servegen_means.py
"""

from __future__ import annotations

import json
from pathlib import Path

from omniplane.workload.servegen import WINDOW_S, load_servegen

FIELDS = ("text_tokens", "image_tokens", "image_count", "output_tokens")


def servegen_means(directory: Path) -> dict[str, float]:
    sg = load_servegen(directory)
    num = dict.fromkeys(FIELDS, 0.0)
    den = 0.0
    for c in sg.clients:
        for start, rate in zip(c.start, c.rate, strict=True):
            if rate <= 0:
                continue
            pmf = c.pmf_at(float(start))
            w = float(rate) * WINDOW_S
            den += w
            for f in FIELDS:
                num[f] += w * pmf[f].mean()
    return {f: round(num[f] / den, 2) for f in FIELDS}


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1] / "src" / "omniplane" / "data" / "servegen-mm-image"
    print(json.dumps(servegen_means(root), indent=2))
