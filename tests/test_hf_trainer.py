"""Hugging Face accelerate and transformers' Trainer on tpu with no user
setting: `import torch_tpu` names tpu as accelerate's device (its documented
ACCELERATE_TORCH_DEVICE, see torch_tpu/patches/accelerate_device.py), and the
Trainer, unchanged, trains a tiny Llama on tpu with the CPU run's losses."""
import os

import pytest
import torch

accelerate = pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def test_import_names_tpu_for_accelerate():
    assert os.environ["ACCELERATE_TORCH_DEVICE"] == "tpu"
    assert accelerate.Accelerator().device.type == "tpu"


def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 64, (8, 12), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def train(tmp_path, use_cpu):
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=4, learning_rate=1e-2,
        logging_steps=1, report_to=[], save_strategy="no", seed=0, use_cpu=use_cpu, dataloader_num_workers=0,
        disable_tqdm=True)
    model = tiny_llama()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    device = next(trainer.model.parameters()).device.type
    return [h["loss"] for h in trainer.state.log_history if "loss" in h], device


def test_trainer_on_tpu_equals_cpu(tmp_path, monkeypatch):
    tpu_losses, tpu_device = train(tmp_path / "tpu", use_cpu=False)
    assert tpu_device == "tpu"
    # accelerate lets ACCELERATE_TORCH_DEVICE win over use_cpu=True: a CPU run names the CPU there too.
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cpu")
    cpu_losses, cpu_device = train(tmp_path / "cpu", use_cpu=True)
    assert cpu_device == "cpu"
    assert len(tpu_losses) == 4
    assert tpu_losses == pytest.approx(cpu_losses, rel=1e-4)
    assert tpu_losses[-1] < tpu_losses[0]
