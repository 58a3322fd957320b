"""The in-image launcher: probe the host, decide, exec `vllm serve`.

Stdlib only (huggingface_hub is imported lazily by hfcache when a cached model
must be verified). launch.py is the command line; every other module does one job.
"""
