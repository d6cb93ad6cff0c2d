"""Conformance: material nobody on braze wrote, run through braze and compared
with eager PyTorch: PyTorch's OpInfo database (``conformance.opinfo``) and real
models built from configs with random weights (``conformance.models``)."""
