"""Starts a Python module in a process that already has torch imported (docs/spec/conformance.md#zygote).

    python -m nlc_zygote MODULE [ARG...]      # as `python -m MODULE [ARG...]`, served by the zygote
    python -m nlc_zygote --serve SOCKET LOCK  # the zygote itself (started by the first launcher)

Importing torch costs about 1.5 CPU seconds, and a run of the suite starts Python many times (the
C9 bridge, a kernel host and a reference bridge per `py:` backend). The zygote imports torch once
and forks a child per request; the launcher (this module, which does not import torch) hands the
zygote its stdin, stdout and stderr, and mirrors the child: its exit status, the signal that
killed it, and SIGINT/SIGTERM/SIGHUP sent to the launcher reach the child. When the launcher dies
(a time limit's SIGKILL), the zygote kills the child, so nothing outlives its caller.

One zygote serves one interpreter and one environment as far as importing torch can see it (the
PYTHON*, OMP_*, MKL_*, TORCH*, CUDA*, TRITON*, LD_* variables ... are part of its socket's name);
the rest of the environment, the working directory and the arguments are the request's. It exits
after IDLE_S seconds without a request or a child. Anything that keeps the launcher from being
served (no zygote can start, a socket error) falls back to `python -m MODULE` itself, as does
NLC_TORCH_ZYGOTE=0.
"""
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

IDLE_S = 60.0
START_WAIT_S = 60.0
ENV_PREFIXES = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS", "DNNL", "ONEDNN", "TORCH", "PYTORCH", "CUDA", "NVIDIA",
                "LD_", "TRITON", "HIP", "ROCM", "XLA", "NLC_TORCH_ZYGOTE")


def _paths():
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES))
    st = os.stat(__file__)
    # sys.prefix: a venv's python is a link to the same binary with other packages (its own jax, torch)
    key = json.dumps([os.path.realpath(sys.executable), sys.prefix, sys.version, env, [st.st_mtime_ns, st.st_size]])
    h = hashlib.sha256(key.encode()).hexdigest()[:16]
    base = os.path.join(tempfile.gettempdir(), f"nlc-zygote-{os.getuid()}-{h}")
    return base + ".sock", base + ".lock", base + ".log"


def _direct(module, args):
    os.execv(sys.executable, [sys.executable, "-m", module, *args])


def _connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def _serve_connection(sock_path, lock_path, log_path):
    s = _connect(sock_path)
    if s is not None:
        return s
    with open(log_path, "ab") as log:
        server = subprocess.Popen([sys.executable, "-m", "nlc_zygote", "--serve", sock_path, lock_path], stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=log, start_new_session=True, cwd="/", env=os.environ.copy())
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.02)
        s = _connect(sock_path)
        if s is not None:
            return s
        # exit 0: another zygote of this key holds the lock (it is starting: wait for it);
        # anything else: this one failed (its log says why), so the caller runs the module itself
        if server.poll() not in (None, 0):
            return None
    return None


