#!/usr/bin/env python3
"""Standing attack suite (issue #26): hostile inputs to the loader, the CLI and the server, each
case bounded in time. A case passes when the program answers with a clean error (or succeeds
where that is right): an exit status, never a signal; an HTTP status, never a 500 or a hang.

    tests/attack/attack.py BUILD_BIN_DIR [--quick] [--only GROUP[,GROUP...]]

Prints one line per failure and, at the end, `cases N, clean errors E, failures F`; exits 1 when
any case failed. --quick runs fewer loader mutations (CI uses the default); --only runs the named
groups (the functions called from main(), e.g. truncated_model)."""
import json
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/bin"
CLOVER = os.path.join(BIN, "clover")
MODEL = os.path.join(BIN, "models", "default.gguf")
QUICK = "--quick" in sys.argv
TMP = tempfile.mkdtemp(prefix="clover-attack-")

cases = clean = 0
failures = []


def record(name, ok, clean_error, detail=""):
    global cases, clean
    cases += 1
    if ok:
        clean += 1 if clean_error else 0
    else:
        failures.append(name)
        print(f"FAIL {name}: {detail}", flush=True)


def run(args, stdin=b"", timeout=30):
    """(returncode, stderr); returncode < 0 is a signal, None a timeout."""
    try:
        p = subprocess.run([CLOVER] + args, input=stdin, capture_output=True, timeout=timeout)
        return p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return None, "timed out"


def expect_clean_exit(name, args, stdin=b"", want_error=None, timeout=30):
    rc, err = run(args, stdin, timeout)
    ok = rc is not None and rc >= 0 and "terminate called" not in err and (want_error is None or re.search(want_error, err))
    record(name, ok, rc not in (None, 0), f"rc={rc} stderr={err[-300:]!r}")
    return rc, err


# ---- the loader: truncations and byte flips of the shipped model (fixed seed) ----
def loader_mutations():
    data = open(MODEL, "rb").read()
    rng = random.Random(26)
    n = 60 if QUICK else 300
    path = os.path.join(TMP, "mutant.gguf")
    for i in range(n):
        b = bytearray(data)
        if i % 3 == 0:
            b = b[: rng.randrange(0, min(len(b), 1 << 16))]  # the header and metadata region
        else:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(0, min(len(b), 1 << 16))] = rng.randrange(256)
        open(path, "wb").write(bytes(b))
        expect_clean_exit(f"loader mutant {i}", ["inspect", path], timeout=20)


# ---- outputs that exist and are not regular files ----
def special_outputs():
    fifo = os.path.join(TMP, "fifo")
    os.mkfifo(fifo)
    d = os.path.join(TMP, "dir")
    os.mkdir(d)
    sock_path = os.path.join(TMP, "sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock_path)
    targets = [fifo, d, sock_path]
    try:
        chardev = os.path.join(TMP, "null")
        os.mknod(chardev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        targets.append(chardev)
    except PermissionError:
        pass
    tokens = os.path.join(TMP, "ids.json")
    open(tokens, "w").write("[1, 2, 3]")
    for t in targets:
        mode = os.stat(t).st_mode
        for name, args in [("synth", ["synth", t, "--preset", "tiny"]),
                           ("patch", ["patch", MODEL, t, "--target", "qwen35moe", "-q"]),
                           ("logits --out", ["logits", "-m", MODEL, "--tokens", tokens, "--out", t])]:
            rc, err = run(args, timeout=60)
            ok = rc not in (None, 0) and rc > 0 and "exists and is" in err and os.stat(t).st_mode == mode
            record(f"{name} to {os.path.basename(t)}", ok, True, f"rc={rc} stderr={err[-200:]!r}")
    s.close()


# ---- deep nesting in the chat layer's CLI ----
def deep_nesting():
    n = 100000
    expect_clean_exit("parse qwen3 deep call", ["parse", "--format", "qwen3"],
                      ("<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":" + "[" * n + "]" * n + "}}\n</tool_call>").encode())
    tools = os.path.join(TMP, "tools.json")
    json.dump([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
              "properties": {"xs": {"type": "array"}}}}}], open(tools, "w"))
    expect_clean_exit("parse qwen35 deep array parameter", ["parse", "--format", "qwen35", "--tools", tools],
                      ("<tool_call>\n<function=f>\n<parameter=xs>\n" + "[" * n + "]" * n + "\n</parameter>\n</function>\n</tool_call>").encode())
    conv = os.path.join(TMP, "deep.json")
    open(conv, "w").write('[{"role":"user","content":' + "[" * n + "]" * n + "}]")
    tmpl = os.path.join(TMP, "t.jinja")
    open(tmpl, "w").write("{% for m in messages %}{{ m.content }}{% endfor %}")
    expect_clean_exit("template deep messages", ["template", "--template", tmpl, "--messages", conv], want_error="nests deeper")


