"""One training step as one program: forward, backward and the optimizer update.

torch.compile of a plain loop gives at least two programs per step: PyTorch's
optimizers break the graph around `step()` on purpose, and `backward()` is a
graph of its own. `TrainStep` traces the gradient with `torch.func` and calls
the optimizer's own update (the same code `opt.step()` runs, without its graph
breaks) inside the same compiled function, so after the first calls (which
also create the optimizer state) each step is one XLA program whose
parameters and optimizer state are updated in place (buffer donation)."""
import inspect

import torch
from torch.func import functional_call, grad_and_value

__all__ = ["TrainStep"]


class _LossOf(torch.nn.Module):
    """loss_fn(model, *batch) as a module, so that functional_call can run it
    with the parameters the gradient transform traces."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, *batch):
        return self.loss_fn(self.model, *batch)


class TrainStep:
    """`step = TrainStep(model, loss_fn, optimizer)`, then `loss = step(*batch)`.

    `loss_fn(model, *batch)` returns the scalar loss (it calls the model
    itself, so any forward signature works). The step sets each parameter's `.grad`
    (as `backward()` would) and updates the parameters and the optimizer state
    as `optimizer.step()` would; it returns the loss, detached. Hooks on the
    optimizer, gradient clipping and schedulers' own steps stay outside: call
    them around it as usual (`scheduler.step()` after it). Extra keyword
    arguments go to torch.compile (`backend` defaults to "tpu").
    """

    def __init__(self, model, loss_fn, optimizer, **compile_kwargs):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"TrainStep: optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        # The step's own update, under PyTorch's wrappers (profiling hooks, and
        # the grad-mode switch that breaks the graph on purpose).
        update = inspect.unwrap(type(optimizer).step)
        if update is type(optimizer).step:
            raise TypeError(f"TrainStep: {type(optimizer).__name__}.step is not a standard torch.optim step "
                            "(no __wrapped__ update function); call optimizer.step() yourself")
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self._update = update
        self._with_loss = _LossOf(model, loss_fn)
        self._names = [n for n, p in model.named_parameters() if p.requires_grad]
        in_optimizer = {id(p) for g in optimizer.param_groups for p in g["params"]}
        missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in in_optimizer]
        if missing:
            raise ValueError(f"TrainStep: parameters {missing[:4]} are not in the optimizer")
        compile_kwargs.setdefault("backend", "tpu")
        self._compiled = torch.compile(self._step, **compile_kwargs)

    def _loss(self, params, buffers, *batch):
        state = {"model." + n: t for n, t in {**params, **buffers}.items()}
        return functional_call(self._with_loss, state, batch)

    def _step(self, *batch):
        named = dict(self.model.named_parameters())
        params = {n: named[n].detach() for n in self._names}
        # Buffers go in as arguments, so the forward may update them (batch
        # norm's running statistics) inside the gradient transform.
        buffers = dict(self.model.named_buffers())
        grads, loss = grad_and_value(self._loss)(params, buffers, *batch)
        with torch.no_grad():
            # Written into the existing .grad tensors: rebinding a parameter's
            # .grad would make Dynamo break the graph before the update.
            for n in self._names:
                named[n].grad.copy_(grads[n])
            self._update(self.optimizer)
        return loss.detach()

    def __call__(self, *batch):
        if not batch:
            raise TypeError("TrainStep: call it with the batch, step(inputs, targets, ...)")
        for n, p in self.model.named_parameters():
            if n in self._names and p.grad is None:  # first call, or zero_grad(set_to_none=True)
                p.grad = torch.zeros_like(p)
        return self._compiled(*batch)


def eager_train_step(model, loss_fn, optimizer):
    """The plain training step that TrainStep replaces, as one function:
    `step(*batch)` runs zero_grad, loss_fn(model, *batch), backward() and
    optimizer.step() and returns the loss, detached."""
    def step(*batch):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, *batch)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step
