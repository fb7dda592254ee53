"""Exchanging arrays with other libraries: PyTorch tensors, DLPack capsules, torch autograd.

Every converter shares memory (numpy storage on the CPU); nothing here launches kernels except the
torch autograd adapter, which runs the user's function under its own tape.
"""