# ---- numeric flags: each bad value is an error naming the flag and its range ----
def cli_ranges():
    bad = [("--threshold", v, "diffusion") for v in ("2", "-1", "0", "nan")] + \
          [("--block", v, "diffusion") for v in ("0", "-1")] + \
          [("-c", v, "ar") for v in ("-1", "131073", "1000000000")] + \
          [("--temp", v, "ar") for v in ("-1", "inf")] + [("--top-k", "-1", "ar"), ("-t", "-1", "ar")]
    for flag, value, mode in bad:
        rc, err = run(["run", "-m", MODEL, "-p", "hi", "-n", "1", "--mode", mode, flag, value], timeout=30)
        record(f"run {flag} {value}", rc not in (None, 0) and rc > 0 and flag in err and ("in [" in err or "in (" in err),
               True, f"rc={rc} stderr={err[-200:]!r}")
    rc, err = run(["serve", "-m", MODEL, "--port", "0", "--api-key", ""], timeout=10)
    record("serve --api-key ''", rc not in (None, 0) and rc > 0 and "--api-key" in err, True, f"rc={rc} {err[-200:]!r}")


# ---- the server ----
class Server:
    def __init__(self, *extra, port=0, model=MODEL):
        self.log = open(os.path.join(TMP, f"server{time.monotonic_ns()}.log"), "w+")
        self.p = subprocess.Popen([CLOVER, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", "1",
                                   "-c", "1024", *extra], stderr=self.log, stdout=subprocess.DEVNULL)
        self.port = None
        for _ in range(200):
            self.log.seek(0)
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.p.poll() is not None:
                break
            time.sleep(0.05)

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def wait_ready(self):
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).status == 200:
                    return True
            except Exception:
                time.sleep(0.05)
        return False

    def stop(self, timeout=10):
        """Seconds SIGTERM took to stop the server (None: it had to be killed)."""
        if self.p.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
            return time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


def request(port, path, body, timeout=20):
    return request_body(port, path, body, timeout)[0]


