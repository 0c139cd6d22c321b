"""What the side-by-side checks (`.ci/*_side_by_side.py`, Envoy 1.40 and the
gateway on one bootstrap) share: a work directory, the processes they
start, stopped however the check ends (its end, a signal, a watchdog over
the whole run), free ports, and waits that are always bounded.
SBS_KEEP=1 keeps the work directory."""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

WAIT_S = 15  # the longest any single wait may take

_children = []
_work = None
_name = "side by side"


def begin(name, overall_s):
    """Starts a check called `name` (its messages say so): cleanup at exit
    and on SIGTERM/SIGINT, a watchdog after `overall_s`, a work directory."""
    global _work, _name
    _name = name
    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    dog = threading.Timer(overall_s, _watchdog, (overall_s,))
    dog.daemon = True
    dog.start()
    _work = tempfile.mkdtemp(prefix=name.replace(" ", "-") + "-")
    return _work


def work_dir():
    return _work


def cleanup():
    for p in _children:
        if p.poll() is None:
            try:
                p.terminate()
            except OSError:
                pass
    deadline = time.time() + 3
    for p in _children:
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                p.wait(2)
            except subprocess.TimeoutExpired:
                pass
    if _work and os.path.isdir(_work) and not os.environ.get("SBS_KEEP"):
        shutil.rmtree(_work, ignore_errors=True)


def _on_signal(signum, _frame):
    cleanup()
    os._exit(128 + signum)


def _watchdog(overall_s):
    print(f"{_name}: gave up after {overall_s} s", file=sys.stderr, flush=True)
    cleanup()
    os._exit(2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(log):
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            return "".join(f.readlines()[-30:])
    return ""


def wait_for(what, cond, timeout=WAIT_S, proc=None, log=None):
    """`cond()`'s first truthy value within `timeout`, else RuntimeError
    (with `log`'s tail); gives up at once when `proc` exits."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            what += f" (it exited with status {proc.returncode})"
            break
        time.sleep(0.05)
    tail = log_tail(log)
    raise RuntimeError(f"timed out waiting for {what}" + (f"; log tail:\n{tail}" if tail else ""))


def write_bootstrap(label, boot):
    import json

    path = os.path.join(_work, f"{label}.yaml")
    with open(path, "w") as f:
        json.dump(boot, f, indent=1)  # JSON is YAML; both proxies read it as such
    return path


def spawn(argv, log):
    with open(log, "w") as logf:
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    _children.append(proc)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
