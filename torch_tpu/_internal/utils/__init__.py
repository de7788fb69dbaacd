"""Helpers at the module paths of Google's TorchTPU that its callers import."""
