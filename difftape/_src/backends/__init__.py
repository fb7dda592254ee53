"""Backends: compile generated kernel source for a device and return launchable programs."""
