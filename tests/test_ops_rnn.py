"""nn.LSTM / GRU / RNN and their cells on tpu: outputs, final states and every
gradient (input, initial states, parameters) equal PyTorch's on the CPU, in
strict eager, fused eager and (LSTM) torch.compile; packed sequences with
unsorted lengths; nothing falls back to the CPU (conftest makes a fallback
an error)."""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_tpu

F32_TOL = dict(rtol=1e-4, atol=1e-5)
BF16_TOL = dict(rtol=2e-2, atol=2e-2)


def tensors_of(out):
    """The tensors of a module's output: (y, h) or (y, (h, c)), y maybe packed."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "batch_sizes"):  # PackedSequence
        return [out.data]
    return [t for o in out for t in tensors_of(o)]


def run(module, inputs, device, dtype):
    """Forward and backward of `module` (a copy, moved to device/dtype) on
    copies of `inputs`; returns outputs, input grads and parameter grads."""
    m = copy.deepcopy(module).to(device=device, dtype=dtype)
    leaves = [x.detach().to(device=device, dtype=dtype).requires_grad_() for x in inputs]
    outs = tensors_of(m(*leaves))
    weights = [torch.linspace(-1, 1, o.numel(), device=device, dtype=dtype).view(o.shape) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights)).backward()
    grads = [x.grad for x in leaves] + [p.grad for p in m.parameters()]
    return [t.detach().cpu().float() for t in outs + grads]


def check(module, inputs, dtype=torch.float32):
    """tpu equals the CPU: float32 exactly as PyTorch's tolerances; bfloat16
    against the CPU in float32 on the same (bf16-rounded) values."""
    torch_tpu.reset_fallback_ops()
    if dtype == torch.bfloat16:
        module = copy.deepcopy(module).to(torch.bfloat16)
        inputs = [x.to(torch.bfloat16) for x in inputs]
    expected = run(module, inputs, "cpu", torch.float32)
    actual = run(module, inputs, "tpu", dtype)
    tol = F32_TOL if dtype == torch.float32 else BF16_TOL
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, **tol, msg=lambda m: f"tensor {i}: {m}")
    assert torch_tpu.fallback_ops() == {}


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def seeded(factory, seed=0):
    torch.manual_seed(seed)
    return factory()


# (name, module factory, input shape: (seq, batch, features) or batch first,
#  number of initial states, their last size, whether to pass them)
LAYERS = [
    ("lstm_2layer_bidir_h0c0", lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True), (3, 2, 3), 4, 4, True),
    ("lstm_batch_first_no_bias", lambda: nn.LSTM(3, 4, bias=False, batch_first=True), (2, 3, 3), 1, 4, False),
    ("lstm_batch1_seq1_h0c0", lambda: nn.LSTM(3, 4), (1, 1, 3), 1, 4, True),
    ("lstm_proj_h0c0", lambda: nn.LSTM(3, 4, num_layers=2, proj_size=2, bidirectional=True), (3, 2, 3), 4, 2, True),
    ("gru_2layer_bidir_h0", lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True), (3, 2, 3), 4, 4, True),
    ("gru_batch_first_no_bias", lambda: nn.GRU(3, 4, bias=False, batch_first=True), (2, 3, 3), 1, 4, False),
    ("gru_batch1_seq1", lambda: nn.GRU(3, 4), (1, 1, 3), 1, 4, False),
    ("rnn_tanh_2layer", lambda: nn.RNN(3, 4, num_layers=2), (3, 2, 3), 2, 4, False),
    ("rnn_relu_bidir_h0", lambda: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True), (3, 2, 3), 2, 4, True),
]


def layer_inputs(module, shape, n_states, hidden, with_state):
    x = randn(*shape, seed=1)
    if not with_state:
        return [x]
    batch = shape[0] if module.batch_first else shape[1]
    h0 = randn(n_states, batch, hidden, seed=2)
    if isinstance(module, nn.LSTM):
        c0 = randn(n_states, batch, module.hidden_size, seed=3)
        return [x, h0, c0]
    return [x, h0]


class WithState(nn.Module):
    """module(x, h0) or module(x, (h0, c0)) with the states as leaves."""

    def __init__(self, module):
        super().__init__()
        self.m = module

    def forward(self, x, h0, c0=None):
        return self.m(x, h0 if c0 is None else (h0, c0))


@pytest.mark.parametrize("name,factory,shape,n_states,hidden,with_state", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_cpu(name, factory, shape, n_states, hidden, with_state):
    module = seeded(factory)
    inputs = layer_inputs(module, shape, n_states, hidden, with_state)
    check(WithState(module) if with_state else module, inputs)


def test_layer_bfloat16():
    """(The GRU and RNN cells' bfloat16 runs are in test_cell_unbatched_and_default_state.)"""
    check(seeded(lambda: nn.LSTM(3, 4)), [randn(3, 2, 3, seed=1)], torch.bfloat16)


CELLS = [
    ("lstm_cell", lambda: nn.LSTMCell(3, 4), True),
    ("lstm_cell_no_bias", lambda: nn.LSTMCell(3, 4, bias=False), True),
    ("gru_cell", lambda: nn.GRUCell(3, 4), False),
    ("gru_cell_no_bias", lambda: nn.GRUCell(3, 4, bias=False), False),
    ("rnn_cell_relu", lambda: nn.RNNCell(3, 4, nonlinearity="relu"), False),
]


class CellLoop(nn.Module):
    """Three steps of a cell, feeding its state back (as a user loop does)."""

    def __init__(self, cell, lstm):
        super().__init__()
        self.cell, self.lstm = cell, lstm

    def forward(self, x, h, c=None):
        outs = []
        for t in range(x.shape[0]):
            if self.lstm:
                h, c = self.cell(x[t], (h, c))
            else:
                h = self.cell(x[t], h)
            outs.append(h)
        return torch.stack(outs) if c is None else (torch.stack(outs), c)


@pytest.mark.parametrize("batch", [2, 1])
@pytest.mark.parametrize("name,factory,lstm", CELLS, ids=[c[0] for c in CELLS])
def test_cell_matches_cpu(name, factory, lstm, batch):
    inputs = [randn(3, batch, 3, seed=1), randn(batch, 4, seed=2)]
    if lstm:
        inputs.append(randn(batch, 4, seed=3))
    check(CellLoop(seeded(factory), lstm), inputs)


@pytest.mark.parametrize("name,factory,lstm", CELLS[::2], ids=[c[0] for c in CELLS[::2]])
def test_cell_unbatched_and_default_state(name, factory, lstm):
    check(seeded(factory), [randn(3, seed=1)])
    check(seeded(factory), [randn(2, 3, seed=1)], torch.bfloat16)


class Packed(nn.Module):
    """pack_padded_sequence (unsorted lengths, on the CPU as PyTorch wants)
    -> module -> pad_packed_sequence."""

    def __init__(self, module, lengths):
        super().__init__()
        self.m, self.lengths = module, lengths

    def forward(self, x):
        p = pack_padded_sequence(x, self.lengths, batch_first=self.m.batch_first, enforce_sorted=False)
        y, state = self.m(p)
        out, lengths = pad_packed_sequence(y, batch_first=self.m.batch_first)
        assert lengths.device.type == "cpu" and lengths.tolist() == self.lengths.tolist()
        return out, state


# Lengths [2, 4, 2]: unsorted, and only two distinct step batch sizes (3, 1).
@pytest.mark.parametrize("factory,shape", [
    (lambda: nn.LSTM(3, 4, bidirectional=True), (4, 3, 3)),
    (lambda: nn.GRU(3, 4, batch_first=True, bidirectional=True), (3, 4, 3)),
    (lambda: nn.LSTM(3, 4, num_layers=2, proj_size=2), (4, 3, 3)),
], ids=["lstm_bidir", "gru_batch_first_bidir", "lstm_2layer_proj"])
def test_packed_sequence_unsorted_lengths(factory, shape):
    check(Packed(seeded(factory), torch.tensor([2, 4, 2])), [randn(*shape, seed=1)])


def test_fused_eager_matches_cpu():
    lstm = seeded(lambda: nn.LSTM(3, 4, bidirectional=True))
    gru = seeded(lambda: nn.GRU(3, 4, batch_first=True))
    with torch_tpu.eager_mode("fused"):
        check(Packed(lstm, torch.tensor([2, 4, 2])), [randn(4, 3, 3, seed=1)])
        check(gru, [randn(2, 5, 3, seed=1)])


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(8, 4, batch_first=True)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.gru(self.lstm(x)[0])[0])


