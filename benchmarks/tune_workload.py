"""A benchmarks/run.py workload (benchmarks/workloads/torch/<name>.py) as a
torch_tpu.tune workload, in the tuner's step form:

    python -m torch_tpu.tune benchmarks/tune_workload.py --budget 300 -- gpt2

The workload's name is the script's first argument (default mlp). A training
workload hands the tuner its model, optimizer and loss function, so TrainStep
is among the candidates; a decode workload feeds its outputs back (carry).
Tokens per step: a 2-D integer first input's elements (token ids), else its
first size (samples).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads import ALL  # noqa: E402
from workloads import torch as torch_workloads  # noqa: E402

import torch_tpu.tune  # noqa: E402

NAME = sys.argv[1] if len(sys.argv) > 1 else "mlp"
if NAME not in ALL:
    raise SystemExit(f"tune_workload.py: unknown workload {NAME!r} (choose from {', '.join(ALL)})")


def make_step(device):
    w = torch_workloads.build(NAME, device)
    model, opt, loss_fn = getattr(w.fn, "parts", (None, None, None))
    first = w.args[0]
    tokens = first.numel() if first.dim() == 2 and not first.is_floating_point() else first.shape[0]
    return torch_tpu.tune.Step(w.fn, w.args, carry=w.carry, model=model, loss_fn=loss_fn, optimizer=opt,
                               tokens=int(tokens), check=w.check)
