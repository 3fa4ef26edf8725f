"""pytest-nlc: the nl-conformance checks of a kernel repository as pytest items (plugin.py)."""
