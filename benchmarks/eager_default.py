"""Which eager mode is the better default: strict (a program per op) against
fused (a program per cluster of ops), each in a fresh process, on
- a fixed-shape training loop (the README's MLP and GPT-2 steps), where every
  step repeats the last one's clusters, and
- Hugging Face generate() with the default dynamic KV cache, where every new
  token is a new length, so no cluster repeats within a call.

Each row is cold (the first run in a process with an empty persistent compile
cache: every program compiles) and warm (the same run again: every program
cached). Prints seconds, XLA compiles, and fused / strict.

    .venv/bin/python benchmarks/eager_default.py
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("strict", "fused")


def compiles():
    import torch_tpu
    return torch_tpu.cache_info()["compiles"]


def run_training(name, steps):
    import torch
    sys.path.insert(0, HERE)
    from workloads.torch import build
    w = build(name, "tpu")
    out = {}
    for phase in ("cold", "warm"):
        before = compiles()
        start = time.perf_counter()
        for _ in range(steps):
            w.step()
        torch.tpu.synchronize()
        out[phase] = (time.perf_counter() - start, compiles() - before)
    return out


def run_generate(new_tokens):
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                      attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(config).eval().to("tpu")
    prompt = torch.randint(0, 256, (1, 8)).to("tpu")
    out = {}
    for phase in ("cold", "warm"):
        before = compiles()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        torch.tpu.synchronize()
        out[phase] = (time.perf_counter() - start, compiles() - before)
    return out


def child(mode, workload, size):
    import torch_tpu
    torch_tpu.set_eager_mode(mode)
    result = run_generate(size) if workload == "generate" else run_training(workload, size)
    print(json.dumps(result))


def measure(mode, workload, size):
    # An empty persistent compile cache: cold means every program compiles.
    with tempfile.TemporaryDirectory(prefix="eager_default_cache_") as cache:
        env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_CACHE_DIR=cache)
        proc = subprocess.run([sys.executable, __file__, "--child", mode, workload, str(size)], env=env,
                              capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {workload} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="training steps per phase")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens generate() makes per phase")
    p.add_argument("--workloads", default="mlp,gpt2,generate")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}")
    print(f"{'workload':24s} {'phase':5s} {'strict s':>9s} {'comp.':>6s} {'fused s':>9s} {'comp.':>6s} {'fused/strict':>13s}")
    for workload in args.workloads.split(","):
        size = args.new_tokens if workload == "generate" else args.steps
        label = f"generate {size} tokens" if workload == "generate" else f"{workload} {size} steps"
        r = {mode: measure(mode, workload, size) for mode in MODES}
        for phase in ("cold", "warm"):
            (ts, ps), (tf, pf) = r["strict"][phase], r["fused"][phase]
            print(f"{label:24s} {phase:5s} {ts:9.2f} {ps:6d} {tf:9.2f} {pf:6d} {tf / ts:13.2f}")


if __name__ == "__main__":
    main()
