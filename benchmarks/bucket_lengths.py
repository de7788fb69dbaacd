"""Shape buckets against a program per length: transformers' Llama (small
config) trained with torch.compile(backend="tpu", dynamic=True) over a range
of sequence lengths, once with buckets (powers of two) and once with them off.
Prints programs compiled, total time over the lengths, and the steady step time
of a repeated pass.

    python benchmarks/bucket_lengths.py --lengths 8-32

The persistent compile cache is off (TORCH_TPU_CACHE=0) so both runs compile
cold; the bucketed run goes first, so eager ops' in-process cache favours the
other.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("TORCH_TPU_CACHE", "0")  # before torch loads torch_tpu

import torch  # noqa: E402

import torch_tpu  # noqa: E402


def model():
    import transformers
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to("tpu")


def run(buckets, lengths, batch):
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    torch_tpu.compiler.set_shape_buckets(buckets)
    m = model()
    step = torch.compile(m, backend="tpu", dynamic=True)

    def one(t):
        ids = torch.randint(0, 96, (batch, t))
        loss = step(ids.to("tpu"), labels=ids.to("tpu")).loss
        loss.backward()
        m.zero_grad(set_to_none=True)
        return loss.item()

    t0 = time.perf_counter()
    for t in lengths:
        one(t)
    first_pass = time.perf_counter() - t0
    times = []
    for t in lengths:  # everything compiled now: the steady cost per step
        t1 = time.perf_counter()
        one(t)
        times.append(time.perf_counter() - t1)
    s = torch_tpu.compile_stats()
    return dict(compiles=s["compiles"], compile_s=s["compile_seconds"], first_pass_s=first_pass,
                step_ms=statistics.median(times) * 1e3, fallbacks=s["bucket_fallbacks"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="8-32", help="a range lo-hi (inclusive)")
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.lengths.split("-"))
    lengths = list(range(lo, hi + 1))
    torch_tpu.compiler.register()
    results = {b: run(b, lengths, args.batch) for b in ("pow2", "off")}
    torch_tpu.compiler.set_shape_buckets("pow2")
    print(f"{len(lengths)} lengths {lo}..{hi}, batch {args.batch}, forward + backward")
    print(f"{'buckets':<8} {'programs':>8} {'compile s':>10} {'first pass s':>13} {'steady ms/step':>15}")
    for b, r in results.items():
        print(f"{b:<8} {r['compiles']:>8} {r['compile_s']:>10.1f} {r['first_pass_s']:>13.1f} {r['step_ms']:>15.1f}")
        if r["fallbacks"]:
            print("  per exact shape:", r["fallbacks"])
    p, o = results["pow2"], results["off"]
    print(f"buckets/off: first pass {p['first_pass_s'] / o['first_pass_s']:.2f}x, "
          f"steady step {p['step_ms'] / o['step_ms']:.2f}x")


if __name__ == "__main__":
    main()
