"""The compiled model as one program per token bucket, attention included.

With the model compiled, vLLM hands ``TpuCompiler`` the whole model graph
(no splitting ops, ``patches/vllm_config.py``). Each attention layer is in it
as two opaque vLLM ops that look their KV cache and the step's metadata up in
vLLM's forward context at run time: ``unified_kv_cache_update`` and
``unified_attention_with_output``. ``rewrite`` replaces them with tensor ops
(``write_kv``, ``attend``) over inputs the graph gains:

- each layer's KV cache, updated in place by the program;
- the step's slot mapping ``[T]`` and token rows ``[2, T]`` (each token's
  request and position, ``attention.token_rows``);
- the whole block table ``[rows, width]``.

``StepInputs`` reads those tensors from the forward context at each call, so
the program, not Python, does the attention and KV writes.

Attention is per token: token t reads the ``width * block_size`` keys of its
request's block table row and attends to those at positions <= its own. The
work is ``T x max_model_len`` key rows per layer, which is why ``enabled``
turns this off where that gather would exceed ``GATHER_LIMIT_BYTES``; the
piecewise path (attention.py's groups) then serves.
"""

from __future__ import annotations

import torch

from ... import settings

# Above this, a step's per-token key gather (tokens x keys x KV row bytes, one
# layer) costs more than the pieces' dispatch it saves.
GATHER_LIMIT_BYTES = 256 << 20


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


def write_kv(key, value, kv_cache, slot_mapping):
    """Scatters the step's keys and values into their KV slots (padding
    tokens carry slot -1 and write to block 0, vLLM's null block). Returns
    vLLM's dummy dependency tensor."""
    block_size = kv_cache.shape[2]
    slots = slot_mapping.clamp(min=0).to(torch.int64)
    blocks = torch.div(slots, block_size, rounding_mode="floor")
    offsets = slots - blocks * block_size
    n = slot_mapping.shape[0]
    kv_cache[blocks, :, offsets] = torch.cat([key[:n], value[:n]], dim=-1).to(kv_cache.dtype)
    return key.new_empty(0)


def attend(query, kv_cache, token_rows, block_table, output, scale: float):
    """Causal paged attention of the step's tokens, written into ``output``.

    query [T, heads, d]; kv_cache [blocks, kv_heads, block_size, 2d];
    token_rows [2, T] (request, position); block_table [rows, width]."""
    t, heads, d = query.shape
    _, kv_heads, block_size, _ = kv_cache.shape
    group = heads // kv_heads
    blocks = block_table.index_select(0, token_rows[0]).to(torch.int64)  # [T, width]
    keys = blocks.shape[1] * block_size
    kv = kv_cache[blocks].permute(0, 2, 1, 3, 4).reshape(t, kv_heads, keys, 2 * d)
    k, v = kv[..., :d].float(), kv[..., d:].float()
    q = query.reshape(t, kv_heads, group, d).float()
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [T, kv_heads, group, keys]
    visible = torch.arange(keys, device=query.device)[None, :] <= token_rows[1][:, None]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1), v)  # [T, kv_heads, group, d]
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
    """The inputs ``rewrite`` adds to the graph, read from vLLM's forward
    context at each call: the KV caches, then slot mapping, token rows and
    block table. A call without attention metadata (a dummy run) gets
    padding-token values: every token writes to the null block."""

    def __init__(self, layers, name, t_from, table_shape, device):
        self.layers = layers
        self.name = name
        self.t_from = t_from  # (argument index, dim) giving T, or (index, None) for an int argument
        self.table_shape = table_shape
        self.device = device
        self._dummies = {}

    def _dummy(self, t):
        if t not in self._dummies:
            self._dummies[t] = (torch.full((t,), -1, dtype=torch.int64).to(self.device),
                                torch.zeros((2, t), dtype=torch.int64).to(self.device),
                                torch.zeros(self.table_shape, dtype=torch.int32).to(self.device))
        return self._dummies[t]

    def __call__(self, args) -> list[torch.Tensor]:
        from vllm.forward_context import get_forward_context

        context = get_forward_context()
        metadata = context.attn_metadata
        m = metadata.get(self.name) if isinstance(metadata, dict) else None
        caches = [layer.kv_cache for layer in self.layers]
        if m is None or m.token_rows is None:
            index, dim = self.t_from
            t = int(args[index] if dim is None else args[index].shape[dim])
            return caches + list(self._dummy(t))
        if tuple(m.block_table.shape) != self.table_shape:
            raise RuntimeError(f"tpu attention: the block table is {tuple(m.block_table.shape)}, the "
                               f"model's program was built for {self.table_shape}")
        return caches + [m.slot_mapping, m.token_rows, m.block_table]


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


def rewrite(gm: torch.fx.GraphModule, example_inputs):
    """Replaces the graph's vLLM attention ops in place (module docstring).
    Returns (extra example inputs, StepInputs), or None where the graph has
    no attention op or one this rewrite does not cover (then nothing changed)."""
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
    table_shape = tuple(m.block_table.shape)

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

    graph = gm.graph
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
        slots = add_input("tpu_slot_mapping", torch.empty((t_sym,), dtype=torch.int64, device=device))
        rows = add_input("tpu_token_rows", torch.empty((2, t_sym), dtype=torch.int64, device=device))
        table = add_input("tpu_block_table", torch.empty(table_shape, dtype=torch.int32, device=device))

    for n in nodes:
        cache = cache_inputs[cache_index[id(layers[names[n]].kv_cache)]]
        with graph.inserting_before(n):
            if _kind(n) == "update":
                new = graph.call_function(write_kv, (n.args[0], n.args[1], cache, slots))
            else:
                scale = float(layers[names[n]].impl.scale)
                new = graph.call_function(attend, (n.args[0], cache, rows, table, n.args[3], scale))
        new.meta.update(n.meta)
        n.replace_all_uses_with(new)
        graph.erase_node(n)
    graph.lint()
    gm.recompile()
    return extras, StepInputs(cache_layers, first, t_from, table_shape, device)
