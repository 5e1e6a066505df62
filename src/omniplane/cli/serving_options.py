"""The options and checks ``omniplane deploy`` and ``omniplane route`` share (the HTTP front ends:
port, admission, keys, limits)."""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer

from omniplane.cli import options as opt
from omniplane.cli.errors import fail
from omniplane.deploy.auth import API_KEY_ENV

MaxInFlightOpt = Annotated[int, opt.int_opt(
    "--max-in-flight", help="Requests admitted before shedding with 503.", lo=1, hi=1_000_000)]
PortOpt = Annotated[int, opt.int_opt("--port", help="HTTP port of the Serve proxy.", lo=1, hi=65535)]
ScaleOpt = Annotated[float, opt.float_opt("--time-scale", help="Emulated engine: wall seconds per model "
                                          "second.", lo=0.001, hi=1e4)]
ApiKeyOpt = Annotated[str | None, typer.Option(
    "--api-key", envvar=API_KEY_ENV, show_envvar=True, metavar="KEY",
    help="API key clients must send as 'Authorization: Bearer KEY'.")]
MaxBodyOpt = Annotated[float, opt.float_opt(
    "--max-body-mb", help="Largest request body, MiB (larger: HTTP 413).", lo=0, hi=1024,
    lo_open=True, metavar="MIB")]
MaxPromptOpt = Annotated[int, opt.int_opt(
    "--max-prompt-tokens", help="Longest prompt, tokens (longer: HTTP 413).", lo=1, hi=10_000_000)]
DeadlineOpt = Annotated[float, opt.float_opt(
    "--deadline-s", help="Wall seconds a request may run before it is cancelled (HTTP 504).", lo=0,
    hi=86_400, lo_open=True, metavar="S")]


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def port_free(host: str, port: int) -> None:
    try:
        opt.check_port_free(host, port)
    except typer.BadParameter as exc:
        fail(str(exc))
