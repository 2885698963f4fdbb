"""`attention-lab serve --replicas N --port P`: N app processes behind Debian's nginx.

    browser --> nginx :P --(cookie hash)--> streamlit 127.0.0.1:p1 ... 127.0.0.1:pN

Each replica is `streamlit run app.py` on a free loopback port (no file watcher, headless);
nginx (deploy/nginx.conf.template, filled in here) keeps every browser on one replica by a
cookie, proxies the websocket, and skips a replica that stopped answering: that replica's
students reconnect to another one, which rebuilds their view from the URL. A replica that
dies is started again on its port.

A served app is open to a class, so the deployment policy starts closed (no folders on the
server, no Hugging Face Hub, a size cap: viz_core/loading/policy.py) unless the teacher opens
it with flags. Ctrl-C or SIGTERM stops nginx and every replica; the replicas and nginx also
get SIGTERM if this process is killed (Linux's parent-death signal), so nothing is orphaned.
"""

from __future__ import annotations

import errno
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from attention_lab.launch import APP_ENV, CommandError, app_dir

TEMPLATE = "nginx.conf.template"
COOKIE = "attention_lab_replica"  # nginx's $cookie_<name>: letters, digits and _ only
NGINX_PLACES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
DEFAULT_MAX_MODEL_MB = 1000  # MiniLM is 90 MB, the shipped models < 5 MB; a 7B model is 14 GB
START_TIMEOUT_S = 180.0  # a replica's first answer (imports torch, transformers, streamlit)
STOP_TIMEOUT_S = 10.0
RESTART_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0)  # a replica dying again waits longer


# ---- checks before anything starts ------------------------------------------------------
def cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_replicas(n: int) -> None:
    have = cores()
    if n < 1:
        raise CommandError(f"--replicas {n}: give at least 1 (one app process a core)")
    if n > have:
        raise CommandError(f"--replicas {n}: this machine has {have} core"
                           f"{'s' if have != 1 else ''}; give 1 to {have} (one app process a "
                           "core; for more, add hosts: deploy/README.md)")


def find_nginx(explicit: str | None = None) -> str:
    """The nginx binary: --nginx, else on PATH, else Debian's /usr/sbin/nginx (not on a
    normal user's PATH)."""
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise CommandError(f"nginx not found at {explicit!r}")
    found = shutil.which("nginx")
    if found:
        return found
    for place in NGINX_PLACES:
        if os.access(place, os.X_OK):
            return place
    raise CommandError("nginx is not installed: `sudo apt-get install nginx` (Debian/Ubuntu), "
                       "or give its path with --nginx")


def check_port(address: str, port: int) -> None:
    """Bind the address and port the way nginx will (SO_REUSEADDR), and let go at once."""
    if not 1 <= port <= 65535:
        raise CommandError(f"--port {port}: give a port from 1 to 65535")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise CommandError(f"port {port} is in use on {address}: stop what holds it "
                                   "or give another --port") from None
            if err.errno == errno.EACCES:
                raise CommandError(f"port {port}: permission denied (ports below 1024 need "
                                   "root); give a port above 1023") from None
            raise CommandError(f"cannot listen on {address}:{port}: "
                               f"{err.strerror or err}") from None


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the policy and the nginx config ----------------------------------------------------
def policy_env(allow_local_paths: bool, allow_hub: bool, max_model_mb: float) -> dict[str, str]:
    """The environment variables of viz_core.loading.policy for a served app (closed unless
    opened). max_model_mb 0: no cap."""
    return {"ATTENTION_LAB_ALLOW_LOCAL_PATHS": "1" if allow_local_paths else "0",
            "ATTENTION_LAB_ALLOW_HUB": "1" if allow_hub else "0",
            "ATTENTION_LAB_MAX_MODEL_MB": f"{max_model_mb:g}" if max_model_mb > 0 else ""}


