"""What crossing an edge between two plan nodes costs: the bytes the edge carries over the link
between the two nodes' GPUs, plus the link's latency (mixed fleets, ``omniplane plan --inventory``).

* **Bytes** (per request, from its resolved work; ``edge_bytes``):

  - an LLM feeding an LLM (Qwen3-Omni's thinker -> talker) hands over two hidden-state vectors
    per token, the word embedding (layer 0) and the ``accept_hidden_layer`` output, each of the
    sender's ``hidden`` width, at its ``bytes_per_param`` (bf16): vLLM-Omni 0.30
    ``model_executor/stage_input_processors/qwen3_omni.py`` (thinker2talker: ``embed`` and
    ``hidden_states`` per prompt and generated token);
  - an encoder feeding an LLM hands over ``output_streams`` embeddings per token of the LLM's
    hidden width (model facts: ``Size.output_streams``);
  - an LLM with ``codebooks`` feeding a codec generator (talker -> code2wav) hands over the codes:
    ``codebooks`` token ids per output frame, ``CODE_BYTES`` each;
  - any other edge: one vector of the sender's hidden width per token it emits (an assumption).

  A streaming edge (the receiver starts on the sender's first output) pays at that release for
  what exists then, the prompt's tokens; later chunks overlap the sender's decode (assumption).
  Other edges pay for everything the sender emits.
* **Links** (``link_seconds``): within a host the catalog's per-GPU interconnect
  (``GPUKind.link_bw``: NVLink or PCIe, per direction); across hosts (two kinds are always two
  hosts) the slower of the two hosts' network per GPU, ``HOST_NETWORK_GBS`` by the kind's
  interconnect class, plus ``INTER_HOST_LATENCY_S``. vLLM-Omni moves these tensors through its
  connectors (host memory within a node); the link rate is the bound the hardware allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from omniplane.spec import GPUKind, ModelSpec
from omniplane.spec.component import ComponentKind

# per GPU, per direction, GB/s (10^9 bytes/s): the network a host gives each of its GPUs
HOST_NETWORK_GBS = {
    # 3,200 Gb/s EFA for 8 H100 (p5.48xlarge) = 400 Gb/s = 50 GB/s per GPU:
    # https://aws.amazon.com/ec2/instance-types/p5/ (read 2026-12-05); HGX/DGX-class hosts
    "nvlink": 50.0,
    # 400 Gb/s for 8 L40S (g6e.48xlarge) = 50 Gb/s = 6.25 GB/s per GPU:
    # https://aws.amazon.com/ec2/instance-types/g6e/ (read 2026-12-05); PCIe hosts
    "pcie": 6.25,
}
INTER_HOST_LATENCY_S = 10e-6  # assumption: one RDMA/TCP message between hosts, ~10 us
INTRA_HOST_LATENCY_S = 2e-6  # assumption: one NVLink/PCIe peer copy launch, ~2 us
CODE_BYTES = 8.0  # assumption: codec codes as int64 token ids (vLLM-Omni's code_prompt_token_ids)
LLM_TO_LLM_VECTORS = 2  # embedding + accept_hidden_layer per token (vLLM-Omni thinker2talker)


@dataclass(frozen=True)
class EdgeBytes:
    """Bytes an edge carries per request: ``per_unit`` x the sum of the sender's work fields."""

    per_unit: float
    fields: tuple[str, ...]

    def of(self, work: Mapping[str, float]) -> float:
        return self.per_unit * sum(float(work.get(f, 0.0)) for f in self.fields)


def edge_bytes(model: ModelSpec, frm: str, to: str) -> EdgeBytes:
    """What the edge ``frm -> to`` carries (module docstring)."""
    a, b = model.component(frm), model.component(to)
    edge = next((e for e in a.edges if e.to == to), None)
    streaming = bool(edge is not None and edge.streaming)
    sa, sb = a.size, b.size
    width = float(sa.bytes_per_param)
    if a.kind is ComponentKind.ENCODER and b.kind is ComponentKind.LLM:
        streams = float(sa.output_streams or 1)
        return EdgeBytes(streams * float(sb.hidden or sa.hidden or 0) * width, ("tokens",))
    llm_fields = ("prompt_tokens",) if streaming else ("prompt_tokens", "output_tokens")
    if a.kind is ComponentKind.LLM and b.kind is ComponentKind.LLM:
        return EdgeBytes(LLM_TO_LLM_VECTORS * float(sa.hidden or 0) * width, llm_fields)
    if a.kind is ComponentKind.LLM and sa.codebooks:
        return EdgeBytes(float(sa.codebooks) * CODE_BYTES, ("output_tokens",))
    if a.kind is ComponentKind.LLM:
        return EdgeBytes(float(sa.hidden or 0) * width, llm_fields)
    return EdgeBytes(float(sa.hidden or 0) * width, ("tokens", "output_tokens"))


def host_network(kind: GPUKind) -> float:
    """Bytes per second per GPU, per direction, between hosts of ``kind``."""
    return HOST_NETWORK_GBS[kind.interconnect] * 1e9


@dataclass(frozen=True)
class Link:
    """A link between two nodes: ``latency`` seconds plus ``1 / bandwidth`` seconds per byte."""

    latency: float
    bandwidth: float  # bytes per second
    cross_host: bool

    def seconds(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


def link(a: GPUKind, b: GPUKind, same_host: bool) -> Link:
    """The link between a GPU of kind ``a`` and one of kind ``b`` (module docstring)."""
    if same_host and a.name == b.name:
        return Link(INTRA_HOST_LATENCY_S, a.link_bw, False)
    return Link(INTER_HOST_LATENCY_S, min(host_network(a), host_network(b)), True)
