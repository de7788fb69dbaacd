"""Views and mutation behave exactly as in PyTorch: a write through any view
reaches the base and every other view of the same storage."""
import pytest
import torch


def both(fn, *shapes):
    """Runs fn on CPU tensors and on tpu copies; returns (cpu result, tpu result)."""
    xs = [torch.arange(torch.Size(s).numel(), dtype=torch.float32).reshape(s) for s in shapes]
    return fn(*[x.clone() for x in xs]), fn(*[x.to("tpu") for x in xs])


def check(fn, *shapes):
    c, d = both(fn, *shapes)
    if not isinstance(c, tuple):
        c, d = (c,), (d,)
    for a, b in zip(c, d):
        assert b.device.type == "tpu"
        assert a.shape == b.shape and a.stride() == b.stride(), (a.stride(), b.stride())
        torch.testing.assert_close(b.cpu(), a)


VIEW_READS = {
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(-1),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(1, 0),
    "t": lambda x: x.t(),
    "slice": lambda x: x[1:3, ::2],
    "select": lambda x: x[2],
    "narrow": lambda x: x.narrow(1, 2, 3),
    "expand": lambda x: x[:1].expand(5, 6),
    "as_strided": lambda x: x.as_strided((3, 3), (7, 1), 2),
    "squeeze_unsqueeze": lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(0),
    "diagonal": lambda x: x.diagonal(),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "split": lambda x: x.split(2, dim=1),
    "chunk": lambda x: x.chunk(2, dim=0),
    "unbind": lambda x: x.unbind(0),
    "view_of_view": lambda x: x.t()[1:4].transpose(0, 1)[::2],
    "reshape_noncontiguous_copies": lambda x: x.t().reshape(-1),
}


@pytest.mark.parametrize("name", list(VIEW_READS))
def test_view_reads(name):
    check(VIEW_READS[name], (4, 6))


def write_slice(x):
    v = x[1:3]
    v.add_(100)
    return x, v


def write_transposed(x):
    v = x.t()
    v[0].fill_(-1)
    return x, v


def write_strided(x):
    x[:, ::2].mul_(2)
    return x


def write_expanded_source(x):
    x[0].copy_(x[1:2].expand(1, 6)[0])
    return x


def two_views_see_each_other(x):
    a = x[:, 1:]
    b = x.view(-1)
    a.zero_()
    return x, a, b


def inplace_on_diagonal(x):
    x.diagonal().add_(5)
    return x


def setitem_patterns(x):
    x[0] = 7
    x[:, 2] = torch.arange(4.0, device=x.device)
    x[1:3, 4:] = 0.5
    return x


def out_of_view_write(x):
    y = torch.empty(2, 3, device=x.device)
    torch.add(x[:2, :3], 1, out=y)
    return y


def resize_and_set(x):
    y = x.clone()
    y.resize_(30)
    y[24:] = 1
    z = torch.empty(0, device=x.device)
    z.set_(x)
    return y[:24], z


def narrow_copy_between_layouts(x):
    y = torch.zeros(6, 4, device=x.device)
    y.copy_(x.t())
    y[::2].copy_(x[:4, :3].t())  # strided target, transposed source
    return y


WRITES = [write_slice, write_transposed, write_strided, write_expanded_source, two_views_see_each_other,
          inplace_on_diagonal, setitem_patterns, out_of_view_write, resize_and_set,
          narrow_copy_between_layouts]


@pytest.mark.parametrize("fn", WRITES, ids=lambda f: f.__name__)
def test_writes_through_views(fn):
    check(fn, (4, 6))


def test_out_resizes_like_cpu():
    x = torch.randn(3, 4)
    out = torch.empty(0, device="tpu")
    torch.mul(x.to("tpu"), 2, out=out)
    assert out.shape == (3, 4)
    torch.testing.assert_close(out.cpu(), x * 2)


def test_view_keeps_storage_alive():
    x = torch.randn(4, 4)
    v = x.to("tpu")[1:3]
    torch.testing.assert_close(v.cpu(), x[1:3])


def test_storage_shared():
    x = torch.zeros(4, device="tpu")
    y = x.view(2, 2)
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    y[0, 0] = 3
    assert x[0].item() == 3
