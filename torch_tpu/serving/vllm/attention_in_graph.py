"""The compiled model as one program per token bucket, attention included.

With the model compiled, vLLM hands ``TpuCompiler`` the whole model graph
(no splitting ops, ``patches/vllm_config.py``). Each attention layer is in it
as two opaque vLLM ops that look their KV cache and the step's metadata up in
vLLM's forward context at run time: ``unified_kv_cache_update`` and
``unified_attention_with_output``. ``rewrite`` replaces them with tensor ops
(``step_kv``, ``attend``) over inputs the graph gains:

- each layer's KV cache, read as it was before the step;
- the step's token rows ``[3, T]`` (each token's request, position and
  context, ``attention.plan_token_rows``);
- the whole block table ``[rows, width]``.

The graph also returns each cache's step rows (the step's keys and values),
which ``write_caches`` then writes into their slots in a program of its own:
a program that writes a cache in place must not also read it, or XLA copies
the whole cache each step (measured: 5.6 ms a step for a 32 MiB cache read
and written in one program, 0.17 ms for the write alone). ``StepInputs``
reads the step's tensors from the forward context at each call.

Attention is per token: token t reads the keys of its request's block table
row (those before the step) and the step's own keys of its request, up to
its position. The work is ``T x keys`` key rows per layer, which is why
``enabled`` turns this off where that gather at ``max_model_len`` keys would
exceed ``GATHER_LIMIT_BYTES``; the piecewise path (attention.py's groups)
then serves. In steps of up to ``max_num_seqs`` tokens (decoding) the table
is cut to the bucket of the blocks the longest sequence fills
(``key_blocks``): the table's width is a symbol of the graph, and each
(token bucket, key blocks) pair is a program that the warm-up builds.
"""

from __future__ import annotations

import contextlib

import torch

from ... import settings

# Above this, a step's per-token key gather (tokens x keys x KV row bytes, one
# layer) costs more than the pieces' dispatch it saves.
GATHER_LIMIT_BYTES = 256 << 20
# Token buckets: more compiled variants of write_caches than Dynamo keeps by default.
_VARIANTS = 256


