"""CTC loss (aten::_ctc_loss and _ctc_loss_backward, both overloads): every
reduction, zero_infinity, padded 2-D and concatenated 1-D targets, lengths
as tensors and as int lists, unbatched input, repeated labels, a blank other
than 0, impossible alignments; compared with the CPU forward and backward."""
import pytest
import torch
import torch.nn.functional as F

from optest import OpCase, parametrize, run_case, same_error

FLOATS64 = (torch.float32, torch.float64)
TOLS = dict(rtol=1e-4, atol=1e-4)


def log_probs(shape, dtype, i):
    return torch.randn(shape, generator=torch.Generator().manual_seed(i), dtype=torch.float64).log_softmax(-1).to(dtype)


# Targets (labels 1..4, repeats included) for N = 3 samples of at most 4 labels.
TARGETS = [[1, 2, 2, 3], [4, 1, 0, 0], [3, 3, 1, 0]]
TARGET_LENGTHS = [4, 2, 3]


def ctc(reduction="mean", zero_infinity=False, input_lengths=(8, 6, 7), target_lengths=TARGET_LENGTHS,
        concatenated=False, as_tensors=False, blank=0, targets=TARGETS):
    def fn(lp):
        dev = lp.device
        if concatenated:
            t = torch.tensor([v for row, n in zip(targets, target_lengths) for v in row[:n]], device=dev)
        else:
            t = torch.tensor(targets, device=dev)
        if blank != 0:
            t = torch.where(t == blank, torch.zeros_like(t), t)
        il, tl = list(input_lengths), list(target_lengths)
        if as_tensors:
            il, tl = torch.tensor(il, device=dev), torch.tensor(tl, device=dev)
        return F.ctc_loss(lp, t, il, tl, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    return fn


def unbatched(lp):
    t = torch.tensor([1, 2, 2], device=lp.device)
    return F.ctc_loss(lp, t, [lp.shape[0]], [3])


LP = [[(8, 3, 5)]]

CASES = [
    OpCase("ctc_mean", ctc(), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_sum", ctc("sum"), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_none", ctc("none"), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_tensor_lengths", ctc("none", as_tensors=True), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_concatenated", ctc("sum", concatenated=True), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_concatenated_tensor_lengths", ctc("mean", concatenated=True, as_tensors=True), LP, FLOATS64,
           make=log_probs, grad=True, **TOLS),
    OpCase("ctc_blank_last", ctc("none", blank=4), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    # Sample 0 needs 4 labels + 1 repeat separator in 3 steps: impossible.
    OpCase("ctc_impossible", ctc("none", input_lengths=(3, 6, 7)), LP, FLOATS64, make=log_probs, grad=True, **TOLS),
    OpCase("ctc_zero_infinity", ctc("none", zero_infinity=True, input_lengths=(3, 6, 7)), LP, FLOATS64,
           make=log_probs, grad=True, **TOLS),
    OpCase("ctc_zero_infinity_mean", ctc("mean", zero_infinity=True, input_lengths=(3, 6, 7)), LP, FLOATS64,
           make=log_probs, grad=True, **TOLS),
    OpCase("ctc_empty_target", ctc("none", target_lengths=(0, 2, 3)), LP, FLOATS64, make=log_probs, grad=True,
           **TOLS),
    OpCase("ctc_unbatched", unbatched, [[(6, 5)]], FLOATS64, make=log_probs, grad=True, **TOLS),
]


@parametrize(CASES)
def test_ctc_loss(case, shapes, dtype):
    run_case(case, shapes, dtype)


def test_ctc_module_matches_cpu():
    lp = log_probs((10, 2, 6), torch.float32, 3)
    targets = torch.tensor([[1, 5, 5, 2], [3, 4, 0, 0]])
    loss = torch.nn.CTCLoss(blank=0, reduction="mean", zero_infinity=True)
    x = lp.clone().requires_grad_()
    ref = loss(x, targets, torch.tensor([10, 9]), torch.tensor([4, 2]))
    ref.backward()
    y = lp.to("tpu").requires_grad_()
    got = loss(y, targets.to("tpu"), torch.tensor([10, 9]).to("tpu"), torch.tensor([4, 2]).to("tpu"))
    got.backward()
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(y.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)


def test_bad_arguments_raise():
    lp = log_probs((6, 2, 5), torch.float32, 0)
    t = torch.tensor([[1, 2, 3], [1, 2, 3]])
    same_error(F.ctc_loss, lp, t, [7, 6], [3, 2])          # input length > T
    same_error(F.ctc_loss, lp, t, [6, 6], [4, 2])          # target length > targets' width
    same_error(F.ctc_loss, lp, t, [6, 6, 6], [3, 2, 1])    # lengths not of batch size
    same_error(lambda lp, t: F.ctc_loss(lp, t, [6, 6], [3, 2], blank=5), lp, t)
    with pytest.raises(RuntimeError, match="float32 and float64"):  # the CPU: NotImplementedError
        F.ctc_loss(lp.to(torch.bfloat16).to("tpu"), t.to("tpu"), [6, 6], [3, 2])
