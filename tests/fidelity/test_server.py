"""``VllmServer``'s process layout, on a stand-in for ``python -m vllm...`` (no vLLM needed): a
script that answers ``/health`` on the port it is given."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from omniplane.fidelity.server import ServerSpec, VllmServer

STAND_IN = """#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.parametrize("new_session", [True, False])
def test_the_server_leads_its_own_group_and_its_own_session_only_when_asked(tmp_path: Path,
                                                                            new_session: bool) -> None:
    fake = tmp_path / "python"
    fake.write_text(STAND_IN.format(python=sys.executable))
    fake.chmod(0o755)
    spec = ServerSpec("m", python=str(fake), log=tmp_path / "log", startup_timeout_s=30,
                      new_session=new_session)
    with VllmServer(spec) as server:
        pid = server.pgid
        assert os.getpgid(pid) == pid  # its own process group either way: stop() signals it
        # a session of its own is a scheduler autogroup of its own (Linux); otherwise it shares ours
        assert (os.getsid(pid) == pid) is new_session
        assert (os.getsid(pid) == os.getsid(0)) is not new_session
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # stopped: the whole group is gone
