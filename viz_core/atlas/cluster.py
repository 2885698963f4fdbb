"""Reaching a Ray cluster started elsewhere (`ray start --head`), token authentication
included, and saying in one line why it refused.

Ray 2.60's token authentication (ray/_private/authentication/): a cluster started while a
token exists (or with RAY_AUTH_MODE=token) accepts only clients that send that token. A
client sends it when RAY_AUTH_MODE=token; the token comes from RAY_AUTH_TOKEN, else the file
named by RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (`ray get-auth-token` prints the head's).
`ray.init(address=...)` with an explicit address never turns token mode on by itself, so a
client with the right token on disk is still refused ("Failed to connect to Ray cluster").

So before `ray.init`, a probe asks the cluster's GCS for its metadata (Ray and Python
versions) in a child process (Ray's GCS client retries for up to ~40 s and caches the
authentication mode per process; a child can be stopped and leaves this one untouched):
- refused for authentication, with a token available here and RAY_AUTH_MODE unset: probe
  again in token mode; if that works, this process (and the atlas's Ray) uses token mode;
- otherwise a one-line AtlasError naming the cause and the fix: no token, a token the
  cluster rejects, RAY_AUTH_MODE=disabled, another Ray or Python version, nothing listening,
  or something that is not a Ray head at that port.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from .inputs import AtlasError

PROBE_TIMEOUT_S = 60.0  # a backstop: the GCS connect timeouts below answer within ~15 s
TCP_TIMEOUT_S = 5.0
MODE, TOKEN, TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
FIX_TOKEN = ("put the head's token (`ray get-auth-token` on the head node prints it) in "
             "~/.ray/auth_token, or set RAY_AUTH_TOKEN to it (or RAY_AUTH_TOKEN_PATH to a file "
             "holding it)")

_PROBE = r"""
import json, sys
try:
    from ray._raylet import GcsClient
    from ray._common.usage import usage_lib
    meta = usage_lib.get_cluster_metadata(GcsClient(address=sys.argv[1])) or {}
    print(json.dumps({"ok": True, "meta": {k: meta.get(k) for k in
                                           ("ray_version", "python_version")}}))
except Exception as err:
    print(json.dumps({"ok": False, "type": type(err).__name__, "message": str(err)[:600]}))
"""


def _error(message: str) -> AtlasError:
    return AtlasError(message)


def split_address(address: str) -> tuple[str, int]:
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise _error(f"--address {address!r} is not host:port (e.g. 10.0.0.5:6379 or "
                     "ray://10.0.0.5:10001).")
    return host.strip("[]"), int(port)


def check_listening(address: str, timeout: float = TCP_TIMEOUT_S) -> None:
    """Nothing listening: say so at once (ray.init would retry for a minute or more)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise _error(f"Cannot reach a Ray cluster at {address} ({err.strerror or err}): "
                     "nothing listens there. Start the head with `ray start --head "
                     "--port=PORT`, check the address, or leave out --address to run without "
                     "a cluster.") from None


