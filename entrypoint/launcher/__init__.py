"""The launcher's process: read the marker, the VL_* knobs and the host's GPUs, decide (decide.py), then exec
`vllm serve` or supervise it and the bridge (supervise.py). Stdlib only. main.py is the command line (launch.py
runs it); what the bridge is given is ../contract.py.
"""
