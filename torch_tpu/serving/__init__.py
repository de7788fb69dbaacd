"""Serving engines on tpu: platform plugins for vLLM (``torch_tpu.serving.vllm``).

Install the engine with ``bash scripts/setup.sh --serving``; the plugins are
found through their packages' entry points and need no import by the user."""