class _Lines:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def next(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def launch(module, args):
    if os.environ.get("NLC_TORCH_ZYGOTE") == "0":
        _direct(module, args)
    # A signal before the child exists ends the launcher as it would have ended python; once the
    # request is sent it is held until the child's pid is known, then passed on.
    state = {"sent": False, "pid": None, "pending": []}

    def forward(sig, _frame):
        if state["pid"] is not None:
            try:
                os.kill(state["pid"], sig)
            except ProcessLookupError:
                pass
        elif state["sent"]:
            state["pending"].append(sig)
        else:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    try:
        s = _serve_connection(*_paths())
        if s is None:
            raise OSError("no zygote answered")
        req = json.dumps({"module": module, "args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode() + b"\n"
        state["sent"] = True
        socket.send_fds(s, [req], [0, 1, 2])
    except OSError:
        state["sent"] = False
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        _direct(module, args)  # nothing was started: run the module here
        return 1
    # From here on a child may be running with this process's stdio: never start a second one.
    lines = _Lines(s)
    try:
        first = lines.next()
    except OSError as e:
        first = repr(e)
    if first is None or not first.startswith("pid "):
        sys.stderr.write(f"nlc_zygote: the zygote did not start {module}: {first!r}\n")
        return 1
    pid = int(first[4:])
    state["pid"] = pid
    for sig in state["pending"]:
        forward(sig, None)
    try:
        status = lines.next()
    except OSError:
        status = None
    if status is None:
        sys.stderr.write(f"nlc_zygote: lost the zygote while {module} (pid {pid}) ran\n")
        forward(signal.SIGKILL, None)
        return 1
    kind, _, n = status.partition(" ")
    if kind == "signal":
        sig = int(n)
        try:
            import resource
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP have no handler to reset
        os.kill(os.getpid(), sig)
        return 128 + sig
    return int(n)


# ── the zygote ──────────────────────────────────────────────────────────────────────────────

def _child(req, fds, close):
    """In the forked child: become `python -m MODULE ARGS` with the request's stdio, environment and directory."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for c in close:
            try:
                c.close() if hasattr(c, "close") else os.close(c)
            except OSError:
                pass
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        zygote_pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        rest = [p for p in sys.path[1:] if p not in zygote_pp]
        sys.path[:] = [req["cwd"], *pp, *rest]
        sys.argv = [req["module"], *req["args"]]
        import runpy
        code = 0
        try:
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                sys.stderr.write(f"{e.code}\n")
                code = 1
        except KeyboardInterrupt:
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        import atexit
        atexit._run_exitfuncs()
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(code)


def serve(sock_path, lock_path):
    import fcntl
    import selectors
    lock = open(lock_path, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another zygote of this key is starting or running
    import torch  # noqa: F401  (the point: children inherit it imported)
    try:
        os.unlink(sock_path)
    except FileNotFoundError:
        pass
    old = os.umask(0o077)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    os.umask(old)
    srv.listen(64)
    ino = os.stat(sock_path).st_ino
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    children = {}  # pid -> the launcher's connection
    last = time.monotonic()
    while True:
        timeout = None if children else max(0.0, IDLE_S - (time.monotonic() - last))
        events = sel.select(timeout)
        if not events and not children and time.monotonic() - last >= IDLE_S:
            break
        for key, _ in events:
            if key.data == "accept":
                conn, _ = srv.accept()
                last = time.monotonic()
                try:
                    conn.settimeout(10)
                    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                    while not msg.endswith(b"\n"):
                        more = conn.recv(1 << 20)
                        if not more:
                            raise OSError("the launcher closed its request")
                        msg += more
                    if len(fds) != 3:
                        raise OSError(f"expected 3 descriptors, got {len(fds)}")
                    req = json.loads(msg)
                except (OSError, ValueError) as e:
                    sys.stderr.write(f"nlc_zygote: bad request: {e}\n")
                    conn.close()
                    continue
                conns = [k.fileobj for k in sel.get_map().values() if k.data not in ("accept", "wake")]
                pid = os.fork()
                if pid == 0:
                    _child(req, fds, [sel, srv, lock, wake_r, wake_w, conn, *conns])
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                try:
                    conn.settimeout(None)
                    conn.sendall(f"pid {pid}\n".encode())
                    sel.register(conn, selectors.EVENT_READ, pid)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
            elif key.data == "wake":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                while children:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    last = time.monotonic()
                    if conn is None:
                        continue
                    try:
                        sel.unregister(conn)
                    except (KeyError, ValueError):
                        pass
                    line = f"signal {os.WTERMSIG(status)}\n" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}\n"
                    try:
                        conn.sendall(line.encode())
                    except OSError:
                        pass
                    conn.close()
            else:
                # the launcher's connection: readable only when it closed (it sends nothing more)
                pid = key.data
                try:
                    gone = key.fileobj.recv(64) == b""
                except OSError:
                    gone = True
                if gone:
                    sel.unregister(key.fileobj)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    try:
        if os.stat(sock_path).st_ino == ino:
            os.unlink(sock_path)
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2], sys.argv[3]))
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -m nlc_zygote MODULE [ARG...]\n")
        sys.exit(2)
    sys.exit(launch(sys.argv[1], sys.argv[2:]))
