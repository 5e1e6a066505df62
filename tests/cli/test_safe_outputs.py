"""Outputs never destroy what they name: a device node, FIFO, socket or folder given as an output
is refused before any work and left as it was; a symbolic link is written through (the link
stays); an output that is one of the command's inputs (through any link) is refused; a trailing
slash names a folder; errors name the user's path, never the staging file's."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from omniplane.cli import options as opt
from omniplane.cli.app import app
from omniplane.cli.files import STAGING_PREFIX, Outputs
from tests.cli.slips import EXISTING, invoke, staging


def make_node(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()  # the socket file stays


KINDS = {"fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "folder": stat.S_ISDIR}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_special_file_as_out_is_refused_and_kept(root: Path, kind: str) -> None:
    node = root / "node.jsonl"
    make_node(node, kind)
    out = invoke(["workload", "sample", "w.yaml", "--n", "5", "--out", "node.jsonl"], root)
    assert out.code == 2 and "node.jsonl" in out.stderr and out.stdout == ""
    assert KINDS[kind](os.lstat(node).st_mode), f"{kind} was replaced"
    assert staging(root) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_private_dev_null_survives_out(root: Path) -> None:
    """The must-show case: a /dev/null-like node (char 1,3) given to --out stays a device."""
    node = root / "null.jsonl"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    out = invoke(["workload", "sample", "w.yaml", "--n", "5", "--out", str(node)], root)
    assert out.code == 2 and "is a device" in out.stderr
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


def _output_parsers() -> Iterator[tuple[str, object]]:
    """Every output option of every command (also ones added later)."""
    def walk(cmd: object, path: str) -> Iterator[tuple[str, object]]:
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, f"{path} {sub_name}")
        for param in getattr(cmd, "params", []):
            info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
            parser = getattr(info, "parser", None)
            if getattr(parser, "writes", False):
                yield f"{path} {param.opts[0]}", parser

    yield from walk(typer.main.get_command(app), "omniplane")


def test_every_output_option_refuses_special_files(tmp_path: Path) -> None:
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)
    found = list(_output_parsers())
    assert len(found) >= 12  # --out of every writing command, --figures, --trace, --summary, ...
    for name, parser in found:
        with pytest.raises(typer.BadParameter):
            parser(str(fifo))  # type: ignore[operator]
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), name


def test_a_symbolic_link_is_written_through(root: Path) -> None:
    (root / "real.jsonl").write_text(EXISTING)
    (root / "link.jsonl").symlink_to("real.jsonl")
    (root / "dangling.jsonl").symlink_to("made.jsonl")
    for link in ("link.jsonl", "dangling.jsonl"):
        out = invoke(["workload", "sample", "w.yaml", "--n", "3", "--out", link], root)
        assert out.code == 0, out.stderr
        assert (root / link).is_symlink()
    assert len((root / "real.jsonl").read_text().splitlines()) == 3
    assert len((root / "made.jsonl").read_text().splitlines()) == 3
    assert staging(root) == []


def test_an_input_is_never_an_output(root: Path) -> None:
    (root / "sweep.json").write_text(EXISTING)
    (root / "alias.json").symlink_to("sweep.json")
    os.link(root / "sweep.json", root / "hard.json")
    for name in ("sweep.json", "alias.json", "hard.json"):
        out = invoke(["calibrate", "--from", "sweep.json", "--out", name], root)
        assert out.code == 2 and "same file as --from" in out.stderr, out.stderr
    assert (root / "sweep.json").read_text() == EXISTING
    # an input read by the command itself (not an option): refused at write time
    with Outputs() as files:
        from omniplane.inputs import open_input

        open_input(root / "w.yaml").close()
        with pytest.raises(Exception, match="input files"):
            files.text(root / "w.yaml", "x")


def test_two_outputs_are_never_the_same_file(root: Path) -> None:
    out = invoke(["profile", "--url", "http://127.0.0.1:9", "--model", "m", "--component", "thinker",
                  "--gpu", "a100", "--out", "same.csv", "--summary", "./same.csv"], root)
    assert out.code == 2 and "is the same file as --out" in out.stderr, out.stderr


def test_a_trailing_slash_names_a_folder(root: Path) -> None:
    out = invoke(["workload", "sample", "w.yaml", "--n", "3", "--out", "newdir.jsonl/"], root)
    assert out.code == 2 and "ends in '/'" in out.stderr
    assert not (root / "newdir.jsonl").exists()
    assert opt.OutputDir()("figs/") == Path("figs")


def test_errors_name_the_users_path_not_the_staging_file(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import omniplane.workload as wl

    def full(path: object, requests: object) -> int:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(wl, "save_requests", full)
    out = invoke(["workload", "sample", "w.yaml", "--n", "5", "--out", "sub/r.jsonl"], root)
    assert out.code == 2 and "sub/r.jsonl: no space left on device" in out.stderr
    assert STAGING_PREFIX not in out.stderr and staging(root) == []