def enabled(vllm_config) -> bool:
    """Whether this engine runs causal attention inside the model's program:
    TORCH_TPU_VLLM_ONE_PROGRAM, a compiled (not eager) generative model, and
    a per-token key gather within GATHER_LIMIT_BYTES."""
    from vllm.config import CompilationMode

    model = vllm_config.model_config
    if not settings.get("TORCH_TPU_VLLM_ONE_PROGRAM") or model is None or model.enforce_eager:
        return False
    if vllm_config.compilation_config.mode != CompilationMode.VLLM_COMPILE:
        return False
    if model.runner_type == "pooling":
        return False
    block = vllm_config.cache_config.block_size
    keys = -(-model.max_model_len // block) * block
    row = 2 * model.get_num_kv_heads(vllm_config.parallel_config) * model.get_head_size() * model.dtype.itemsize
    return vllm_config.scheduler_config.max_num_batched_tokens * keys * row <= GATHER_LIMIT_BYTES


def key_blocks(num_tokens: int, longest: int, block_size: int, width: int, max_decode_rows: int) -> int:
    """Block table columns a step's program reads: the bucket of the blocks
    its longest sequence fills in steps of up to max_decode_rows tokens, the
    whole width in longer ones."""
    if _forced_key_blocks is not None:
        return min(_forced_key_blocks, width)
    if num_tokens > max_decode_rows:
        return width
    from .attention import key_blocks as bucketed
    return bucketed(max(1, longest), block_size, width)


_forced_key_blocks = None


@contextlib.contextmanager
def forced_key_blocks(blocks: int):
    """Within: every step's table is cut to ``blocks`` columns (the
    warm-up's way to build each (token bucket, key blocks) program)."""
    global _forced_key_blocks
    _forced_key_blocks = blocks
    try:
        yield
    finally:
        _forced_key_blocks = None


def key_block_counts(block_size: int, width: int) -> list[int]:
    """Every value key_blocks gives below the whole width."""
    return sorted({key_blocks(1, c, block_size, width, 1) for c in range(1, width * block_size + 1)} - {width})


def _slots(slot_mapping, block_size):
    """Block and offset of each slot; padding tokens (slot -1) go to block 0, vLLM's null block."""
    slots = slot_mapping.clamp(min=0).to(torch.int64)
    blocks = torch.div(slots, block_size, rounding_mode="floor")
    return blocks, slots - blocks * block_size


def write_kv(key, value, kv_cache, slot_mapping):
    """Scatters the step's keys and values into their KV slots (one layer,
    eagerly: vLLM's do_kv_cache_update)."""
    n = slot_mapping.shape[0]
    write_caches(slot_mapping, [kv_cache], [step_kv(key[:n], value[:n], kv_cache)])


def write_caches(slot_mapping, caches, new_kvs):
    """Each cache's step rows (``step_kv``) written into their slots, in
    place: a program that only writes its caches updates them where they
    lie; one that also reads them (the model's) would copy each whole cache."""
    blocks, offsets = _slots(slot_mapping, caches[0].shape[2])
    for cache, kv in zip(caches, new_kvs):
        cache[blocks, :, offsets] = kv


_compiled_write = None


def write_step_rows(slot_mapping, caches, new_kvs):
    """write_caches as one program per token bucket (its caches donated)."""
    global _compiled_write
    if _compiled_write is None:
        from torch_tpu.compiler import tpu_backend

        _compiled_write = torch.compile(write_caches, backend=tpu_backend, dynamic=False, fullgraph=True)
    with torch._dynamo.config.patch(recompile_limit=_VARIANTS, accumulated_recompile_limit=_VARIANTS * 4):
        _compiled_write(slot_mapping, list(caches), list(new_kvs))


def step_kv(key, value, kv_cache):
    """The step's keys and values as KV cache rows [T, kv_heads, 2d]."""
    return torch.cat([key, value], dim=-1).to(kv_cache.dtype)


def attend(query, new_kv, kv_cache, token_rows, block_table, output, scale: float):
    """Causal paged attention of the step's tokens, written into ``output``.

    query [T, heads, d]; kv_cache [blocks, kv_heads, block_size, 2d];
    token_rows [3, T]: each token's request, position, and its request's
    tokens already in the cache before this step (-1 for padding tokens,
    ``attention.plan_token_rows``); block_table [rows, width].

    With new_kv (the step's rows, ``step_kv``), the cache is read as it was
    before the step (keys at positions below the context) and the step's own
    keys come from new_kv (same request, position up to the token's); without,
    the step's keys are already in the cache and keys up to the token's
    position are read from it. Padding tokens attend to padding tokens only."""
    t, heads, d = query.shape
    _, kv_heads, block_size, _ = kv_cache.shape
    group = heads // kv_heads
    request, position, context = token_rows[0], token_rows[1], token_rows[2]
    blocks = block_table.index_select(0, request).to(torch.int64)  # [T, width]
    keys = blocks.shape[1] * block_size
    cached = kv_cache[blocks].permute(0, 2, 1, 3, 4).reshape(t, kv_heads, keys, 2 * d)
    q = query.reshape(t, kv_heads, group, d).float()
    scores = torch.matmul(q, cached[..., :d].float().transpose(-1, -2)) * scale  # [T, kv_heads, group, keys]
    key_index = torch.arange(keys, device=query.device)[None, :]
    visible = key_index < context[:, None] if new_kv is not None else key_index <= position[:, None]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    if new_kv is None:
        out = torch.matmul(torch.softmax(scores, dim=-1), cached[..., d:].float())  # [T, kv_heads, group, d]
    else:
        own = new_kv.float().permute(1, 0, 2)  # [kv_heads, T, 2d]
        q_by_head = q.permute(1, 0, 2, 3).reshape(kv_heads, t * group, d)
        step_scores = torch.matmul(q_by_head, own[..., :d].transpose(-1, -2)) * scale  # [kv_heads, T * group, T]
        step_scores = step_scores.view(kv_heads, t, group, t).permute(1, 0, 2, 3)
        owner = torch.where(context >= 0, request, -1)
        step_visible = (owner[:, None] == owner[None, :]) & (position[None, :] <= position[:, None])
        step_scores = step_scores.masked_fill(~step_visible[:, None, None, :], float("-inf"))
        probs = torch.softmax(torch.cat([scores, step_scores], dim=-1), dim=-1)
        out = torch.matmul(probs[..., :keys], cached[..., d:].float())
        step_probs = probs[..., keys:].permute(1, 0, 2, 3).reshape(kv_heads, t * group, t)
        out = out + torch.matmul(step_probs, own[..., d:]).view(kv_heads, t, group, d).permute(1, 0, 2, 3)
    output.copy_(out.reshape(output.shape).to(output.dtype))


def _kind(node) -> str | None:
    """"update" or "attention" for vLLM's two attention ops (as an op or its overload), else None."""
    if node.op != "call_function":
        return None
    ops = torch.ops.vllm
    for kind, packet in (("update", ops.unified_kv_cache_update), ("attention", ops.unified_attention_with_output)):
        if node.target is packet or node.target is packet.default:
            return kind
    return None


def _declined(reason: str):
    from vllm.logger import init_logger

    init_logger(__name__).warning("tpu: the model runs in pieces between attention ops, not as one program: %s",
                                  reason)
    return None


def _layer_name(gm, arg, example_inputs) -> str:
    """A layer name argument as a str: a str or vLLM's LayerName (an opaque
    object), given directly, as a graph attribute or as a graph input."""
    if isinstance(arg, torch.fx.Node):
        if arg.op == "get_attr":
            arg = getattr(gm, arg.target)
        elif arg.op == "placeholder":
            arg = example_inputs[[n for n in gm.graph.nodes if n.op == "placeholder"].index(arg)]
    real = getattr(arg, "real_obj", arg)
    name = getattr(real, "value", real)
    if not isinstance(name, str):
        raise TypeError(f"tpu: cannot read an attention layer's name from {arg!r}")
    return name


class StepInputs:
    """The step's tensors, read from vLLM's forward context at each call:
    (KV caches, slot mapping, token rows, block table). A call without
    attention metadata (a dummy run) gets padding-token values: every token
    writes to the null block."""

    def __init__(self, layers, name, t_from, table_shape, device):
        self.layers = layers
        self.name = name
        self.t_from = t_from  # (argument index, dim) giving T, or (index, None) for an int argument
        self.table_shape = table_shape
        self.device = device
        self._dummies = {}

    def _dummy(self, t):
        if t not in self._dummies:
            rows = torch.zeros((3, t), dtype=torch.int64)
            rows[2] = -1
            self._dummies[t] = (torch.full((t,), -1, dtype=torch.int64).to(self.device), rows.to(self.device),
                                torch.zeros(self.table_shape, dtype=torch.int32).to(self.device))
        return self._dummies[t]

    def __call__(self, args):
        from vllm.forward_context import get_forward_context

        context = get_forward_context()
        metadata = context.attn_metadata
        m = metadata.get(self.name) if isinstance(metadata, dict) else None
        caches = [layer.kv_cache for layer in self.layers]
        if m is None or m.token_rows is None:
            index, dim = self.t_from
            t = int(args[index] if dim is None else args[index].shape[dim])
            return (caches, *self._dummy(t))
        rows, width = m.block_table.shape
        if rows != self.table_shape[0] or width > self.table_shape[1]:
            raise RuntimeError(f"tpu attention: the block table is {tuple(m.block_table.shape)}, the "
                               f"model's program was built for {self.table_shape[0]} rows of at most "
                               f"{self.table_shape[1]} blocks")
        return caches, m.slot_mapping, m.token_rows, m.block_table


def _t_source(example_inputs, t_sym):
    """Where T can be read from the compiled function's arguments."""
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) and x.node.expr == t_sym.node.expr:
            return i, None
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            for dim, size in enumerate(x.shape):
                if isinstance(size, torch.SymInt) and size.node.expr == t_sym.node.expr:
                    return i, dim
    return None


