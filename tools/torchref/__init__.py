"""PyTorch reference of Clover-35B-A3B (see README.md)."""
