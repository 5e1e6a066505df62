"""Keep a Serve replica's own gRPC server on its node's address. Imports Ray.

Ray Serve 2.60 starts each replica's inter-deployment gRPC server on ``[::]:0``, every interface
(``Replica._on_initialized`` in ray/serve/_private/replica.py; no option), after the replica's
constructor ran. Every replica class omniplane deploys calls :func:`replica_grpc_on_node_address`
from its constructor (``NodeReplica``, ``OmniServer``, ``OmniStage``, the router's ``Router``).
"""

from __future__ import annotations

from typing import Any

from omniplane.deploy.auth import is_loopback

GRPC_BIND = "add_port_to_grpc_server"  # what ray/serve/_private/replica.py binds its gRPC server with


def replica_grpc_on_node_address() -> None:
    """Ray Serve 2.60 starts each replica's inter-deployment gRPC server on ``[::]:0``, every
    interface (``Replica._on_initialized`` in ray/serve/_private/replica.py; no option), after
    the replica's constructor ran. Called from the constructor: on a node whose address is
    loopback (a local cluster, omniplane.deploy.cluster), that server binds to the node address
    instead, which is where the other replicas reach it."""
    import ray
    from ray.serve._private import replica

    node = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    add: Any = getattr(replica, GRPC_BIND)
    if not is_loopback(node) or getattr(add, "on_node_address", False):
        return

    def on_node(server: Any, address: str) -> int:
        port: int = add(server, address.replace("[::]", node, 1) if address.startswith("[::]:") else address)
        return port

    on_node.on_node_address = True  # type: ignore[attr-defined]
    setattr(replica, GRPC_BIND, on_node)
