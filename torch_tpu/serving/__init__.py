"""Serving engines on tpu: platform plugins for vLLM (``torch_tpu.serving.vllm``)
and SGLang (``torch_tpu.serving.sglang``).

vLLM installs with ``bash scripts/setup.sh --serving``, SGLang with
``bash scripts/setup.sh --sglang``. Each plugin is found through its engine's entry point (pyproject.toml) and needs
no import by the user."""
