"""The keep-alive bridge's process: the relay (relay.py, api.py) and every concern it serves beside it, one
module each: vLLM's health (health: one GET /health and its last answer for all), the key (auth), the status page (status, monitor, phases, metrics, gpus), the watchdog, swapping
(swap), the journal's uploads (uploader, journal), idle stop (podstop). bridge.py runs it; what the launcher
gives it is ../contract.py.
"""
