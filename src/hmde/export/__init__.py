"""Deployment formats: ONNX graphs (optionally int8) and a runtime that needs no PyTorch."""
