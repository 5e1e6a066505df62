"""Plain stand-ins for vLLM requests and schedulers, for the tests that need no vLLM."""

from __future__ import annotations

from collections import deque
from typing import Any


class FakeRequest:
    def __init__(
        self, rid: str, prompt: int = 10, max_tokens: int = 5, priority: int = 0, info: Any = None
    ) -> None:
        self.request_id, self.priority = rid, priority
        self.num_prompt_tokens, self.max_tokens = prompt, max_tokens
        self.num_computed_tokens = self.num_output_tokens = 0
        self.additional_information = info
        self.finished = False

    def is_finished(self) -> bool:
        return self.finished


class FakeScheduler:
    """Admits up to ``batch`` waiting requests per step, each finishing after one step."""

    def __init__(self, *args: Any, batch: int = 2, **kwargs: Any) -> None:
        self.waiting: deque[FakeRequest] = deque()
        self.running: list[FakeRequest] = []
        self.requests: dict[str, FakeRequest] = {}
        self.finished_req_ids: set[str] = set()
        self.batch = batch
        self.vllm_config = kwargs.get("vllm_config")
        self.fail = False

    def add_request(self, r: FakeRequest) -> None:
        self.waiting.append(r)
        self.requests[r.request_id] = r

    def schedule(self) -> Any:
        if self.fail:
            raise RuntimeError("vLLM failed (test)")
        admitted = [self.waiting.popleft() for _ in range(min(self.batch, len(self.waiting)))]
        self.running += admitted
        out = type("Out", (), {})()
        out.num_scheduled_tokens = {r.request_id: r.num_prompt_tokens for r in admitted}
        for r in admitted:
            r.num_computed_tokens = r.num_prompt_tokens
        self.finished_req_ids = set()
        return out

    def update_from_output(self, out: Any, mro: Any) -> dict[int, Any]:
        for rid in out.num_scheduled_tokens:
            r = self.requests.pop(rid)
            r.num_output_tokens, r.finished = 1, True
            self.running.remove(r)
            self.finished_req_ids.add(rid)
        return {}

    def finish_requests(self, ids: Any, status: Any) -> None:
        for rid in [ids] if isinstance(ids, str) else list(ids):
            r = self.requests.pop(rid, None)
            if r is not None:
                r.finished = True
                if r in self.waiting:
                    self.waiting.remove(r)
                self.finished_req_ids.add(rid)

    def shutdown(self) -> None:
        return None