def policy_line(env: dict[str, str]) -> str:
    cap = env["ATTENTION_LAB_MAX_MODEL_MB"]
    return ("folders on the server: " + ("allowed" if env["ATTENTION_LAB_ALLOW_LOCAL_PATHS"] == "1"
                                          else "off")
            + "; Hugging Face Hub: " + ("allowed" if env["ATTENTION_LAB_ALLOW_HUB"] == "1"
                                        else "off")
            + "; model size cap: " + (f"{cap} MB" if cap else "none"))


def thread_env(replicas: int, env: dict[str, str]) -> dict[str, str]:
    """Each replica's share of the cores for its model runs (attention_lab/ui/runs.py reads
    these): torch threads per run and runs at once, so that N replicas together do not
    oversubscribe the machine. Values the teacher set in the environment are kept."""
    share = max(1, cores() // replicas)
    threads = max(1, min(4, share - 1))
    runs = max(1, (share - 1) // threads)
    out = {"ATTENTION_LAB_TORCH_THREADS": str(threads), "ATTENTION_LAB_MODEL_RUNS": str(runs)}
    return {k: env.get(k) or v for k, v in out.items()}


def template_path() -> Path:
    """deploy/nginx.conf.template beside app.py (the repository's root, or the installed
    attention_lab/app/: setup.py's package data)."""
    path = app_dir() / "deploy" / TEMPLATE
    if path.is_file():
        return path
    raise CommandError(f"deploy/{TEMPLATE} is not installed with this package")


def nginx_config(template: str, *, listen: str, upstreams: list[str], state_dir: Path,
                 access_log: bool = False) -> str:
    """The template with its {{fields}} filled in. upstreams: "host:port" of each replica."""
    servers = "\n".join(f"        server {u} max_fails=1 fail_timeout=10s;" for u in upstreams)
    fields = {"listen": listen, "servers": servers, "state_dir": str(state_dir),
              "cookie": COOKIE,
              "access_log": str(state_dir / "access.log") if access_log else "off"}
    text = template
    for key, value in fields.items():
        text = text.replace("{{" + key + "}}", value)
    unknown = re.search(r"\{\{\w+\}\}", text)
    if unknown:
        raise CommandError(f"{TEMPLATE}: unknown field {unknown.group(0)}")
    return text


def listen_value(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


# ---- the processes ----------------------------------------------------------------------
def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies, even by SIGKILL (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def replica_argv(port: int) -> list[str]:
    """One app process: the settings a served app needs (no file watcher: see DESIGN's
    Known traps; it is most of a visit's server CPU)."""
    return [sys.executable, "-m", "attention_lab.server", "run", "app.py",
            "--server.port", str(port), "--server.address", "127.0.0.1",
            "--server.headless", "true", "--server.fileWatcherType", "none",
            "--server.runOnSave", "false", "--browser.gatherUsageStats", "false"]


@dataclass
class Replica:
    index: int
    port: int
    log: Path
    proc: subprocess.Popen | None = None
    restarts: int = 0
    restart_at: float | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Server:
    """The replicas and nginx, started, watched and stopped together."""

    replicas: int
    port: int
    address: str
    nginx: str
    env: dict[str, str]
    state_dir: Path
    access_log: bool = False
    children: list[Replica] = field(default_factory=list)
    nginx_proc: subprocess.Popen | None = None
    stopping: bool = False

    def spawn(self, argv: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
        out = open(log, "ab")  # noqa: SIM115 - the child holds it; closed here after the fork
        try:
            return subprocess.Popen(argv, cwd=cwd, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True,  # Ctrl-C reaches only this process
                                    preexec_fn=_die_with_parent if os.name == "posix" else None)
        finally:
            out.close()

    def start_replica(self, r: Replica) -> None:
        r.proc = self.spawn(replica_argv(r.port), r.log, cwd=app_dir())
        r.restart_at = None

    def start(self) -> None:
        """The config first (checked by `nginx -t`), then the replicas, then nginx."""
        ports: set[int] = set()
        while len(ports) < self.replicas:
            ports.add(free_loopback_port())
        self.children = [Replica(i + 1, port, self.state_dir / f"replica-{i + 1}.log")
                         for i, port in enumerate(sorted(ports))]
        template = template_path().read_text(encoding="utf-8")
        config = nginx_config(template, listen=listen_value(self.address, self.port),
                              upstreams=[r.address for r in self.children],
                              state_dir=self.state_dir, access_log=self.access_log)
        conf = self.state_dir / "nginx.conf"
        conf.write_text(config, encoding="utf-8")
        (self.state_dir / "tmp").mkdir(exist_ok=True)
        argv = [self.nginx, "-p", str(self.state_dir), "-c", str(conf),
                "-e", str(self.state_dir / "error.log"), "-g", "daemon off;"]
        test = subprocess.run([*argv[:-2], "-t", "-q"], capture_output=True, text=True)
        if test.returncode != 0:
            raise CommandError(f"nginx refused the config {conf}: {last_line(test.stderr)}")
        for r in self.children:
            self.start_replica(r)
        self.wait_healthy()
        self.nginx_proc = self.spawn(argv, self.state_dir / "nginx.log")
        self.wait_nginx()

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = list(self.children)
        while pending:
            for r in list(pending):
                if r.proc.poll() is not None:
                    raise CommandError(f"replica {r.index} exited with code {r.proc.returncode} "
                                       f"while starting: {last_line(read_tail(r.log))} "
                                       f"(log: {r.log})")
                if healthy(f"http://{r.address}"):
                    pending.remove(r)
            if pending and time.monotonic() > deadline:
                raise CommandError(f"replica {pending[0].index} did not answer within "
                                   f"{START_TIMEOUT_S:.0f} s (log: {pending[0].log})")
            time.sleep(0.3)

    def wait_nginx(self) -> None:
        host = "127.0.0.1" if self.address in ("0.0.0.0", "") else \
            ("::1" if self.address == "::" else self.address)
        base = f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"
        deadline = time.monotonic() + 15
        while not healthy(base, "/healthz"):
            if self.nginx_proc.poll() is not None or time.monotonic() > deadline:
                raise CommandError("nginx did not start: "
                                   f"{last_line(read_tail(self.state_dir / 'error.log'))}")
            time.sleep(0.2)

    def watch_once(self) -> None:
        """One look at every process: nginx gone stops the server; a replica gone is
        started again on its port (nginx keeps sending its sessions elsewhere meanwhile)."""
        if self.nginx_proc.poll() is not None:
            raise CommandError(f"nginx stopped (code {self.nginx_proc.returncode}): "
                               f"{last_line(read_tail(self.state_dir / 'error.log'))}")
        now = time.monotonic()
        for r in self.children:
            if r.proc.poll() is None:
                continue
            if r.restart_at is None:
                delay = RESTART_DELAYS_S[min(r.restarts, len(RESTART_DELAYS_S) - 1)]
                r.restart_at = now + delay
                say(f"replica {r.index} ({r.address}) exited with code {r.proc.returncode}; "
                    f"its sessions move to the others; restarting it in {delay:.0f} s")
            elif now >= r.restart_at:
                r.restarts += 1
                self.start_replica(r)
                say(f"replica {r.index} restarted (pid {r.proc.pid})")

    def stop(self) -> None:
        """nginx first (no new requests), then the replicas: SIGTERM, then SIGKILL."""
        self.stopping = True
        procs = [p for p in [self.nginx_proc, *(r.proc for r in self.children)] if p]
        for p in procs:
            if p.poll() is None:
                try:
                    p.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def healthy(base: str, path: str = "/_stcore/health") -> bool:
    try:
        with urllib.request.urlopen(base + path, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def read_tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def say(message: str) -> None:
    print(f"attention-lab serve: {message}", flush=True)


class Stop(Exception):
    """SIGTERM or SIGHUP: stop like Ctrl-C."""


def _raise_stop(signum, frame):
    raise Stop(signal.Signals(signum).name)


# ---- the command --------------------------------------------------------------------------
def cmd_serve(args) -> int:
    check_replicas(args.replicas)
    if not math.isfinite(args.max_model_mb) or args.max_model_mb < 0:  # nan: no cap, silently
        raise CommandError(f"--max-model-mb {args.max_model_mb:g}: give a size in MB, or 0 "
                           "for no cap")
    nginx = find_nginx(args.nginx)
    check_port(args.address, args.port)
    policy = policy_env(args.allow_local_paths, args.allow_hub, args.max_model_mb)
    env = {**APP_ENV, **os.environ, **policy, **thread_env(args.replicas, os.environ),
           # one secret for every replica: a session's XSRF cookie (uploads) stays valid on
           # the replica it fails over to
           "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32)}
    own_dir = args.state_dir is None
    state_dir = Path(tempfile.mkdtemp(prefix="attention-lab-serve-") if own_dir
                     else args.state_dir).expanduser().resolve()
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file there, a folder that cannot hold one (/proc), no right
        raise CommandError(f"--state-dir {str(state_dir)!r}: cannot make the folder "
                           f"({err.strerror or type(err).__name__})") from err
    # nginx's workers drop root for its default user, which must reach the temp folders
    os.chmod(state_dir, 0o755)
    server = Server(args.replicas, args.port, args.address, nginx, env, state_dir,
                    access_log=args.access_log)
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        say(f"starting {args.replicas} replica{'s' if args.replicas > 1 else ''} "
            f"(logs in {state_dir})")
        server.start()
        for r in server.children:
            say(f"replica {r.index}: http://{r.address} (pid {r.proc.pid})")
        shown = "localhost" if args.address in ("0.0.0.0", "::") else args.address
        say(f"policy: {policy_line(policy)}")
        say(f"open http://{shown}:{args.port} (nginx pid {server.nginx_proc.pid}); "
            "Ctrl-C stops everything")
        while True:
            server.watch_once()
            time.sleep(0.5)
    except (KeyboardInterrupt, Stop) as why:
        say(f"stopping ({why or 'Ctrl-C'})")
        return 0
    finally:
        # a second Ctrl-C or SIGTERM must not cut the stop short and leave processes behind
        held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, *previous)}
        server.stop()
        for s, handler in {**held, **previous}.items():
            signal.signal(s, handler)
        if own_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


def add_parser(sub) -> None:
    """The `serve` subcommand (attention_lab/cli.py calls this)."""
    sv = sub.add_parser(
        "serve", help="serve a class: N app processes behind nginx",
        description="Start N app processes on free loopback ports and Debian's nginx in front "
        "of them on --port: sticky sessions by cookie, websockets proxied, a dead replica "
        "skipped (its students reconnect to another, with the same view) and restarted. The "
        "model policy starts closed for a shared server; the --allow-* flags open it.")
    sv.add_argument("--replicas", type=int, default=1,
                    help=f"app processes, one a core (1 to {cores()} here; default 1)")
    sv.add_argument("--port", type=int, default=8080, help="nginx's port (default 8080)")
    sv.add_argument("--address", default="0.0.0.0",
                    help="address nginx listens on (default 0.0.0.0: every interface)")
    sv.add_argument("--nginx", metavar="PATH", help="the nginx binary (default: found on "
                    "PATH or /usr/sbin/nginx)")
    sv.add_argument("--allow-local-paths", action="store_true",
                    help="let users load models from folders on this server (default: off)")
    sv.add_argument("--allow-hub", action="store_true",
                    help="let users name Hugging Face Hub models (default: off)")
    sv.add_argument("--max-model-mb", type=float, default=DEFAULT_MAX_MODEL_MB, metavar="MB",
                    help=f"largest model's weights in MB (default {DEFAULT_MAX_MODEL_MB}; "
                    "0: no cap)")
    sv.add_argument("--state-dir", metavar="DIR", help="where the nginx config, pid and logs "
                    "go (default: a temporary folder, removed on exit)")
    sv.add_argument("--access-log", action="store_true", help="write nginx's access log")
    sv.set_defaults(func=cmd_serve)