def token_source(env: dict | None = None) -> str | None:
    """Where Ray would read this process's token from, or None when there is none."""
    env = os.environ if env is None else env
    if env.get(TOKEN, "").strip():
        return f"${TOKEN}"
    if env.get(TOKEN_PATH):
        path = Path(env[TOKEN_PATH]).expanduser()
        return f"${TOKEN_PATH} ({path})" if path.is_file() else None
    default = Path(env.get("HOME") or Path.home()) / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def probe(address: str, env: dict | None = None, timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Ask the cluster's GCS for its metadata from a child process.

    {"ok": True, "meta": {...}} | {"ok": False, "type": ..., "message": ...} |
    {"ok": False, "type": "timeout"}."""
    env = dict(os.environ if env is None else env)
    env.setdefault("RAY_py_gcs_connect_timeout_s", "5")
    env.setdefault("RAY_gcs_rpc_server_connect_timeout_s", "5")
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE, address], env=env,
                             capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"ok": False, "type": "timeout", "message": ""}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "type": "crash", "message": tail[:300]}
    return json.loads(lines[-1])


def _is_auth(result: dict) -> bool:
    text = f"{result.get('type')} {result.get('message')}"
    return "AuthenticationError" in text or "InvalidAuthToken" in text or \
        "Unauthenticated" in text


def version_problem(meta: dict, address: str) -> str | None:
    """The one-line message for a cluster of another Ray / Python version (Ray's own rule:
    the same Ray, and the same Python to the patch level unless
    RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor), else None."""
    import ray
    from ray._private.utils import check_version_info, compute_version_info

    if not meta.get("ray_version") or not meta.get("python_version"):
        return None
    try:
        check_version_info(meta, "this process")
    except RuntimeError:
        ray_here, py_here = compute_version_info()
        return (f"Version mismatch with the Ray cluster at {address}: it runs Ray "
                f"{meta['ray_version']} on Python {meta['python_version']}, this process Ray "
                f"{ray_here or ray.__version__} on Python {py_here}: run the atlas from an "
                f"environment with ray=={meta['ray_version']} and Python "
                f"{meta['python_version']} (or restart the cluster with this one's).")
    return None


def _auth_message(address: str, env: dict, tried_token: bool) -> str:
    source = token_source(env)
    mode = env.get(MODE)
    if mode is not None and mode.lower() == "disabled":
        return (f"The Ray cluster at {address} uses token authentication, and RAY_AUTH_MODE="
                f"disabled here: unset RAY_AUTH_MODE (or set it to token) and {FIX_TOKEN}.")
    if source is None:
        return (f"The Ray cluster at {address} uses token authentication and no token was "
                f"found here: {FIX_TOKEN}.")
    if not tried_token and (mode or "").lower() != "token":
        return (f"The Ray cluster at {address} uses token authentication: set "
                f"RAY_AUTH_MODE=token and {FIX_TOKEN}.")
    return (f"The Ray cluster at {address} rejected the token from {source}: it is not the "
            f"cluster's token; {FIX_TOKEN}.")


def enable_token_mode() -> None:
    """Token mode for this process and the processes it starts, as Ray's own
    `_enable_token_auth` does (the cached RayConfig is refreshed if Ray is loaded)."""
    os.environ[MODE] = "token"
    if "ray" in sys.modules:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def prepare_connection(address: str) -> dict:
    """Check that the cluster at `address` will take this process, switching on token mode
    when the cluster needs it and a token is here; an AtlasError (one line) otherwise.
    Returns what was found: {"auth": "token" | "none" | "unknown", "meta": {...}}."""
    if address in ("auto", "local"):
        return {"auth": "unknown", "meta": {}}
    check_listening(address)
    if address.startswith("ray://"):  # a Ray Client server: ray.init says what goes wrong
        return {"auth": "unknown", "meta": {}}
    env = dict(os.environ)
    result = probe(address, env)
    auth = (env.get(MODE) or "").lower() == "token"
    if not result["ok"] and _is_auth(result):
        mode = env.get(MODE)
        if mode is None and token_source(env) is not None:
            result = probe(address, {**env, MODE: "token"})
            if result["ok"]:
                enable_token_mode()
                auth = True
            elif _is_auth(result):
                raise _error(_auth_message(address, {**env, MODE: "token"}, True))
        if not result["ok"] and _is_auth(result):
            raise _error(_auth_message(address, env, False))
    if not result["ok"]:
        if result["type"] in ("timeout", "RpcError", "GetTimeoutError"):
            raise _error(f"Something listens at {address}, but no Ray head answered there: "
                         "give the head's GCS port (`ray start --head` prints it; 6379 by "
                         "default), or ray://HOST:10001 for a Ray Client server.")
        raise _error(f"Cannot reach the Ray cluster at {address}: {result['type']}: "
                     f"{_first_line(result.get('message', ''))}")
    problem = version_problem(result["meta"], address)
    if problem:
        raise _error(problem)
    return {"auth": "token" if auth else "none", "meta": result["meta"]}


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:300]


def explain_init_failure(address: str, err: BaseException) -> str:
    """One line for a failed `ray.init(address=...)`: Ray wraps the cause ("Failed to
    connect to Ray cluster at ...") around the error that says what happened."""
    chain, seen = [], set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(f"{type(x).__name__}: {x}" for x in chain)
    if "AuthenticationError" in text or "InvalidAuthToken" in text:
        return _auth_message(address, dict(os.environ), True)
    if "Version mismatch" in text:
        return (f"Version mismatch with the Ray cluster at {address} (`ray --version` and "
                "`python --version` differ there and here): run the atlas from an environment "
                "with the cluster's Ray and Python versions.")
    cause = chain[-1]
    return (f"Cannot connect to the Ray cluster at {address}: {type(cause).__name__}: "
            f"{_first_line(str(cause))}")