def whole_table_shape(block_table) -> tuple[int, int]:
    """(rows, width) of the block table a step's table is cut from
    (key_blocks): a cut keeps the whole table's row stride."""
    rows, width = block_table.shape
    return rows, max(width, block_table.stride(0))


def _width_symbol(fake_mode, width: int):
    """A new size symbol (hint: width) for the block table's columns."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    shape_env = fake_mode.shape_env
    source = ConstantSource("tpu_key_blocks")
    symbol = shape_env.create_symbol(width, source, dynamic_dim=DimDynamic.DYNAMIC)
    return shape_env.create_symintnode(symbol, hint=width, source=source)


def rewrite(gm: torch.fx.GraphModule, example_inputs):
    """Replaces the graph's vLLM attention ops in place (module docstring).
    Returns (extra example inputs: caches, token rows, block table;
    StepInputs; the graph's own output count, after which come each cache's
    step rows), or None where the graph has no attention op or one this
    rewrite does not cover (then nothing changed)."""
    from vllm.forward_context import get_forward_context, is_forward_context_available

    nodes = [n for n in gm.graph.nodes if _kind(n)]
    if not nodes:
        return None
    if not is_forward_context_available():
        return _declined("the graph was compiled outside a model step")
    context = get_forward_context()
    layers = context.no_compile_layers
    attention_nodes = [n for n in nodes if _kind(n) == "attention"]
    names = {n: _layer_name(gm, n.args[4] if _kind(n) == "attention" else n.args[2], example_inputs) for n in nodes}
    for n in attention_nodes:
        if any(n.kwargs.get(k) is not None for k in ("output_scale", "output_block_scale")):
            return _declined("an attention layer has fused output quantization")
        impl = layers[names[n]].impl
        if getattr(impl, "attn_type", None) != "decoder":
            return _declined(f"layer {names[n]} is {getattr(impl, 'attn_type', None)} attention")
    t_sym = attention_nodes[0].args[0].meta["example_value"].shape[0]
    t_from = _t_source(example_inputs, t_sym) if isinstance(t_sym, torch.SymInt) else None
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    if t_from is None or fake_mode is None:
        return _declined("the graph's token count is not symbolic")
    first = names[attention_nodes[0]]
    metadata = context.attn_metadata
    m = metadata.get(first) if isinstance(metadata, dict) else None
    if m is None or m.token_rows is None:
        return _declined("the graph was traced in a step without attention metadata")
    table_shape = whole_table_shape(m.block_table)

    # One input per distinct KV cache tensor (layers that share a cache share it).
    cache_layers, cache_index = [], {}
    for name in dict.fromkeys(names.values()):
        cache = layers[name].kv_cache
        if cache.numel() == 0:
            return _declined("the KV caches are not allocated yet")
        key = id(cache)
        if key not in cache_index:
            cache_index[key] = len(cache_layers)
            cache_layers.append(layers[name])
    device = cache_layers[0].kv_cache.device
    # Each cache is written once, by the layer that owns it, before any layer reads it.
    written = set()
    for n in nodes:
        which = cache_index[id(layers[names[n]].kv_cache)]
        if _kind(n) == "update":
            if which in written:
                return _declined(f"two layers write the KV cache of {names[n]}")
            written.add(which)
        elif which not in written:
            return _declined(f"layer {names[n]} reads a KV cache before a layer writes it")
    if len(written) != len(cache_layers):
        return _declined("a KV cache that no layer writes")
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    results = output.args[0]
    if not isinstance(results, (tuple, list)):
        return _declined("the graph's outputs are not a tuple")

    last_placeholder = [n for n in graph.nodes if n.op == "placeholder"][-1]
    extras = []

    def add_input(label, fake):
        nonlocal last_placeholder
        with graph.inserting_after(last_placeholder):
            node = graph.placeholder(label)
        node.meta["example_value"] = node.meta["val"] = fake
        last_placeholder = node
        extras.append(fake)
        return node

    with fake_mode:
        cache_inputs = [add_input(f"tpu_kv_cache_{i}", fake_mode.from_tensor(layer.kv_cache, static_shapes=True))
                        for i, layer in enumerate(cache_layers)]
        rows = add_input("tpu_token_rows", torch.empty((3, t_sym), dtype=torch.int64, device=device))
        table = add_input("tpu_block_table", torch.empty((table_shape[0], _width_symbol(fake_mode, table_shape[1])),
                                                         dtype=torch.int32, device=device))

    # Each cache's step rows: a graph output, written by write_caches after
    # the model's program; the attention of a layer reads them, and the
    # cache as it was before the step.
    step_rows = [None] * len(cache_layers)
    for n in nodes:
        which = cache_index[id(layers[names[n]].kv_cache)]
        with graph.inserting_before(n):
            if _kind(n) == "update":
                        new = step_rows[which] = graph.call_function(step_kv, (n.args[0], n.args[1], cache_inputs[which]))
            else:
                scale = float(layers[names[n]].impl.scale)
                new = graph.call_function(attend, (n.args[0], step_rows[which], cache_inputs[which], rows, table,
                                                   n.args[3], scale))
        new.meta.update(n.meta)
        n.replace_all_uses_with(new)
        graph.erase_node(n)
    output.args = (tuple(results) + tuple(step_rows),)
    graph.lint()
    gm.recompile()
    return extras, StepInputs(cache_layers, first, t_from, table_shape, device), len(results)