def request_body(port, path, body, timeout=20):
    """(status, body text); status None when there was no answer."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:
        return None, str(e)


FIELD_VALUES = ["x", -1, 0, 1e308, -1e308, None, [], {}, True, 2**63, "9" * 400, [[[]]]]
FIELDS = ["model", "messages", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
          "frequency_penalty", "repeat_penalty", "repeat_last_n", "seed", "stop", "stream", "stream_options",
          "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "enable_thinking", "n", "clover"]


def server_cases():
    s = Server("--parallel", "2", "--max-queue", "4", "--header-timeout", "2", "--body-timeout", "2")
    if not s.port or not s.wait_ready():
        record("server starts", False, False, s.output()[-500:])
        s.stop()
        return
    # The request-field matrix: every field with every wrong value answers 200 or 400, never 500.
    for f in FIELDS:
        for v in FIELD_VALUES:
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, f: v}
            st = request(s.port, "/v1/chat/completions", body)
            want = (200, 400, 404) if f == "model" else (200, 400)  # an unknown model name is a 404
            record(f"field {f}={json.dumps(v)[:20]}", st in want, st in (400, 404), f"status {st}")
    # Big and deep bodies, answered fast with the right status.
    for name, body, want in [("150k keys", b'{"content":"x","j":{' + b",".join(b'"k%d":0' % i for i in range(150000)) + b"}}", 400),
                             ("300k values", b'{"content":"x","j":[' + b"{}," * 299999 + b"{}]}", 400),
                             ("deep", b'{"content":' + b"[" * 100000 + b"]" * 100000 + b"}", 400)]:
        t0 = time.monotonic()
        st = request(s.port, "/tokenize", body)
        record(f"body {name}", st == want and time.monotonic() - t0 < 3, True, f"status {st} in {time.monotonic() - t0:.1f} s")
    # A slow header: 408 before the server's own read timeout (60 s), at its header deadline.
    c = socket.create_connection(("127.0.0.1", s.port))
    t0 = time.monotonic()
    c.sendall(b"GET /health HTTP/1.1\r\n")
    c.settimeout(10)
    try:
        got = c.recv(4096)
    except socket.timeout:
        got = b""
    record("slow header", got.startswith(b"HTTP/1.1 408") and time.monotonic() - t0 < 4, True, repr(got[:60]))
    c.close()
    # The port clash: a second server on the same port must fail.
    t = Server(port=s.port)
    rc = t.p.wait(20) if t.p.poll() is None else t.p.returncode
    record("second server on a busy port", rc not in (None, 0) and "cannot listen" in t.output(), True, t.output()[-300:])
    t.stop()
    # SIGTERM under load: streaming generations running, the server stops within 5 s.
    import threading
    threads = [threading.Thread(target=request, args=(s.port, "/v1/completions",
               {"prompt": "story", "max_tokens": 900, "ignore_eos": True, "stream": True}, 30)) for _ in range(4)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    took = s.stop(10)
    record("SIGTERM under load", took is not None and took < 5, True, f"took {took}")
    for th in threads:
        th.join(35)


# ---- the model file truncated under a running server ----
def truncated_model():
    import shutil
    import threading
    copy = os.path.join(TMP, "shrinking.gguf")
    shutil.copyfile(MODEL, copy)
    s = Server(model=copy)
    if not s.port or not s.wait_ready():
        record("truncated model: server starts", False, False, s.output()[-500:])
        s.stop()
        return
    body = {"prompt": "hi", "max_tokens": 2}
    st, _ = request_body(s.port, "/v1/completions", body)
    record("truncated model: a request before", st == 200, False, f"status {st}")
    os.truncate(copy, os.path.getsize(copy) // 2)
    # Between requests: the next one is refused with an error naming the problem; the server lives.
    st, text = request_body(s.port, "/v1/completions", body)
    record("truncated model: the next request", st is not None and st >= 500 and "truncated" in text and s.p.poll() is None,
           True, f"status {st} {text[-200:]!r} alive={s.p.poll() is None}")
    try:
        st = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/health", timeout=5).status
    except Exception as e:
        st = str(e)
    record("truncated model: /health still answers", st == 200, False, f"{st}")
    s.stop()
    # During a generation: the stream ends with an error, or the server exits with a message;
    # never a death by signal.
    shutil.copyfile(MODEL, copy)
    s = Server(model=copy)
    if not s.port or not s.wait_ready():
        record("truncated model mid-stream: server starts", False, False, s.output()[-500:])
        s.stop()
        return
    th = threading.Thread(target=request, args=(s.port, "/v1/completions",
                          {"prompt": "story", "max_tokens": 900, "ignore_eos": True, "stream": True}, 30))
    th.start()
    time.sleep(0.5)
    os.truncate(copy, 4096)
    th.join(35)
    time.sleep(0.5)
    rc = s.p.poll()
    if rc is None:
        st, text = request_body(s.port, "/v1/completions", body)
        ok = st is not None and st >= 500 and "truncated" in text
        detail = f"alive, next status {st} {text[-200:]!r}"
    else:
        ok = rc > 0 and "SIGBUS" in s.output()
        detail = f"exited rc={rc} {s.output()[-300:]!r}"
    record("truncated model mid-stream", ok, True, detail)
    s.stop()


def main():
    if not os.path.exists(MODEL):
        print(f"error: no model at {MODEL}", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    groups = [loader_mutations, special_outputs, deep_nesting, cli_ranges, truncated_model, server_cases]
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    for g in groups:
        if only is None or g.__name__ in only:
            g()
    print(f"attack suite: cases {cases}, clean errors {clean}, failures {len(failures)} ({time.monotonic() - t0:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