def test_compiled_lstm_gru_matches_cpu():
    import torch_tpu.compiler

    torch_tpu.compiler.register()
    torch._dynamo.reset()
    model = seeded(Tagger)
    x = randn(2, 3, 3, seed=1)
    expected = run(model, [x], "cpu", torch.float32)
    m = copy.deepcopy(model).to("tpu")
    compiled = torch.compile(m, backend="tpu")
    xd = x.to("tpu").requires_grad_()
    out = compiled(xd)
    w = torch.linspace(-1, 1, out.numel(), device="tpu").view(out.shape)
    (out * w).sum().backward()
    actual = [out, xd.grad] + [p.grad for p in m.parameters()]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.detach().cpu(), e, **F32_TOL)
    assert torch_tpu.compile_stats()["eager_graphs"] == {}
    torch._dynamo.reset()


@pytest.mark.parametrize("make", [
    lambda: (nn.LSTM(3, 4), (randn(3, 2, 3), (randn(1, 2, 5), randn(1, 2, 4)))),
    lambda: (nn.GRU(3, 4), (randn(3, 2, 3), randn(1, 2, 3))),
    lambda: (nn.LSTMCell(3, 4), (randn(2, 3), (randn(2, 5), randn(2, 4)))),
    lambda: (nn.GRUCell(3, 4), (randn(2, 3), randn(3, 4))),
    lambda: (nn.LSTM(3, 4), (randn(5, 2, 6),)),
], ids=["lstm_hidden", "gru_hidden", "lstm_cell_hidden", "gru_cell_batch", "lstm_input_size"])
def test_bad_sizes_raise_pytorch_error(make):
    module, args = make()

    def to(a, dev):
        return tuple(to(x, dev) for x in a) if isinstance(a, tuple) else a.to(dev)

    with pytest.raises(RuntimeError) as cpu:
        module(*args)
    m = copy.deepcopy(module).to("tpu")
    with pytest.raises(RuntimeError) as tpu:
        m(*to(args, "tpu"))
    assert str(tpu.value) == str(cpu.value)
